//! Execution: walks the tree with dot, variables and the function table, into text.

use std::fmt::Write as _;

use super::funcs::{self, Context};
use super::parse::{Node, Operand, Parsed, Pipeline};
use super::{format_float, Template, TemplateError, Value};

/// How deep `template` calls may nest (Go stops at 100,000; a config needs a handful).
const MAX_DEPTH: usize = 1000;

enum Flow {
    Normal,
    Break,
    Continue,
}

struct State<'a> {
    template: &'a Template,
    vars: Vec<(String, Value)>,
    out: String,
    depth: usize,
    line: usize,
    /// Printing a missing parameter is an error (else `<no value>`, as Go prints it).
    strict: bool,
}

pub(super) fn render(
    template: &Template,
    data: &Value,
    strict: bool,
) -> Result<String, TemplateError> {
    let mut state = State {
        template,
        vars: vec![(String::new(), data.clone())],
        out: String::new(),
        depth: 0,
        line: 1,
        strict,
    };
    state.list(&template.parsed.root, data)?;
    Ok(state.out)
}

/// Calls `f(name, line)` for every function a template names.
pub(super) fn walk_functions(parsed: &Parsed, f: &mut dyn FnMut(&str, usize)) {
    fn pipe(p: &Pipeline, line: usize, f: &mut dyn FnMut(&str, usize)) {
        for command in &p.commands {
            for operand in command {
                match operand {
                    Operand::Function(name) => f(name, line),
                    Operand::Nested(inner, _) => pipe(inner, line, f),
                    _ => {}
                }
            }
        }
    }
    fn nodes(list: &[Node], f: &mut dyn FnMut(&str, usize)) {
        for node in list {
            match node {
                Node::Action { line, pipe: p } => pipe(p, *line, f),
                Node::If {
                    line,
                    pipe: p,
                    then: a,
                    otherwise: b,
                }
                | Node::Range {
                    line,
                    pipe: p,
                    body: a,
                    otherwise: b,
                }
                | Node::With {
                    line,
                    pipe: p,
                    body: a,
                    otherwise: b,
                } => {
                    pipe(p, *line, f);
                    nodes(a, f);
                    nodes(b, f);
                }
                Node::Template {
                    line,
                    pipe: Some(p),
                    ..
                } => pipe(p, *line, f),
                _ => {}
            }
        }
    }
    nodes(&parsed.root, f);
    for body in parsed.defines.values() {
        nodes(body, f);
    }
}

/// Go's `%v` of a value.
pub(super) fn print(value: &Value, out: &mut String) {
    match value {
        Value::Nil | Value::Missing(_) => out.push_str("<no value>"),
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Float(f) => out.push_str(&format_float(*f)),
        Value::Str(s) => out.push_str(s),
        Value::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                print(item, out);
            }
            out.push(']');
        }
        Value::Map(map) => {
            out.push_str("map[");
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(k);
                out.push(':');
                print(v, out);
            }
            out.push(']');
        }
    }
}

/// Field `names` of `value`; `path` is what `value` was reached by (for a missing key's name).
fn fields(value: Value, path: &str, names: &[String]) -> Result<Value, String> {
    let mut current = value;
    let mut at = path.to_string();
    for name in names {
        at.push('.');
        at.push_str(name);
        current = match current {
            Value::Map(mut map) => map.remove(name).unwrap_or(Value::Missing(at.clone())),
            Value::Missing(_) => Value::Missing(at.clone()),
            Value::Nil => Value::Missing(at.clone()),
            other => {
                return Err(format!(
                    "can't evaluate field {name} in type {}",
                    other.type_name()
                ))
            }
        };
    }
    Ok(current)
}

impl State<'_> {
    fn err(&self, message: impl Into<String>) -> TemplateError {
        TemplateError::new(&self.template.name, self.line, message)
    }

    fn list(&mut self, nodes: &[Node], dot: &Value) -> Result<Flow, TemplateError> {
        for node in nodes {
            match self.node(node, dot)? {
                Flow::Normal => {}
                flow => return Ok(flow),
            }
        }
        Ok(Flow::Normal)
    }

    /// Runs `nodes` in a variable scope of their own.
    fn scoped(&mut self, nodes: &[Node], dot: &Value) -> Result<Flow, TemplateError> {
        let mark = self.vars.len();
        let flow = self.list(nodes, dot);
        self.vars.truncate(mark);
        flow
    }

    fn node(&mut self, node: &Node, dot: &Value) -> Result<Flow, TemplateError> {
        match node {
            Node::Text(text) => self.out.push_str(text),
            Node::Action { line, pipe } => {
                self.line = *line;
                let value = self.pipeline(pipe, dot)?;
                if pipe.vars.is_empty() {
                    if let (Value::Missing(path), true) = (&value, self.strict) {
                        return Err(self.err(missing(path)));
                    }
                    print(&value, &mut self.out);
                }
            }
            Node::If {
                line,
                pipe,
                then,
                otherwise,
            } => {
                self.line = *line;
                let mark = self.vars.len();
                let value = self.pipeline(pipe, dot)?;
                let flow = if value.truth() {
                    self.list(then, dot)
                } else {
                    self.list(otherwise, dot)
                };
                self.vars.truncate(mark);
                return flow;
            }
            Node::With {
                line,
                pipe,
                body,
                otherwise,
            } => {
                self.line = *line;
                let mark = self.vars.len();
                let value = self.pipeline(pipe, dot)?;
                let flow = if value.truth() {
                    self.list(body, &value)
                } else {
                    self.list(otherwise, dot)
                };
                self.vars.truncate(mark);
                return flow;
            }
            Node::Range {
                line,
                pipe,
                body,
                otherwise,
            } => {
                self.line = *line;
                return self.range(pipe, body, otherwise, dot);
            }
            Node::Template { line, name, pipe } => {
                self.line = *line;
                let arg = match pipe {
                    Some(p) => self.pipeline(p, dot)?,
                    None => Value::Nil,
                };
                let Some(body) = self.template.parsed.defines.get(name) else {
                    return Err(self.err(format!("no such template {name:?}")));
                };
                if self.depth >= MAX_DEPTH {
                    return Err(self.err(format!("template {name:?} nests too deeply")));
                }
                let saved = std::mem::replace(&mut self.vars, vec![(String::new(), arg.clone())]);
                self.depth += 1;
                let result = self.list(body, &arg);
                self.depth -= 1;
                self.vars = saved;
                result?;
            }
            Node::Break(_) => return Ok(Flow::Break),
            Node::Continue(_) => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    fn range(
        &mut self,
        pipe: &Pipeline,
        body: &[Node],
        otherwise: &[Node],
        dot: &Value,
    ) -> Result<Flow, TemplateError> {
        // The range's own variables are declared per element, not by the pipeline.
        let source = Pipeline {
            vars: Vec::new(),
            assign: false,
            commands: pipe.commands.clone(),
        };
        let value = self.pipeline(&source, dot)?;
        let items: Vec<(Value, Value)> = match value {
            Value::List(list) => list
                .into_iter()
                .enumerate()
                .map(|(i, v)| (Value::Int(i as i64), v))
                .collect(),
            Value::Map(map) => map.into_iter().map(|(k, v)| (Value::Str(k), v)).collect(),
            Value::Int(n) => (0..n.max(0))
                .map(|i| (Value::Int(i), Value::Int(i)))
                .collect(),
            Value::Nil | Value::Missing(_) => Vec::new(),
            other => {
                return Err(self.err(format!("range can't iterate over {}", other.type_name())))
            }
        };
        if items.is_empty() {
            return self.scoped(otherwise, dot);
        }
        for (key, element) in items {
            let mark = self.vars.len();
            match pipe.vars.as_slice() {
                [] => {}
                [one] => self.vars.push((one.clone(), element.clone())),
                [k, v, ..] => {
                    self.vars.push((k.clone(), key));
                    self.vars.push((v.clone(), element.clone()));
                }
            }
            let flow = self.list(body, &element);
            self.vars.truncate(mark);
            if let Flow::Break = flow? {
                break;
            }
        }
        Ok(Flow::Normal)
    }

    fn pipeline(&mut self, pipe: &Pipeline, dot: &Value) -> Result<Value, TemplateError> {
        let mut value = None;
        for command in &pipe.commands {
            value = Some(self.command(command, dot, value)?);
        }
        let value = value.unwrap_or(Value::Nil);
        for name in &pipe.vars {
            if pipe.assign {
                let Some(slot) = self.vars.iter_mut().rev().find(|(n, _)| n == name) else {
                    return Err(self.err(format!("undefined variable: ${name}")));
                };
                slot.1 = value.clone();
            } else {
                self.vars.push((name.clone(), value.clone()));
            }
        }
        Ok(value)
    }

    fn command(
        &mut self,
        operands: &[Operand],
        dot: &Value,
        piped: Option<Value>,
    ) -> Result<Value, TemplateError> {
        let Some(first) = operands.first() else {
            return Err(self.err("empty command"));
        };
        if let Operand::Function(name) = first {
            return self.call(name, &operands[1..], dot, piped);
        }
        if operands.len() > 1 || piped.is_some() {
            return Err(self.err(format!("can't give argument to non-function {first:?}")));
        }
        self.operand(first, dot)
    }

    fn call(
        &mut self,
        name: &str,
        operands: &[Operand],
        dot: &Value,
        piped: Option<Value>,
    ) -> Result<Value, TemplateError> {
        // `and` and `or` stop at the first argument that decides them.
        if name == "and" || name == "or" {
            let total = operands.len() + usize::from(piped.is_some());
            if total == 0 {
                return Err(self.err(format!(
                    "wrong number of args for {name}: want at least 1 got 0"
                )));
            }
            let mut last = Value::Nil;
            for operand in operands {
                last = self.operand(operand, dot)?;
                if last.truth() != (name == "and") {
                    return Ok(last);
                }
            }
            if let Some(p) = piped {
                last = p;
            }
            return Ok(last);
        }
        let mut args = Vec::with_capacity(operands.len() + 1);
        for operand in operands {
            args.push(self.operand(operand, dot)?);
        }
        args.extend(piped);
        let context = Context {
            base_dir: &self.template.base_dir,
        };
        funcs::call(name, &args, &context)
            .map_err(|e| self.err(format!("error calling {name}: {e}")))
    }

    fn operand(&mut self, operand: &Operand, dot: &Value) -> Result<Value, TemplateError> {
        match operand {
            Operand::Field(names) => fields(dot.clone(), "", names).map_err(|e| self.err(e)),
            Operand::Variable(name, names) => {
                let Some((_, value)) = self.vars.iter().rev().find(|(n, _)| n == name) else {
                    return Err(self.err(format!("undefined variable: ${name}")));
                };
                fields(value.clone(), &format!("${name}"), names).map_err(|e| self.err(e))
            }
            Operand::Function(name) => self.call(name, &[], dot, None),
            Operand::Literal(v) => Ok(v.clone()),
            Operand::Nested(pipe, names) => {
                let mark = self.vars.len();
                let value = self.pipeline(pipe, dot);
                self.vars.truncate(mark);
                fields(value?, "(…)", names).map_err(|e| self.err(e))
            }
        }
    }
}

/// The error for printing a parameter nobody set.
pub(super) fn missing(path: &str) -> String {
    format!(
        "parameter {path} is not set (and no DefaultParam gives it a value): set it with \
         --param, an overrides file or a CL2_ environment variable"
    )
}
