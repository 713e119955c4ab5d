//! A bound on nesting, checked before anything recursive runs: naga's parsers and validator and
//! kiln's lowering recurse once per nesting level, so a shader nested thousands deep would
//! overflow their stacks. Real shaders stay far below the bound (the corpus nests at most 19
//! brackets deep).
//!
//! - Source text (WGSL, GLSL): the depth of `{`, `(` and `[` outside comments, before naga
//!   parses it.
//! - naga's IR (every language, SPIR-V included): the nesting of `if`, `loop` and `switch` in
//!   every function, walked with an explicit stack before validation.
//! - The lowering: its region depth after inlining, checked as regions open.

use crate::FrontError;

/// Deepest nesting accepted in source text and in naga's blocks.
pub const MAX_NESTING: usize = 256;

fn too_deep(span: Option<std::ops::Range<usize>>) -> FrontError {
    FrontError::Unsupported {
        what: format!("nesting deeper than {MAX_NESTING}"),
        span,
    }
}

/// Checks the bracket depth of WGSL or GLSL text; the error points at the bracket that goes
/// too deep.
pub fn check_text(text: &str) -> Result<(), FrontError> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                // Skipped whole, nested ones too (WGSL's rule). A GLSL comment containing `/*`
                // then hides more text from this check: it can only accept more, never refuse
                // a valid shader.
                let mut level = 0usize;
                while i < bytes.len() {
                    if bytes[i] == b'/' && bytes.get(i + 1) == Some(&b'*') {
                        level += 1;
                        i += 2;
                    } else if bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/') {
                        level -= 1;
                        i += 2;
                        if level == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                continue;
            }
            b'{' | b'(' | b'[' => {
                depth += 1;
                if depth > MAX_NESTING {
                    return Err(too_deep(Some(i..i + 1)));
                }
            }
            b'}' | b')' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// Checks the block nesting of every function and entry point of a module.
pub fn check_module(module: &naga::Module) -> Result<(), FrontError> {
    let bodies = module
        .functions
        .iter()
        .map(|(_, f)| &f.body)
        .chain(module.entry_points.iter().map(|e| &e.function.body));
    for body in bodies {
        let mut stack: Vec<(&naga::Block, usize)> = vec![(body, 0)];
        while let Some((block, depth)) = stack.pop() {
            for (s, span) in block.span_iter() {
                let children: Vec<&naga::Block> = match s {
                    // A plain block groups statements (GLSL wraps every braced body in one);
                    // it is walked but not counted.
                    naga::Statement::Block(b) => {
                        stack.push((b, depth));
                        continue;
                    }
                    naga::Statement::If { accept, reject, .. } => vec![accept, reject],
                    naga::Statement::Loop {
                        body, continuing, ..
                    } => vec![body, continuing],
                    naga::Statement::Switch { cases, .. } => {
                        cases.iter().map(|c| &c.body).collect()
                    }
                    _ => continue,
                };
                if depth + 1 > MAX_NESTING {
                    return Err(too_deep(span.to_range()));
                }
                stack.extend(children.into_iter().map(|b| (b, depth + 1)));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_depth_counts_brackets_outside_comments() {
        let deep = |n: usize| format!("{}{}", "(".repeat(n), ")".repeat(n));
        assert!(check_text(&deep(MAX_NESTING)).is_ok());
        let e = check_text(&deep(MAX_NESTING + 1)).unwrap_err();
        assert_eq!(
            e,
            FrontError::Unsupported {
                what: format!("nesting deeper than {MAX_NESTING}"),
                span: Some(MAX_NESTING..MAX_NESTING + 1)
            }
        );
        let commented = format!(
            "// {}\n/* {} /* {} */ */ {{}}",
            deep(900),
            deep(900),
            deep(5)
        );
        assert!(check_text(&commented).is_ok());
        // Unbalanced text is naga's to report.
        assert!(check_text(")))}}}").is_ok());
    }
}
