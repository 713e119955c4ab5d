//! Any text: the assembler answers without panicking; whatever assembles disassembles in both
//! styles, and the kiln-style text reassembles to the same words, bit for bit.
#![no_main]

use kiln_qpu::isa::{Style, assemble, disasm_program};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(words) = assemble(text) else { return };
    let _ = disasm_program(&words, Style::Mesa);
    let kiln = disasm_program(&words, Style::Kiln);
    let again = assemble(&kiln).expect("kiln-style text assembles");
    assert_eq!(again, words, "kiln-style round trip");
});
