//! Parsing and validation with naga, keeping its `ModuleInfo` (types, uniformity, sampling).

use crate::FrontError;
use naga::valid::{Capabilities, ModuleInfo, ValidationFlags, Validator};
use std::path::Path;

/// A source language naga reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Wgsl,
    /// GLSL 450; the stage comes from the file name.
    Glsl(naga::ShaderStage),
    SpirV,
}

/// A shader source: its language and bytes.
#[derive(Clone, Debug)]
pub struct Source {
    pub name: String,
    pub language: Language,
    pub bytes: Vec<u8>,
}

impl Source {
    /// Guesses the language from the file name: `.wgsl`, `.spv`, and GLSL's `.vert` / `.frag`
    /// (also `.vert.glsl`, `.frag.glsl`).
    pub fn from_path(path: &Path, bytes: Vec<u8>) -> Result<Source, FrontError> {
        let name = path.display().to_string();
        let lower = name.to_ascii_lowercase();
        let language = if lower.ends_with(".wgsl") {
            Language::Wgsl
        } else if lower.ends_with(".spv") {
            Language::SpirV
        } else if lower.ends_with(".vert") || lower.ends_with(".vert.glsl") {
            Language::Glsl(naga::ShaderStage::Vertex)
        } else if lower.ends_with(".frag") || lower.ends_with(".frag.glsl") {
            Language::Glsl(naga::ShaderStage::Fragment)
        } else {
            return Err(FrontError::Input(format!(
                "{name}: cannot tell the language (expected .wgsl, .spv, .vert or .frag)"
            )));
        };
        Ok(Source {
            name,
            language,
            bytes,
        })
    }

    /// The source as text, for diagnostics (SPIR-V has none).
    pub fn text(&self) -> Option<&str> {
        match self.language {
            Language::SpirV => None,
            _ => std::str::from_utf8(&self.bytes).ok(),
        }
    }
}

/// A parsed and validated module.
pub struct Parsed {
    pub module: naga::Module,
    pub info: ModuleInfo,
    /// GLSL only: file-scope declarators written with an initialiser, with the span of each
    /// name ([`crate::glsl_globals`]); naga drops initialisers it cannot make constant.
    pub initialised_globals: Vec<(String, std::ops::Range<usize>)>,
    /// GLSL only: the text naga read when initialisers it drops were moved into `main`; the
    /// module's spans are offsets into it ([`crate::glsl_globals::Hoisted::original`] maps
    /// them back).
    pub hoisted: Option<crate::glsl_globals::Hoisted>,
}

/// Parses and validates; naga's panics become errors.
pub fn parse(source: &Source) -> Result<Parsed, FrontError> {
    let result = catch_quietly(|| parse_inner(source));
    result.unwrap_or_else(|p| {
        Err(FrontError::Internal(format!(
            "naga panicked: {}",
            panic_text(&p)
        )))
    })
}

fn parse_inner(source: &Source) -> Result<Parsed, FrontError> {
    let text = || {
        std::str::from_utf8(&source.bytes)
            .map_err(|e| FrontError::Input(format!("{}: not UTF-8: {e}", source.name)))
    };
    let module = match source.language {
        Language::Wgsl => {
            let text = text()?;
            crate::nesting::check_text(text)?;
            naga::front::wgsl::parse_str(text)
                .map_err(|e| FrontError::Parse(e.emit_to_string(text)))?
        }
        Language::Glsl(stage) => {
            let text = text()?;
            crate::nesting::check_text(text)?;
            let module = parse_glsl(stage, text)?;
            if let Some(parsed) = hoisted(stage, text, &module) {
                return Ok(parsed);
            }
            module
        }
        Language::SpirV => {
            naga::front::spv::parse_u8_slice(&source.bytes, &naga::front::spv::Options::default())
                .map_err(|e| FrontError::Parse(format!("{e}")))?
        }
    };
    crate::nesting::check_module(&module)?;
    let initialised_globals = match (source.language, source.text()) {
        (Language::Glsl(_), Some(text)) => crate::glsl_globals::initialised_globals(text),
        _ => Vec::new(),
    };
    let info = Validator::new(ValidationFlags::all(), Capabilities::all())
        .validate(&module)
        .map_err(|e| {
            FrontError::Validate(match source.text() {
                Some(t) => e.emit_to_string(t),
                None => format!("{}", e.into_inner()),
            })
        })?;
    Ok(Parsed {
        module,
        info,
        initialised_globals,
        hoisted: None,
    })
}

fn parse_glsl(stage: naga::ShaderStage, text: &str) -> Result<naga::Module, FrontError> {
    naga::front::glsl::Frontend::default()
        .parse(&naga::front::glsl::Options::from(stage), text)
        .map_err(|e| FrontError::Parse(e.emit_to_string(text)))
}

/// The shader again with the initialisers naga dropped moved into `main`
/// ([`crate::glsl_globals::hoist`]): `None` when it dropped none, or when the moved text does
/// not parse and validate (the first parse stands, and lowering refuses what it dropped).
fn hoisted(stage: naga::ShaderStage, text: &str, module: &naga::Module) -> Option<Parsed> {
    let written = crate::glsl_globals::initialised_globals(text);
    let dropped: Vec<String> = module
        .global_variables
        .iter()
        .filter(|(_, g)| g.space == naga::AddressSpace::Private && g.init.is_none())
        .filter_map(|(_, g)| g.name.clone())
        .filter(|n| written.iter().any(|(w, _)| w == n))
        .collect();
    if dropped.is_empty() {
        return None;
    }
    let hoisted = crate::glsl_globals::hoist(text, &dropped)?;
    let module = parse_glsl(stage, &hoisted.text).ok()?;
    crate::nesting::check_module(&module).ok()?;
    let info = Validator::new(ValidationFlags::all(), Capabilities::all())
        .validate(&module)
        .ok()?;
    Some(Parsed {
        initialised_globals: crate::glsl_globals::initialised_globals(&hoisted.text),
        module,
        info,
        hoisted: Some(hoisted),
    })
}

thread_local! {
    /// Set while [`catch_quietly`] runs on this thread.
    static CATCHING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `catch_unwind` whose panic the hook [`install_quiet_panic_hook`] installs does not print:
/// the panic becomes an error the caller reports (naga's readers panic on some malformed
/// input).
pub fn catch_quietly<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    let outer = CATCHING.with(|c| c.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(outer));
    result
}

/// A panic hook that stays silent for panics [`catch_quietly`] catches and prints every other
/// as the previous hook did.
pub fn install_quiet_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !CATCHING.with(|c| c.get()) {
            previous(info);
        }
    }));
}

/// The message of a caught panic.
pub fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
