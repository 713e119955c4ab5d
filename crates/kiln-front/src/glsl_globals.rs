//! File-scope GLSL declarations with an initialiser, found in the source text by a deliberately
//! small scan: naga 30's GLSL reader drops an initialiser it cannot make constant, so kiln
//! moves such initialisers into `main` before naga reads the shader ([`hoist`]), and refuses a
//! global whose initialiser it could not move. The scan can only miss a declaration, never
//! refuse a shader without one. The design is in `docs/front.md` ("Passes, in the order a
//! reader meets them", item "Globals").

use std::ops::Range;

/// A file-scope declarator written with an initialiser.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Initialised {
    pub name: String,
    pub name_span: Range<usize>,
    /// From the `=` to the end of the initialiser.
    pub init_span: Range<usize>,
}

/// Names of file-scope declarators with an initialiser, with the span of each name.
pub fn initialised_globals(text: &str) -> Vec<(String, Range<usize>)> {
    initialisers(text)
        .into_iter()
        .map(|i| (i.name, i.name_span))
        .collect()
}

/// GLSL's meaning of a file-scope initialiser that is not constant — it runs, in declaration
/// order, before `main` (GLSL 4.50 §4.3) — written out for a reader that drops it: the
/// initialisers of the globals named in `dropped` are blanked where they stand (spaces, so
/// every other offset holds), `main` is renamed to a fresh name of the same length, and a new
/// `main` appended at the end assigns the globals in order and calls it. Returns the new text
/// and, for each moved initialiser, its range in the new text and in the old; `None` when the
/// text has no `main` definition, an initialiser is a brace list (not an expression), or no
/// fresh name is free.
pub fn hoist(text: &str, dropped: &[String]) -> Option<Hoisted> {
    let b = blank_comments(text);
    let moved: Vec<Initialised> = initialisers(text)
        .into_iter()
        .filter(|i| dropped.contains(&i.name))
        .collect();
    if moved.is_empty() {
        return None;
    }
    let main = main_name(&b)?;
    let fresh = (0..100)
        .map(|k| format!("_k{k:02}"))
        .find(|f| !text.contains(f.as_str()))?;
    let mut out = text.as_bytes().to_vec();
    out[main.clone()].copy_from_slice(&fresh.as_bytes()[..4]);
    let mut spans = Vec::new();
    let mut tail = String::from("\nvoid main() {\n");
    for m in &moved {
        let expr = &b[m.init_span.start + 1..m.init_span.end];
        let lead = expr.iter().take_while(|c| c.is_ascii_whitespace()).count();
        let expr_start = m.init_span.start + 1 + lead;
        if b.get(expr_start) == Some(&b'{') {
            return None;
        }
        for c in &mut out[m.init_span.clone()] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        tail.push_str("    ");
        tail.push_str(&m.name);
        tail.push_str(" = ");
        let at = out.len() + tail.len();
        let len = m.init_span.end - expr_start;
        tail.push_str(std::str::from_utf8(&b[expr_start..m.init_span.end]).ok()?);
        spans.push((at..at + len, expr_start..m.init_span.end));
        tail.push_str(";\n");
    }
    tail.push_str("    ");
    tail.push_str(&fresh);
    tail.push_str("();\n}\n");
    let mut text = String::from_utf8(out).ok()?;
    text.push_str(&tail);
    Some(Hoisted { text, spans })
}

/// What [`hoist`] made.
#[derive(Clone, Debug)]
pub struct Hoisted {
    pub text: String,
    /// Each moved initialiser: its range in the new text, and in the original.
    pub spans: Vec<(Range<usize>, Range<usize>)>,
}

impl Hoisted {
    /// A range of the new text as a range of the original: inside a moved initialiser, its
    /// place in the declaration; elsewhere (every offset before the appended `main`) itself.
    pub fn original(&self, r: Range<usize>) -> Range<usize> {
        for (new, old) in &self.spans {
            if new.start <= r.start && r.start <= new.end {
                let start = old.start + (r.start - new.start);
                let end = (old.start + r.end.saturating_sub(new.start)).min(old.end);
                return start..end.max(start);
            }
        }
        r
    }
}

/// The span of the name `main` in the file-scope definition `void main(...) {`.
fn main_name(b: &[u8]) -> Option<Range<usize>> {
    let mut braces = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => braces += 1,
            b'}' => braces = braces.saturating_sub(1),
            b'm' if braces == 0
                && b[i..].starts_with(b"main")
                && (i == 0 || !is_ident(b[i - 1]))
                && !b.get(i + 4).is_some_and(|&c| is_ident(c)) =>
            {
                let mut k = i + 4;
                let skip = |k: &mut usize| {
                    while *k < b.len() && b[*k].is_ascii_whitespace() {
                        *k += 1;
                    }
                };
                skip(&mut k);
                if b.get(k) == Some(&b'(') {
                    while k < b.len() && b[k] != b')' {
                        k += 1;
                    }
                    k += 1;
                    skip(&mut k);
                    if b.get(k) == Some(&b'{') {
                        return Some(i..i + 4);
                    }
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// File-scope declarators with an initialiser.
pub fn initialisers(text: &str) -> Vec<Initialised> {
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
fn declarators(b: &[u8], from: usize, to: usize, out: &mut Vec<Initialised>, text: &str) {
    let mut depth = 0usize;
    let mut part = from;
    let mut eq: Option<usize> = None;
    let finish = |part: usize, eq: Option<usize>, end_of: usize, out: &mut Vec<Initialised>| {
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
            out.push(Initialised {
                name: text[k..end].to_string(),
                name_span: k..end,
                init_span: e..end_of,
            });
        }
    };
    for i in from..to {
        match b[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            b'=' if depth == 0 && eq.is_none() && is_assignment(b, i) => eq = Some(i),
            b',' if depth == 0 => {
                finish(part, eq, i, out);
                part = i + 1;
                eq = None;
            }
            _ => {}
        }
    }
    finish(part, eq, to, out);
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

    /// Every byte before the appended `main` is the original, but for the moved initialisers
    /// (blanked) and `main`'s name; the appended `main` assigns in declaration order; spans
    /// map back.
    #[test]
    fn hoisting_keeps_every_offset() {
        let text = "#version 450
float g = p + 1.0, plain, h[2] = float[2](1.0, p); // note
void main() { o = vec4(g); }
";
        let h = hoist(text, &["g".into(), "h".into()]).expect("hoists");
        let (old, new) = (text.as_bytes(), h.text.as_bytes());
        let blanked: Vec<Range<usize>> = initialisers(text)
            .into_iter()
            .filter(|i| i.name != "plain")
            .map(|i| i.init_span)
            .collect();
        let main = text.find("main").unwrap();
        for (k, (&a, &b)) in old.iter().zip(new).enumerate() {
            if blanked.iter().any(|r| r.contains(&k)) {
                assert_eq!(b, b' ', "offset {k}");
            } else if !(main..main + 4).contains(&k) {
                assert_eq!(a, b, "offset {k}");
            }
        }
        let tail = &h.text[text.len()..];
        assert_eq!(
            tail,
            "\nvoid main() {\n    g = p + 1.0;\n    h = float[2](1.0, p);\n    _k00();\n}\n"
        );
        assert_eq!(&h.text[main..main + 4], "_k00");
        let at = h.text.rfind("float[2]").unwrap();
        assert_eq!(&text[h.original(at..at + 8)], "float[2]");
        assert_eq!(h.original(3..5), 3..5);
        // Nothing to move, a brace list, no main: no hoisting.
        assert!(hoist(text, &["plain".into()]).is_none());
        assert!(hoist("float a[2] = {p, 1.0};\nvoid main() {}", &["a".into()]).is_none());
        assert!(hoist("float g = p;", &["g".into()]).is_none());
    }

    #[test]
    fn odd_text_yields_no_names_rather_than_wrong_ones() {
        assert!(names("= 1.0; 2 = 3; ==; a <= b; }}}{").is_empty());
        assert!(names("float x").is_empty());
    }
}
