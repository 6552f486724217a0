//! A Go `text/template` engine, as clusterloader2 renders its configs and object templates:
//! actions with `{{-`/`-}}` trimming, pipelines, variables, `if`/`else if`/`with`/`range`
//! (with `break`/`continue`), `define`/`template`/`block`, Go's built-in functions and
//! clusterloader2's own ([`funcs`]).
//!
//! Data is a map of parameters. A missing key evaluates to nil, as Go's default
//! (`missingkey=default`) does, so `DefaultParam .X 3`, `if .X` and `eq .X nil` work on
//! unset parameters; printing a missing parameter, or doing arithmetic on one, is an error
//! naming it (Go would print `<no value>` into the object). Every error names the file and
//! line.

mod exec;
pub mod funcs;
mod lex;
mod parse;
mod printf;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use parse::Parsed;

/// A template value: what YAML and the functions produce.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Nil,
    /// A key that was not in its map (the dotted path, for the error that prints it).
    Missing(String),
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
    Map(BTreeMap<String, Value>),
}

impl Value {
    pub fn is_nil(&self) -> bool {
        matches!(self, Value::Nil | Value::Missing(_))
    }

    /// Go's truth: false, zero, nil and empty things are false.
    pub fn truth(&self) -> bool {
        match self {
            Value::Nil | Value::Missing(_) => false,
            Value::Bool(b) => *b,
            Value::Int(n) => *n != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::List(l) => !l.is_empty(),
            Value::Map(m) => !m.is_empty(),
        }
    }

    /// The Go type name, for errors.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Nil | Value::Missing(_) => "<nil>",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::List(_) => "[]interface {}",
            Value::Map(_) => "map[string]interface {}",
        }
    }

    pub fn from_json(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or_default()),
            },
            serde_json::Value::String(s) => Value::Str(s.clone()),
            serde_json::Value::Array(a) => Value::List(a.iter().map(Value::from_json).collect()),
            serde_json::Value::Object(o) => Value::Map(
                o.iter()
                    .map(|(k, v)| (k.clone(), Value::from_json(v)))
                    .collect(),
            ),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Nil | Value::Missing(_) => serde_json::Value::Null,
            Value::Bool(b) => serde_json::Value::Bool(*b),
            Value::Int(n) => serde_json::Value::from(*n),
            Value::Float(f) => serde_json::Value::from(*f),
            Value::Str(s) => serde_json::Value::String(s.clone()),
            Value::List(l) => serde_json::Value::Array(l.iter().map(Value::to_json).collect()),
            Value::Map(m) => {
                serde_json::Value::Object(m.iter().map(|(k, v)| (k.clone(), v.to_json())).collect())
            }
        }
    }

    /// A string parameter as clusterloader2 reads `CL2_*` variables: an int, else a float,
    /// else a bool, else the string.
    pub fn unpack(s: &str) -> Value {
        if let Ok(n) = s.parse::<i64>() {
            return Value::Int(n);
        }
        if let Ok(f) = s.parse::<f64>() {
            if !s.eq_ignore_ascii_case("nan") && !s.to_ascii_lowercase().contains("inf") {
                return Value::Float(f);
            }
        }
        match s {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Value::Bool(true),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Value::Bool(false),
            _ => Value::Str(s.to_string()),
        }
    }
}

/// A template that could not be parsed or executed, at `file:line`.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct TemplateError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl TemplateError {
    pub fn new(file: &str, line: usize, message: impl Into<String>) -> Self {
        TemplateError {
            file: file.to_string(),
            line,
            message: message.into(),
        }
    }
}

/// A parsed template with what its functions need.
#[derive(Clone, Debug)]
pub struct Template {
    /// The file name errors carry.
    name: String,
    parsed: Parsed,
    /// Where `IncludeEmbedFile` and relative `IncludeFile` paths are read from.
    base_dir: PathBuf,
}

impl Template {
    /// Parses `source`; `name` is the file errors name; `base_dir` resolves included files.
    pub fn parse(name: &str, source: &str, base_dir: &Path) -> Result<Template, TemplateError> {
        let pieces = lex::split(name, source)?;
        let parsed = parse::parse(name, pieces)?;
        let template = Template {
            name: name.to_string(),
            parsed,
            base_dir: base_dir.to_path_buf(),
        };
        template.check_functions()?;
        Ok(template)
    }

    /// Reads and parses the template file `path`.
    pub fn from_file(path: &Path) -> Result<Template, TemplateError> {
        let name = path.display().to_string();
        let source = std::fs::read_to_string(path)
            .map_err(|e| TemplateError::new(&name, 0, format!("cannot read: {e}")))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Template::parse(&name, &source, base)
    }

    /// Renders with `data` as dot.
    pub fn render(&self, data: &Value) -> Result<String, TemplateError> {
        exec::render(self, data, true)
    }

    /// Renders as Go does, printing a missing parameter as `<no value>` (a delete only needs
    /// the object's kind and name, whatever else its template lacks).
    pub fn render_lenient(&self, data: &Value) -> Result<String, TemplateError> {
        exec::render(self, data, false)
    }

    /// Go's parser refuses unknown functions before anything runs; so does this.
    fn check_functions(&self) -> Result<(), TemplateError> {
        let mut unknown = None;
        exec::walk_functions(&self.parsed, &mut |name, line| {
            if unknown.is_none() && !funcs::exists(name) {
                unknown = Some((name.to_string(), line));
            }
        });
        match unknown {
            Some((name, line)) => Err(TemplateError::new(
                &self.name,
                line,
                format!("function {name:?} not defined"),
            )),
            None => Ok(()),
        }
    }
}

/// Renders Go's `%v` of a float: the shortest digits, in exponent form below 1e-4 or from
/// 1e6 up (as `fmt` prints a float64: `1e+06`).
pub fn format_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let exp = f.abs().log10().floor() as i32;
    if !(-4..6).contains(&exp) {
        let s = format!("{f:e}");
        let (mantissa, e) = s.split_once('e').unwrap_or((&s, "0"));
        let e: i32 = e.parse().unwrap_or(0);
        let sign = if e < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", e.abs());
    }
    format!("{f}")
}

#[cfg(test)]
mod tests;
