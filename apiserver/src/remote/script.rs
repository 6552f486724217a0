//! Shell scripts as the emulated `sh` reads them: simple commands with words (single and
//! double quotes, backslash escapes, `$NAME`, `${NAME}`, `$?`), redirections (`>`, `>>`,
//! `2>&1`, `>&2`, `<`), pipes and the lists `;`, newline, `&&` and `||`. Pure.

/// One piece of a word: text, or a parameter to expand when the command runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    /// `$NAME`, `${NAME}`; `?` is the last command's status.
    Param(String),
}

/// A word before expansion; `quoted` when any part of it was quoted (so `A=b` in quotes is
/// not an assignment).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Word {
    pub pieces: Vec<Piece>,
    pub quoted: bool,
}

impl Word {
    fn push_char(&mut self, c: char) {
        match self.pieces.last_mut() {
            Some(Piece::Text(t)) => t.push(c),
            _ => self.pieces.push(Piece::Text(c.to_string())),
        }
    }

    fn is_empty(&self) -> bool {
        self.pieces.is_empty() && !self.quoted
    }

    /// The word's text when it has no parameters.
    pub fn literal(&self) -> Option<String> {
        let mut out = String::new();
        for p in &self.pieces {
            match p {
                Piece::Text(t) => out.push_str(t),
                Piece::Param(_) => return None,
            }
        }
        Some(out)
    }
}

/// Where a redirection sends a file descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `>&N`.
    Fd(u8),
    /// A file path (a word, expanded when the command runs).
    File(Word),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// 0 for `<`, 1 or 2 for output.
    pub fd: u8,
    pub target: Target,
    pub append: bool,
}

/// One simple command: words and redirections.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Simple {
    pub words: Vec<Word>,
    pub redirects: Vec<Redirect>,
}

/// How a pipeline joins the one before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    Then,
    And,
    Or,
}

/// A script: pipelines (each one or more commands joined by `|`) and how they are joined.
pub type Script = Vec<(Link, Vec<Simple>)>;

/// A script the emulated shell cannot read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum SyntaxError {
    #[error("syntax error: unterminated quoted string")]
    Unterminated,
    #[error("syntax error: unexpected \"{0}\"")]
    Unexpected(String),
    #[error("syntax error: bad substitution")]
    BadSubstitution,
}

enum Token {
    Word(Word),
    Redirect { fd: u8, append: bool, dup: bool },
    Pipe,
    List(Link),
}

fn lex(script: &str) -> Result<Vec<Token>, SyntaxError> {
    let mut tokens = Vec::new();
    let mut word = Word::default();
    let mut chars = script.chars().peekable();
    let flush = |word: &mut Word, tokens: &mut Vec<Token>| {
        if !word.is_empty() {
            tokens.push(Token::Word(std::mem::take(word)));
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                word.quoted = true;
                word.push_char_str("");
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(q) => word.push_char(q),
                        None => return Err(SyntaxError::Unterminated),
                    }
                }
            }
            '"' => {
                word.quoted = true;
                word.push_char_str("");
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => word.push_char(e),
                            Some('\n') => {}
                            Some(other) => {
                                word.push_char('\\');
                                word.push_char(other);
                            }
                            None => return Err(SyntaxError::Unterminated),
                        },
                        Some('$') => param(&mut chars, &mut word)?,
                        Some(q) => word.push_char(q),
                        None => return Err(SyntaxError::Unterminated),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(e) => {
                    word.quoted = true;
                    word.push_char(e);
                }
            },
            '$' => param(&mut chars, &mut word)?,
            ' ' | '\t' => flush(&mut word, &mut tokens),
            '#' if word.is_empty() => {
                for skipped in chars.by_ref() {
                    if skipped == '\n' {
                        tokens.push(Token::List(Link::Then));
                        break;
                    }
                }
            }
            ';' | '\n' => {
                flush(&mut word, &mut tokens);
                tokens.push(Token::List(Link::Then));
            }
            '&' if chars.peek() == Some(&'&') => {
                chars.next();
                flush(&mut word, &mut tokens);
                tokens.push(Token::List(Link::And));
            }
            '&' => return Err(SyntaxError::Unexpected("&".into())),
            '|' if chars.peek() == Some(&'|') => {
                chars.next();
                flush(&mut word, &mut tokens);
                tokens.push(Token::List(Link::Or));
            }
            '|' => {
                flush(&mut word, &mut tokens);
                tokens.push(Token::Pipe);
            }
            '>' | '<' => {
                // `2>`: a lone unquoted digit before the operator names the descriptor.
                let fd = match word.literal().as_deref() {
                    Some(d @ ("0" | "1" | "2")) if !word.quoted => {
                        let fd = d.as_bytes()[0] - b'0';
                        word = Word::default();
                        fd
                    }
                    _ => {
                        flush(&mut word, &mut tokens);
                        u8::from(c == '>')
                    }
                };
                let append = c == '>' && chars.peek() == Some(&'>');
                if append {
                    chars.next();
                }
                let dup = chars.peek() == Some(&'&');
                if dup {
                    chars.next();
                }
                tokens.push(Token::Redirect { fd, append, dup });
            }
            '(' | ')' | '`' => return Err(SyntaxError::Unexpected(c.to_string())),
            other => word.push_char(other),
        }
    }
    flush(&mut word, &mut tokens);
    Ok(tokens)
}

impl Word {
    /// Starts a (possibly empty) text piece, so `''` is an empty word rather than none.
    fn push_char_str(&mut self, s: &str) {
        if !matches!(self.pieces.last(), Some(Piece::Text(_))) {
            self.pieces.push(Piece::Text(s.to_string()));
        }
    }
}

/// After `$`: a name, `{name}`, or `?`; a lone `$` is itself.
fn param(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    word: &mut Word,
) -> Result<(), SyntaxError> {
    let is_name = |c: &char| c.is_ascii_alphanumeric() || *c == '_';
    match chars.peek().copied() {
        Some('?') => {
            chars.next();
            word.pieces.push(Piece::Param("?".into()));
        }
        Some('{') => {
            chars.next();
            let mut name = String::new();
            loop {
                match chars.next() {
                    Some('}') => break,
                    Some(c) if is_name(&c) || c == '?' => name.push(c),
                    _ => return Err(SyntaxError::BadSubstitution),
                }
            }
            if name.is_empty() {
                return Err(SyntaxError::BadSubstitution);
            }
            word.pieces.push(Piece::Param(name));
        }
        Some(c) if is_name(&c) => {
            let mut name = String::new();
            while let Some(c) = chars.peek().copied().filter(is_name) {
                name.push(c);
                chars.next();
            }
            word.pieces.push(Piece::Param(name));
        }
        _ => word.push_char('$'),
    }
    Ok(())
}

/// Reads a script.
pub fn parse(script: &str) -> Result<Script, SyntaxError> {
    let mut out: Script = Vec::new();
    let mut link = Link::Then;
    let mut pipeline: Vec<Simple> = Vec::new();
    let mut simple = Simple::default();
    let mut tokens = lex(script)?.into_iter().peekable();
    let unexpected = |t: &Token| {
        SyntaxError::Unexpected(
            match t {
                Token::Pipe => "|",
                Token::List(Link::And) => "&&",
                Token::List(Link::Or) => "||",
                Token::List(Link::Then) => ";",
                Token::Word(_) | Token::Redirect { .. } => "redirection",
            }
            .into(),
        )
    };
    while let Some(token) = tokens.next() {
        match token {
            Token::Word(w) => simple.words.push(w),
            Token::Redirect { fd, append, dup } => {
                let Some(Token::Word(target)) = tokens.next() else {
                    return Err(SyntaxError::Unexpected("newline".into()));
                };
                let target = match (dup, target.literal().as_deref()) {
                    (true, Some(n @ ("0" | "1" | "2"))) => Target::Fd(n.as_bytes()[0] - b'0'),
                    (true, _) => return Err(SyntaxError::BadSubstitution),
                    (false, _) => Target::File(target),
                };
                simple.redirects.push(Redirect { fd, target, append });
            }
            Token::Pipe => {
                if simple.words.is_empty() {
                    return Err(unexpected(&Token::Pipe));
                }
                pipeline.push(std::mem::take(&mut simple));
            }
            Token::List(next) => {
                let empty = simple.words.is_empty() && simple.redirects.is_empty();
                if empty && (next != Link::Then || !pipeline.is_empty()) {
                    return Err(unexpected(&Token::List(next)));
                }
                if !empty {
                    pipeline.push(std::mem::take(&mut simple));
                    out.push((link, std::mem::take(&mut pipeline)));
                    link = next;
                }
            }
        }
    }
    if simple.words.is_empty() && simple.redirects.is_empty() {
        if !pipeline.is_empty() || link != Link::Then {
            return Err(SyntaxError::Unexpected("end of file".into()));
        }
    } else {
        pipeline.push(simple);
        out.push((link, pipeline));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> Word {
        Word {
            pieces: vec![Piece::Text(s.into())],
            quoted: false,
        }
    }

    #[test]
    fn lists_pipes_and_redirections() {
        let script = parse("echo hi >&2; false || echo 'a b' | cat && exit 3").expect("parses");
        assert_eq!(script.len(), 4);
        assert_eq!(script[0].0, Link::Then);
        assert_eq!(script[1].0, Link::Then);
        assert_eq!(
            script[0].1[0].redirects,
            vec![Redirect {
                fd: 1,
                target: Target::Fd(2),
                append: false
            }]
        );
        assert_eq!(script[2].0, Link::Or);
        assert_eq!(script[2].1.len(), 2);
        assert_eq!(script[2].1[0].words[1].literal().as_deref(), Some("a b"));
        assert_eq!(script[3].0, Link::And);
        let redirected = parse("cat /x 2>/dev/null 2>&1").expect("parses");
        let r = &redirected[0].1[0].redirects;
        assert_eq!(r[0].fd, 2);
        assert_eq!(r[0].target, Target::File(text("/dev/null")));
        assert_eq!(r[1].target, Target::Fd(1));
    }

    #[test]
    fn parameters_and_quotes() {
        let s = parse(r#"echo "$HOME-${X}" '$Y' \$Z $? $"#).expect("parses");
        let words = &s[0].1[0].words;
        assert_eq!(
            words[1].pieces,
            vec![
                Piece::Text(String::new()),
                Piece::Param("HOME".into()),
                Piece::Text("-".into()),
                Piece::Param("X".into())
            ]
        );
        assert_eq!(words[2].literal().as_deref(), Some("$Y"));
        assert_eq!(words[3].literal().as_deref(), Some("$Z"));
        assert_eq!(words[4].pieces, vec![Piece::Param("?".into())]);
        assert_eq!(words[5].literal().as_deref(), Some("$"));
        // An empty quoted word is a word.
        assert_eq!(parse("echo ''").expect("parses")[0].1[0].words.len(), 2);
        // Comments and blank lines.
        assert_eq!(
            parse("# nothing\n\n echo x # trailing").expect("p").len(),
            1
        );
    }

    #[test]
    fn bad_scripts_are_syntax_errors() {
        assert_eq!(parse("echo 'x"), Err(SyntaxError::Unterminated));
        assert_eq!(parse("&& x"), Err(SyntaxError::Unexpected("&&".into())));
        assert_eq!(
            parse("x |"),
            Err(SyntaxError::Unexpected("end of file".into()))
        );
        assert_eq!(parse("x &"), Err(SyntaxError::Unexpected("&".into())));
        assert_eq!(parse("echo ${"), Err(SyntaxError::BadSubstitution));
        assert_eq!(
            parse("echo >"),
            Err(SyntaxError::Unexpected("newline".into()))
        );
        assert!(parse("").expect("empty").is_empty());
        assert!(parse(";").expect("a lone separator").is_empty());
    }
}
