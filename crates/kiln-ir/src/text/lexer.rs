//! Tokens of the `.kir` text, each with its line and column (1-based, in characters).

#[derive(Clone, Debug, PartialEq)]
pub enum Tok {
    Ident(String),
    /// An integer literal (decimal, optionally negative, or `0x` hex).
    Int(i64),
    /// A float literal, as f32 bits.
    Float(u32),
    Punct(char),
    Newline,
    Eof,
}

#[derive(Clone, Debug)]
pub struct Token {
    pub tok: Tok,
    pub line: usize,
    pub col: usize,
}

/// A lexing error at a position.
#[derive(Debug)]
pub struct LexError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

pub fn lex(text: &str) -> Result<Vec<Token>, LexError> {
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1usize, 1usize);
    while i < chars.len() {
        let c = chars[i];
        let (tl, tc) = (line, col);
        let push = |toks: &mut Vec<Token>, tok| {
            toks.push(Token {
                tok,
                line: tl,
                col: tc,
            })
        };
        if c == '\n' {
            push(&mut toks, Tok::Newline);
            i += 1;
            line += 1;
            col = 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c == ';' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
                col += 1;
            }
            continue;
        }
        let start = i;
        if c.is_ascii_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            push(&mut toks, Tok::Ident(chars[start..i].iter().collect()));
        } else if c.is_ascii_digit()
            || (c == '-' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            i = lex_number(&chars, i, tl, tc, &mut toks)?;
        } else if "%:@()[],={}.".contains(c) {
            push(&mut toks, Tok::Punct(c));
            i += 1;
        } else {
            return Err(LexError {
                line: tl,
                col: tc,
                message: format!("unexpected character {c:?}"),
            });
        }
        col += i - start;
    }
    toks.push(Token {
        tok: Tok::Eof,
        line,
        col,
    });
    Ok(toks)
}

fn lex_number(
    chars: &[char],
    mut i: usize,
    line: usize,
    col: usize,
    toks: &mut Vec<Token>,
) -> Result<usize, LexError> {
    let err = |message: String| LexError { line, col, message };
    let start = i;
    let neg = chars[i] == '-';
    if neg {
        i += 1;
    }
    let digits_end = |mut j: usize, hex: bool| {
        while j < chars.len()
            && (if hex {
                chars[j].is_ascii_hexdigit()
            } else {
                chars[j].is_ascii_digit()
            })
        {
            j += 1;
        }
        j
    };
    let tok = if chars[i] == '0' && matches!(chars.get(i + 1), Some('x' | 'X')) {
        let s = i + 2;
        i = digits_end(s, true);
        let text: String = chars[s..i].iter().collect();
        let v = u64::from_str_radix(&text, 16)
            .map_err(|_| err(format!("malformed hex number `0x{text}`")))?;
        if neg || v > u32::MAX as u64 {
            return Err(err(format!(
                "hex constant `0x{text}` does not fit in 32 bits"
            )));
        }
        Tok::Int(v as i64)
    } else {
        i = digits_end(i, false);
        let mut is_float = false;
        if chars.get(i) == Some(&'.') && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
            is_float = true;
            i = digits_end(i + 1, false);
        }
        if matches!(chars.get(i), Some('e' | 'E')) {
            let mut j = i + 1;
            if matches!(chars.get(j), Some('+' | '-')) {
                j += 1;
            }
            if chars.get(j).is_some_and(|d| d.is_ascii_digit()) {
                is_float = true;
                i = digits_end(j, false);
            }
        }
        let text: String = chars[start..i].iter().collect();
        if is_float {
            let v: f32 = text
                .parse()
                .map_err(|_| err(format!("malformed float `{text}`")))?;
            Tok::Float(v.to_bits())
        } else {
            let v: i64 = text
                .parse()
                .map_err(|_| err(format!("integer `{text}` is out of range")))?;
            Tok::Int(v)
        }
    };
    if chars
        .get(i)
        .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
    {
        return Err(err("malformed number: letters follow the digits".into()));
    }
    toks.push(Token { tok, line, col });
    Ok(i)
}
