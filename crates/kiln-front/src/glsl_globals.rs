//! File-scope GLSL declarations with an initialiser, found in the source text by a deliberately
//! small scan, so that kiln can refuse a global whose initialiser naga 30's GLSL reader dropped.
//! The scan can only miss a declaration, never refuse a shader without one. The design is in
//! `docs/front.md` ("Passes, in the order a reader meets them", item "Globals").

use std::ops::Range;

/// Names of file-scope declarators with an initialiser, with the span of each name.
pub fn initialised_globals(text: &str) -> Vec<(String, Range<usize>)> {
    let b = blank_comments(text);
    let mut out = Vec::new();
    let (mut braces, mut start) = (0usize, 0usize);
    // Inside a declaration's initialiser, braces are an initialiser list, not a body.
    let mut init_braces = 0usize;
    let mut seen_eq = false;
    let mut parens = 0usize;
    for i in 0..b.len() {
        let c = b[i];
        if braces > 0 {
            match c {
                b'{' => braces += 1,
                b'}' => {
                    braces -= 1;
                    if braces == 0 {
                        start = i + 1;
                        seen_eq = false;
                    }
                }
                _ => {}
            }
            continue;
        }
        match c {
            b'(' | b'[' => parens += 1,
            b')' | b']' => parens = parens.saturating_sub(1),
            b'=' if parens == 0 && init_braces == 0 && is_assignment(&b, i) => seen_eq = true,
            b'{' if seen_eq => init_braces += 1,
            b'}' if init_braces > 0 => init_braces -= 1,
            b'{' => braces = 1,
            b';' if parens == 0 && init_braces == 0 => {
                declarators(&b, start, i, &mut out, text);
                start = i + 1;
                seen_eq = false;
            }
            _ => {}
        }
    }
    out
}

/// The text with comments and preprocessor lines replaced by spaces (offsets kept).
fn blank_comments(text: &str) -> Vec<u8> {
    let mut b = text.as_bytes().to_vec();
    let mut i = 0;
    let mut line_start = true;
    while i < b.len() {
        if line_start && b[i] == b'#' {
            while i < b.len() && b[i] != b'\n' {
                b[i] = b' ';
                i += 1;
            }
            continue;
        }
        if b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                b[i] = b' ';
                i += 1;
            }
            continue;
        }
        if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
            while i < b.len() && !(b[i] == b'*' && b.get(i + 1) == Some(&b'/')) {
                if b[i] != b'\n' {
                    b[i] = b' ';
                }
                i += 1;
            }
            for _ in 0..2 {
                if i < b.len() {
                    b[i] = b' ';
                    i += 1;
                }
            }
            continue;
        }
        if b[i] == b'\n' {
            line_start = true;
        } else if !b[i].is_ascii_whitespace() {
            line_start = false;
        }
        i += 1;
    }
    b
}

/// `=` at `i` is an assignment, not part of `==`, `<=`, `>=` or `!=`.
fn is_assignment(b: &[u8], i: usize) -> bool {
    let prev = i.checked_sub(1).map(|k| b[k]);
    let next = b.get(i + 1).copied();
    next != Some(b'=') && !matches!(prev, Some(b'=' | b'<' | b'>' | b'!'))
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// Splits statement `[from, to)` at top-level commas; reports each declarator's name before
/// its `=`.
fn declarators(
    b: &[u8],
    from: usize,
    to: usize,
    out: &mut Vec<(String, Range<usize>)>,
    text: &str,
) {
    let mut depth = 0usize;
    let mut part = from;
    let mut eq: Option<usize> = None;
    let finish = |part: usize, eq: Option<usize>, out: &mut Vec<(String, Range<usize>)>| {
        let Some(e) = eq else { return };
        // Back from `=`: spaces, an optional array size, spaces, the name.
        let mut k = e;
        while k > part && b[k - 1].is_ascii_whitespace() {
            k -= 1;
        }
        if k > part && b[k - 1] == b']' {
            let mut level = 0usize;
            while k > part {
                k -= 1;
                match b[k] {
                    b']' => level += 1,
                    b'[' => {
                        level -= 1;
                        if level == 0 {
                            break;
                        }
                    }
                    _ => {}
                }
            }
            while k > part && b[k - 1].is_ascii_whitespace() {
                k -= 1;
            }
        }
        let end = k;
        while k > part && is_ident(b[k - 1]) {
            k -= 1;
        }
        if k < end && !b[k].is_ascii_digit() {
            out.push((text[k..end].to_string(), k..end));
        }
    };
    for i in from..to {
        match b[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'=' if depth == 0 && eq.is_none() && is_assignment(b, i) => eq = Some(i),
            b',' if depth == 0 => {
                finish(part, eq, out);
                part = i + 1;
                eq = None;
            }
            _ => {}
        }
    }
    finish(part, eq, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<String> {
        initialised_globals(text)
            .into_iter()
            .map(|(n, r)| {
                assert_eq!(&text[r], n);
                n
            })
            .collect()
    }

    #[test]
    fn finds_file_scope_initialisers_only() {
        let text = "#version 450
#define X(a) (a = 1)
layout(set = 0, binding = 0) uniform U { float progress; } u;
layout(location = 0) out vec4 o;
// float commented = 1.0;
/* float blocked = 2.0; */
float g = progress + 1.0, plain, h[2] = float[2](1.0, progress), k = {1.0, 2.0}.x;
const float c = 2.0;
bool b = progress == 1.0;
float f(float v) { float local = v; return local; }
struct S { float a; };
S s = S(1.0);
void main() { float m = 3.0; o = vec4(g); }
";
        assert_eq!(names(text), ["g", "h", "k", "c", "b", "s"]);
    }

    #[test]
    fn odd_text_yields_no_names_rather_than_wrong_ones() {
        assert!(names("= 1.0; 2 = 3; ==; a <= b; }}}{").is_empty());
        assert!(names("float x").is_empty());
    }
}
