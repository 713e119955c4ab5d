//! Reading and writing programs as instruction words: raw little-endian binary (8 bytes per
//! instruction, as Mesa and py-videocore store them) or hex text.
//!
//! Hex text: `//` and `#` comments; tokens separated by whitespace or commas. A token of 16
//! hex digits is one word written bit 63 first (`golden/disasm.tsv` style); tokens of up to
//! 8 digits with a `0x` prefix are 32-bit halves, low half first (GPU_FFT `.hex` style).

/// Why a program file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WordsError {
    #[error("binary program length {0} is not a multiple of 8 bytes")]
    OddLength(usize),
    #[error("line {line}: `{token}` is not a hex instruction word")]
    BadHex { line: usize, token: String },
    #[error("an odd number of 32-bit halves ({0}): the last instruction has no high half")]
    OddHalves(usize),
    #[error("line {line}: mixes 64-bit words and 32-bit halves")]
    Mixed { line: usize },
}

/// True when `bytes` look like text (printable ASCII and whitespace only).
pub fn is_text(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
}

/// Parses raw little-endian words.
pub fn from_binary(bytes: &[u8]) -> Result<Vec<u64>, WordsError> {
    if bytes.len() % 8 != 0 {
        return Err(WordsError::OddLength(bytes.len()));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect())
}

/// Parses hex text (see the module documentation).
pub fn from_hex_text(text: &str) -> Result<Vec<u64>, WordsError> {
    let mut words = Vec::new();
    let mut halves: Vec<u32> = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let mut code = line;
        for marker in ["//", "#"] {
            if let Some(p) = code.find(marker) {
                code = &code[..p];
            }
        }
        for tok in code.split(|c: char| c.is_whitespace() || c == ',') {
            if tok.is_empty() {
                continue;
            }
            let bad = || WordsError::BadHex {
                line: ln + 1,
                token: tok.to_string(),
            };
            let (digits, prefixed) = match tok.strip_prefix("0x").or_else(|| tok.strip_prefix("0X"))
            {
                Some(d) => (d, true),
                None => (tok, false),
            };
            if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            if digits.len() == 16 {
                if !halves.is_empty() {
                    return Err(WordsError::Mixed { line: ln + 1 });
                }
                words.push(u64::from_str_radix(digits, 16).map_err(|_| bad())?);
            } else if prefixed && digits.len() <= 8 {
                if !words.is_empty() {
                    return Err(WordsError::Mixed { line: ln + 1 });
                }
                halves.push(u32::from_str_radix(digits, 16).map_err(|_| bad())?);
            } else {
                return Err(bad());
            }
        }
    }
    if !halves.is_empty() {
        if halves.len() % 2 != 0 {
            return Err(WordsError::OddHalves(halves.len()));
        }
        words = halves
            .chunks_exact(2)
            .map(|p| ((p[1] as u64) << 32) | p[0] as u64)
            .collect();
    }
    Ok(words)
}

/// Parses a program file: hex text when it looks like text, raw binary otherwise.
pub fn parse(bytes: &[u8]) -> Result<Vec<u64>, WordsError> {
    if is_text(bytes) {
        from_hex_text(std::str::from_utf8(bytes).unwrap_or(""))
    } else {
        from_binary(bytes)
    }
}

/// Raw little-endian bytes of a program.
pub fn to_binary(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        let w = 0x1002_0827_1582_7d80u64;
        assert_eq!(from_hex_text("1002082715827d80 # c\n").unwrap(), vec![w]);
        assert_eq!(
            from_hex_text("0x15827d80, 0x10020827, // mov r0, unif\n").unwrap(),
            vec![w]
        );
        assert_eq!(parse(&to_binary(&[w, 7])).unwrap(), vec![w, 7]);
    }

    #[test]
    fn errors() {
        assert_eq!(from_binary(&[0; 9]), Err(WordsError::OddLength(9)));
        assert!(matches!(
            from_hex_text("xyz"),
            Err(WordsError::BadHex { line: 1, .. })
        ));
        assert_eq!(from_hex_text("0x1"), Err(WordsError::OddHalves(1)));
        assert!(matches!(
            from_hex_text("0x1 0x2\n1002082715827d80"),
            Err(WordsError::Mixed { line: 2 })
        ));
        assert!(matches!(
            from_hex_text("12345"),
            Err(WordsError::BadHex { .. })
        ));
    }
}
