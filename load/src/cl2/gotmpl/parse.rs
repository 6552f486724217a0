//! The parser: pieces from the lexer into a tree of nodes, and `define`d templates by name.

use std::collections::BTreeMap;

use super::lex::{Piece, Token};
use super::{TemplateError, Value};

#[derive(Clone, Debug)]
pub enum Node {
    Text(String),
    Action {
        line: usize,
        pipe: Pipeline,
    },
    If {
        line: usize,
        pipe: Pipeline,
        then: Vec<Node>,
        otherwise: Vec<Node>,
    },
    Range {
        line: usize,
        pipe: Pipeline,
        body: Vec<Node>,
        otherwise: Vec<Node>,
    },
    With {
        line: usize,
        pipe: Pipeline,
        body: Vec<Node>,
        otherwise: Vec<Node>,
    },
    Template {
        line: usize,
        name: String,
        pipe: Option<Pipeline>,
    },
    Break(usize),
    Continue(usize),
}

/// `$a, $b := cmd | cmd …`
#[derive(Clone, Debug, Default)]
pub struct Pipeline {
    pub vars: Vec<String>,
    /// `=` instead of `:=`: the variables exist already.
    pub assign: bool,
    pub commands: Vec<Vec<Operand>>,
}

#[derive(Clone, Debug)]
pub enum Operand {
    /// `.A.B` from dot; no names is dot itself.
    Field(Vec<String>),
    Variable(String, Vec<String>),
    Function(String),
    Literal(Value),
    /// `(pipeline).A.B`
    Nested(Box<Pipeline>, Vec<String>),
}

/// A parsed template: its main body and the templates it defines.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    pub root: Vec<Node>,
    pub defines: BTreeMap<String, Vec<Node>>,
}

/// How a list of nodes ended.
enum Closing {
    Eof,
    End(usize),
    Else(Vec<Token>, usize),
}

struct Parser<'a> {
    file: &'a str,
    pieces: std::vec::IntoIter<Piece>,
    defines: BTreeMap<String, Vec<Node>>,
    /// Depth of enclosing `range`s (break and continue need one).
    ranges: usize,
}

pub fn parse(file: &str, pieces: Vec<Piece>) -> Result<Parsed, TemplateError> {
    let mut parser = Parser {
        file,
        pieces: pieces.into_iter(),
        defines: BTreeMap::new(),
        ranges: 0,
    };
    let (root, end) = parser.list()?;
    match end {
        Closing::Eof => Ok(Parsed {
            root,
            defines: parser.defines,
        }),
        Closing::End(line) => Err(parser.err(line, "unexpected {{end}}")),
        Closing::Else(_, line) => Err(parser.err(line, "unexpected {{else}}")),
    }
}

impl Parser<'_> {
    fn err(&self, line: usize, message: impl Into<String>) -> TemplateError {
        TemplateError::new(self.file, line, message)
    }

    fn list(&mut self) -> Result<(Vec<Node>, Closing), TemplateError> {
        let mut nodes = Vec::new();
        while let Some(piece) = self.pieces.next() {
            let (tokens, line) = match piece {
                Piece::Text(t) => {
                    nodes.push(Node::Text(t));
                    continue;
                }
                Piece::Action(tokens, line) => (tokens, line),
            };
            let keyword = match tokens.first() {
                Some(Token::Identifier(word)) => word.as_str(),
                _ => "",
            };
            let rest = tokens.get(1..).unwrap_or_default().to_vec();
            match keyword {
                "end" => {
                    if !rest.is_empty() {
                        return Err(self.err(line, "unexpected tokens after end"));
                    }
                    return Ok((nodes, Closing::End(line)));
                }
                "else" => return Ok((nodes, Closing::Else(rest, line))),
                "if" | "with" => {
                    let pipe = self.pipeline(&rest, line)?;
                    let node = self.branch(keyword, line, pipe)?;
                    nodes.push(node);
                }
                "range" => {
                    let pipe = self.pipeline(&rest, line)?;
                    self.ranges += 1;
                    let body = self.list();
                    self.ranges -= 1;
                    let (body, end) = body?;
                    let otherwise = match end {
                        Closing::End(_) => Vec::new(),
                        Closing::Else(tokens, l) if tokens.is_empty() => self.until_end(l)?,
                        Closing::Else(_, l) => return Err(self.err(l, "range can't have else if")),
                        Closing::Eof => {
                            return Err(self.err(line, "unclosed range: missing {{end}}"))
                        }
                    };
                    nodes.push(Node::Range {
                        line,
                        pipe,
                        body,
                        otherwise,
                    });
                }
                "define" | "block" => {
                    let (name, pipe) = self.template_args(&rest, line, keyword)?;
                    let body = self.until_end(line)?;
                    if keyword == "block" {
                        nodes.push(Node::Template {
                            line,
                            name: name.clone(),
                            pipe,
                        });
                    } else if pipe.is_some() {
                        return Err(self.err(line, "define takes only a name"));
                    }
                    self.defines.insert(name, body);
                }
                "template" => {
                    let (name, pipe) = self.template_args(&rest, line, keyword)?;
                    nodes.push(Node::Template { line, name, pipe });
                }
                "break" | "continue" => {
                    if self.ranges == 0 {
                        return Err(
                            self.err(line, format!("{{{{{keyword}}}}} outside {{{{range}}}}"))
                        );
                    }
                    nodes.push(if keyword == "break" {
                        Node::Break(line)
                    } else {
                        Node::Continue(line)
                    });
                }
                _ => {
                    let pipe = self.pipeline(&tokens, line)?;
                    nodes.push(Node::Action { line, pipe });
                }
            }
        }
        Ok((nodes, Closing::Eof))
    }

    /// The rest of an `if` or `with` after its pipeline, `else if`/`else with` chains included.
    fn branch(
        &mut self,
        keyword: &str,
        line: usize,
        pipe: Pipeline,
    ) -> Result<Node, TemplateError> {
        let (body, end) = self.list()?;
        let otherwise = match end {
            Closing::End(_) => Vec::new(),
            Closing::Eof => {
                return Err(self.err(line, format!("unclosed {keyword}: missing {{{{end}}}}")))
            }
            Closing::Else(tokens, l) if tokens.is_empty() => self.until_end(l)?,
            Closing::Else(tokens, l) => match tokens.first() {
                Some(Token::Identifier(k)) if k == keyword => {
                    let inner = self.pipeline(&tokens[1..], l)?;
                    vec![self.branch(keyword, l, inner)?]
                }
                _ => return Err(self.err(l, format!("expected else or else {keyword}"))),
            },
        };
        Ok(match keyword {
            "if" => Node::If {
                line,
                pipe,
                then: body,
                otherwise,
            },
            _ => Node::With {
                line,
                pipe,
                body,
                otherwise,
            },
        })
    }

    fn until_end(&mut self, line: usize) -> Result<Vec<Node>, TemplateError> {
        match self.list()? {
            (nodes, Closing::End(_)) => Ok(nodes),
            (_, Closing::Eof) => Err(self.err(line, "missing {{end}}")),
            (_, Closing::Else(_, l)) => Err(self.err(l, "unexpected {{else}}")),
        }
    }

    fn template_args(
        &self,
        tokens: &[Token],
        line: usize,
        keyword: &str,
    ) -> Result<(String, Option<Pipeline>), TemplateError> {
        let Some(Token::Str(name)) = tokens.first() else {
            return Err(self.err(line, format!("{keyword} needs a quoted template name")));
        };
        let pipe = if tokens.len() > 1 {
            Some(self.pipeline(&tokens[1..], line)?)
        } else {
            None
        };
        Ok((name.clone(), pipe))
    }

    fn pipeline(&self, tokens: &[Token], line: usize) -> Result<Pipeline, TemplateError> {
        let mut pipe = Pipeline::default();
        let mut rest = tokens;
        // Declarations: `$x :=`, `$i, $e :=`, `$x =`.
        let mut vars = Vec::new();
        let mut i = 0;
        while let Some(Token::Variable(name, fields)) = rest.get(i) {
            if !fields.is_empty() {
                break;
            }
            vars.push(name.clone());
            match rest.get(i + 1) {
                Some(Token::Comma) => i += 2,
                Some(Token::Declare) | Some(Token::Assign) => {
                    pipe.assign = rest[i + 1] == Token::Assign;
                    pipe.vars = std::mem::take(&mut vars);
                    rest = &rest[i + 2..];
                    break;
                }
                _ => break,
            }
        }
        if rest.is_empty() {
            return Err(self.err(line, "missing value for command"));
        }
        let mut command = Vec::new();
        let mut i = 0;
        while i < rest.len() {
            let token = &rest[i];
            i += 1;
            let operand = match token {
                Token::Pipe => {
                    if command.is_empty() {
                        return Err(self.err(line, "missing command before |"));
                    }
                    pipe.commands.push(std::mem::take(&mut command));
                    continue;
                }
                Token::LeftParen => {
                    let mut depth = 1;
                    let start = i;
                    while i < rest.len() && depth > 0 {
                        match rest[i] {
                            Token::LeftParen => depth += 1,
                            Token::RightParen => depth -= 1,
                            _ => {}
                        }
                        i += 1;
                    }
                    if depth != 0 {
                        return Err(self.err(line, "unclosed left paren"));
                    }
                    let inner = self.pipeline(&rest[start..i - 1], line)?;
                    let chain = match rest.get(i) {
                        Some(Token::Chain(names)) => {
                            i += 1;
                            names.clone()
                        }
                        _ => Vec::new(),
                    };
                    Operand::Nested(Box::new(inner), chain)
                }
                Token::RightParen => return Err(self.err(line, "unexpected right paren")),
                Token::Field(names) => Operand::Field(names.clone()),
                Token::Variable(name, fields) => Operand::Variable(name.clone(), fields.clone()),
                Token::Identifier(name) => Operand::Function(name.clone()),
                Token::Str(s) => Operand::Literal(Value::Str(s.clone())),
                Token::Int(n) => Operand::Literal(Value::Int(*n)),
                Token::Float(f) => Operand::Literal(Value::Float(*f)),
                Token::Bool(b) => Operand::Literal(Value::Bool(*b)),
                Token::Nil => Operand::Literal(Value::Nil),
                Token::Chain(_) | Token::Declare | Token::Assign | Token::Comma => {
                    return Err(self.err(line, format!("unexpected {token:?} in command")))
                }
            };
            command.push(operand);
        }
        if command.is_empty() {
            return Err(self.err(line, "missing command after |"));
        }
        pipe.commands.push(command);
        Ok(pipe)
    }
}
