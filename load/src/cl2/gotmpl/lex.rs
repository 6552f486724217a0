//! The lexer: splits a template into text and actions (with `{{-`/`-}}` trimming applied and
//! comments dropped), and an action into tokens, each with the line it starts on.

use super::TemplateError;

/// A piece of the template source.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    Text(String),
    /// The tokens of one `{{ … }}`, and its line.
    Action(Vec<Token>, usize),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Token {
    /// `.` alone, or a chain `.A.B` (the names).
    Field(Vec<String>),
    /// `$name` (`$` alone is the empty name) and the fields after it.
    Variable(String, Vec<String>),
    /// `.A.B` right after a `)`: fields of a parenthesized pipeline.
    Chain(Vec<String>),
    Identifier(String),
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Nil,
    Pipe,
    LeftParen,
    RightParen,
    Declare,
    Assign,
    Comma,
}

fn err(file: &str, line: usize, message: impl Into<String>) -> TemplateError {
    TemplateError::new(file, line, message)
}

/// Splits `source` into pieces.
pub fn split(file: &str, source: &str) -> Result<Vec<Piece>, TemplateError> {
    let mut pieces = Vec::new();
    let mut rest = source;
    let mut line = 1;
    let mut trim_next = false;
    while !rest.is_empty() {
        let Some(open) = rest.find("{{") else {
            let text = if trim_next { rest.trim_start() } else { rest };
            pieces.push(Piece::Text(text.to_string()));
            break;
        };
        let mut text = &rest[..open];
        line += text.matches('\n').count();
        let mut inner = &rest[open + 2..];
        let trim_before = inner.starts_with("- ")
            || inner.starts_with("-\t")
            || inner.starts_with("-\n")
            || inner.starts_with("-\r");
        if trim_before {
            inner = &inner[1..];
            text = text.trim_end();
        }
        if trim_next {
            text = text.trim_start();
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text.to_string()));
        }
        let close = find_close(inner)
            .ok_or_else(|| err(file, line, "unclosed action: no matching \"}}\""))?;
        let mut body = &inner[..close];
        trim_next = body.ends_with(" -")
            || body.ends_with("\t-")
            || body.ends_with("\n-")
            || body.ends_with("\r-");
        if trim_next {
            body = &body[..body.len() - 1];
        }
        let action_line = line;
        line += body.matches('\n').count();
        rest = &inner[close + 2..];
        let trimmed = body.trim();
        if trimmed.starts_with("/*") {
            if !trimmed.ends_with("*/") {
                return Err(err(file, action_line, "unclosed comment"));
            }
            continue;
        }
        pieces.push(Piece::Action(tokens(file, action_line, body)?, action_line));
    }
    Ok(pieces)
}

/// Where the action's closing `}}` is, skipping quoted strings.
fn find_close(s: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' | b'\'' => {
                let quote = bytes[i];
                i += 1;
                while i < bytes.len() && bytes[i] != quote {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'`' => {
                i += 1;
                while i < bytes.len() && bytes[i] != b'`' {
                    i += 1;
                }
            }
            b'}' if bytes.get(i + 1) == Some(&b'}') => return Some(i),
            _ => {}
        }
        i += 1;
    }
    None
}

fn is_name_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Reads `.A.B…` from `chars[i]` (at a '.'); the names and the index after them.
fn field_chain(chars: &[char], mut i: usize) -> (Vec<String>, usize) {
    let mut names = Vec::new();
    while i < chars.len() && chars[i] == '.' {
        let start = i + 1;
        let mut j = start;
        while j < chars.len() && is_name_char(chars[j]) {
            j += 1;
        }
        if j == start {
            break;
        }
        names.push(chars[start..j].iter().collect());
        i = j;
    }
    (names, i)
}

/// The tokens of one action's body.
pub fn tokens(file: &str, mut line: usize, body: &str) -> Result<Vec<Token>, TemplateError> {
    let chars: Vec<char> = body.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        match c {
            '|' => {
                out.push(Token::Pipe);
                i += 1;
            }
            '(' => {
                out.push(Token::LeftParen);
                i += 1;
            }
            ')' => {
                out.push(Token::RightParen);
                i += 1;
                if i < chars.len() && chars[i] == '.' {
                    let (names, next) = field_chain(&chars, i);
                    out.push(Token::Chain(names));
                    i = next;
                }
            }
            ',' => {
                out.push(Token::Comma);
                i += 1;
            }
            ':' if chars.get(i + 1) == Some(&'=') => {
                out.push(Token::Declare);
                i += 2;
            }
            '=' => {
                out.push(Token::Assign);
                i += 1;
            }
            '.' if !chars.get(i + 1).is_some_and(char::is_ascii_digit) => {
                let (names, next) = field_chain(&chars, i);
                if names.is_empty() {
                    i += 1;
                } else {
                    i = next;
                }
                out.push(Token::Field(names));
            }
            '$' => {
                let start = i + 1;
                let mut j = start;
                while j < chars.len() && is_name_char(chars[j]) {
                    j += 1;
                }
                let name: String = chars[start..j].iter().collect();
                let (fields, next) = field_chain(&chars, j);
                out.push(Token::Variable(name, fields));
                i = next;
            }
            '"' => {
                let mut s = String::new();
                let mut j = i + 1;
                loop {
                    let Some(&c) = chars.get(j) else {
                        return Err(err(file, line, "unterminated quoted string"));
                    };
                    match c {
                        '"' => break,
                        '\n' => return Err(err(file, line, "unterminated quoted string")),
                        '\\' => {
                            let (ch, next) = escape(&chars, j + 1)
                                .ok_or_else(|| err(file, line, "bad escape in quoted string"))?;
                            s.push(ch);
                            j = next;
                        }
                        c => {
                            s.push(c);
                            j += 1;
                        }
                    }
                }
                out.push(Token::Str(s));
                i = j + 1;
            }
            '`' => {
                let start = i + 1;
                let mut j = start;
                while j < chars.len() && chars[j] != '`' {
                    j += 1;
                }
                if j >= chars.len() {
                    return Err(err(file, line, "unterminated raw quoted string"));
                }
                let s: String = chars[start..j].iter().collect();
                line += s.matches('\n').count();
                out.push(Token::Str(s));
                i = j + 1;
            }
            '\'' => {
                let (ch, next) = match chars.get(i + 1) {
                    Some('\\') => escape(&chars, i + 2),
                    Some(&c) => Some((c, i + 2)),
                    None => None,
                }
                .filter(|&(_, next)| chars.get(next) == Some(&'\''))
                .ok_or_else(|| err(file, line, "malformed character constant"))?;
                out.push(Token::Int(ch as i64));
                i = next + 1;
            }
            c if c.is_ascii_digit()
                || ((c == '-' || c == '+' || c == '.')
                    && i + 1 < chars.len()
                    && (chars[i + 1].is_ascii_digit() || chars[i + 1] == '.')) =>
            {
                let start = i;
                let mut j = i + 1;
                while j < chars.len()
                    && (chars[j].is_ascii_alphanumeric()
                        || chars[j] == '.'
                        || chars[j] == '_'
                        || ((chars[j] == '-' || chars[j] == '+')
                            && matches!(chars[j - 1], 'e' | 'E' | 'p' | 'P')))
                {
                    j += 1;
                }
                let text: String = chars[start..j].iter().collect();
                out.push(
                    number(&text)
                        .ok_or_else(|| err(file, line, format!("bad number syntax: {text:?}")))?,
                );
                i = j;
            }
            c if is_name_char(c) => {
                let start = i;
                let mut j = i;
                while j < chars.len() && is_name_char(chars[j]) {
                    j += 1;
                }
                let word: String = chars[start..j].iter().collect();
                out.push(match word.as_str() {
                    "true" => Token::Bool(true),
                    "false" => Token::Bool(false),
                    "nil" => Token::Nil,
                    _ => Token::Identifier(word),
                });
                i = j;
            }
            c => return Err(err(file, line, format!("unexpected {c:?} in action"))),
        }
    }
    Ok(out)
}

/// The character an escape at `chars[i]` (after the backslash) stands for, and the index after.
fn escape(chars: &[char], i: usize) -> Option<(char, usize)> {
    let c = *chars.get(i)?;
    let simple = match c {
        'n' => Some('\n'),
        't' => Some('\t'),
        'r' => Some('\r'),
        '\\' => Some('\\'),
        '"' => Some('"'),
        '\'' => Some('\''),
        '0' => Some('\0'),
        'a' => Some('\x07'),
        'b' => Some('\x08'),
        'f' => Some('\x0c'),
        'v' => Some('\x0b'),
        _ => None,
    };
    if let Some(s) = simple {
        return Some((s, i + 1));
    }
    let digits = match c {
        'x' => 2,
        'u' => 4,
        'U' => 8,
        _ => return None,
    };
    let hex: String = chars.get(i + 1..i + 1 + digits)?.iter().collect();
    let code = u32::from_str_radix(&hex, 16).ok()?;
    Some((char::from_u32(code)?, i + 1 + digits))
}

/// A Go number literal: decimal, hex, octal or binary integers, or floats.
fn number(text: &str) -> Option<Token> {
    let clean = text.replace('_', "");
    let (negative, digits) = match clean.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, clean.strip_prefix('+').unwrap_or(&clean)),
    };
    let sign = if negative { -1 } else { 1 };
    let radix = |prefix: &[&str], radix: u32| {
        prefix
            .iter()
            .find_map(|p| digits.strip_prefix(p))
            .and_then(|d| i64::from_str_radix(d, radix).ok())
    };
    if let Some(v) = radix(&["0x", "0X"], 16)
        .or_else(|| radix(&["0b", "0B"], 2))
        .or_else(|| radix(&["0o", "0O"], 8))
    {
        return Some(Token::Int(sign * v));
    }
    if let Ok(v) = digits.parse::<i64>() {
        if digits.len() > 1 && digits.starts_with('0') {
            return i64::from_str_radix(&digits[1..], 8)
                .ok()
                .map(|v| Token::Int(sign * v));
        }
        return Some(Token::Int(sign * v));
    }
    let f: f64 = digits.parse().ok()?;
    Some(Token::Float(sign as f64 * f))
}
