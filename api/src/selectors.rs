//! Label and field selectors: the `labelSelector` / `fieldSelector` query parameters of list and
//! watch, and the `metav1.LabelSelector` objects of workloads and services.
//!
//! The grammar and messages follow apimachinery's `labels/selector.go` and `fields/selector.go`, so
//! a bad selector gets the 400 message kubectl users know.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use crate::names::{is_qualified_name, is_valid_label_value};
use crate::resources::ResourceInfo;

/// Why a selector was refused. The API answers 400 BadRequest with the Display text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The `labelSelector` text does not parse; `message` names the bad part.
    #[error("{message}")]
    Label { selector: String, message: String },
    /// A `metav1.LabelSelector` object is malformed (bad operator, values, key).
    #[error("{message}")]
    LabelObject { message: String },
    /// The `fieldSelector` text does not parse.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    Field { selector: String, term: String },
    /// A `fieldSelector` value has a bad escape sequence.
    #[error("invalid field selector value {value:?}: {reason}")]
    FieldEscape { value: String, reason: &'static str },
    /// The resource does not index that field.
    #[error("field label not supported: {field}")]
    UnsupportedField { field: String },
}

/// A label selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One requirement of a label selector; a selector is the AND of its requirements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    pub key: String,
    pub operator: Operator,
    pub values: Vec<String>,
}

/// Something that has labels: a map from a manifest or from an object's `metadata.labels`.
pub trait Labels {
    fn label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Labels for HashMap<String, String> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

/// A JSON labels map; a non-string value counts as absent.
impl Labels for Map<String, Value> {
    fn label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Value::as_str)
    }
}

impl<L: Labels> Labels for Option<&L> {
    fn label(&self, key: &str) -> Option<&str> {
        self.and_then(|l| l.label(key))
    }
}

/// A parsed label selector.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    /// Sorted by key, like apimachinery, so the Display form is deterministic.
    requirements: Vec<Requirement>,
    /// A null `metav1.LabelSelector` selects nothing (not everything).
    nothing: bool,
}

impl LabelSelector {
    /// The selector that matches every object.
    pub fn everything() -> LabelSelector {
        LabelSelector::default()
    }

    /// The selector that matches no object (what a null `metav1.LabelSelector` means).
    pub fn nothing() -> LabelSelector {
        LabelSelector {
            requirements: Vec::new(),
            nothing: true,
        }
    }

    /// Parses the query-string form: `a=b,c!=d,e in (x,y),f notin (z),g,!h,i>3`.
    pub fn parse(selector: &str) -> Result<LabelSelector, SelectorError> {
        let mut parser = Parser {
            tokens: lex(selector),
            pos: 0,
        };
        let mut requirements = parser.parse().map_err(|message| SelectorError::Label {
            selector: selector.to_string(),
            message,
        })?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// Builds a selector from a `metav1.LabelSelector` JSON object (`matchLabels` and
    /// `matchExpressions` with In, NotIn, Exists, DoesNotExist). `null` selects nothing; `{}`
    /// selects everything.
    pub fn from_label_selector_json(value: &Value) -> Result<LabelSelector, SelectorError> {
        let object = match value {
            Value::Null => return Ok(LabelSelector::nothing()),
            Value::Object(object) => object,
            other => {
                return Err(SelectorError::LabelObject {
                    message: format!("label selector must be an object, not {other}"),
                })
            }
        };
        let mut requirements = Vec::new();
        if let Some(match_labels) = object.get("matchLabels").and_then(Value::as_object) {
            for (key, value) in match_labels {
                let value = value.as_str().unwrap_or_default();
                requirements.push(new_requirement(
                    key,
                    Operator::Equals,
                    vec![value.to_string()],
                    "matchLabels",
                )?);
            }
        }
        if let Some(expressions) = object.get("matchExpressions").and_then(Value::as_array) {
            for (i, expression) in expressions.iter().enumerate() {
                let key = expression
                    .get("key")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let operator = expression
                    .get("operator")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let operator = match operator {
                    "In" => Operator::In,
                    "NotIn" => Operator::NotIn,
                    "Exists" => Operator::Exists,
                    "DoesNotExist" => Operator::DoesNotExist,
                    other => {
                        return Err(SelectorError::LabelObject {
                            message: format!("{other:?} is not a valid label selector operator"),
                        })
                    }
                };
                let values: Vec<String> = expression
                    .get("values")
                    .and_then(Value::as_array)
                    .map(|vs| {
                        vs.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                requirements.push(new_requirement(
                    key,
                    operator,
                    values,
                    &format!("matchExpressions[{i}]"),
                )?);
            }
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector {
            requirements,
            nothing: false,
        })
    }

    /// True when the selector does not restrict the selection (it matches everything).
    pub fn is_empty(&self) -> bool {
        !self.nothing && self.requirements.is_empty()
    }

    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether the labels satisfy every requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        !self.nothing && self.requirements.iter().all(|r| r.matches(labels))
    }

    /// Whether an object's `metadata.labels` satisfy the selector.
    pub fn matches_object(&self, object: &Value) -> bool {
        let labels = object
            .pointer("/metadata/labels")
            .and_then(Value::as_object);
        self.matches(&labels)
    }

    /// The single value the selector requires for `key` (`key=v`, `key==v`, `key in (v)`).
    pub fn exact(&self, key: &str) -> Option<&str> {
        let r = self.requirements.iter().find(|r| r.key == key)?;
        match (r.operator, r.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [value]) => Some(value),
            _ => None,
        }
    }
}

impl Requirement {
    fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.label(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                value.is_some_and(|v| self.values.iter().any(|x| x == v))
            }
            Operator::NotIn | Operator::NotEquals => {
                value.is_none_or(|v| !self.values.iter().any(|x| x == v))
            }
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(have), Some(want)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > want
                } else {
                    have < want
                }
            }
        }
    }
}

impl std::fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let values = r.values.join(",");
            match r.operator {
                Operator::Exists => write!(f, "{}", r.key)?,
                Operator::DoesNotExist => write!(f, "!{}", r.key)?,
                Operator::Equals => write!(f, "{}={values}", r.key)?,
                Operator::DoubleEquals => write!(f, "{}=={values}", r.key)?,
                Operator::NotEquals => write!(f, "{}!={values}", r.key)?,
                Operator::In => write!(f, "{} in ({values})", r.key)?,
                Operator::NotIn => write!(f, "{} notin ({values})", r.key)?,
                Operator::GreaterThan => write!(f, "{}>{values}", r.key)?,
                Operator::LessThan => write!(f, "{}<{values}", r.key)?,
            }
        }
        Ok(())
    }
}

/// Checks a requirement as apimachinery's `NewRequirement` does. `path` prefixes messages about
/// the JSON form.
fn new_requirement(
    key: &str,
    operator: Operator,
    values: Vec<String>,
    path: &str,
) -> Result<Requirement, SelectorError> {
    let fail = |message: String| Err(SelectorError::LabelObject { message });
    let key_errors = is_qualified_name(key);
    if !key_errors.is_empty() {
        return fail(format!(
            "{path}.key: Invalid value: {key:?}: {}",
            key_errors.join("; ")
        ));
    }
    match operator {
        Operator::In | Operator::NotIn if values.is_empty() => {
            return fail(format!("{path}.values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"))
        }
        Operator::Exists | Operator::DoesNotExist if !values.is_empty() => {
            return fail(format!(
                "{path}.values: Invalid value: {values:?}: values set must be empty for exists and does not exist"
            ))
        }
        _ => {}
    }
    for (i, value) in values.iter().enumerate() {
        let errors = is_valid_label_value(value);
        if !errors.is_empty() {
            return fail(format!(
                "{path}.values[{i}][{key}]: Invalid value: {value:?}: {}",
                errors.join("; ")
            ));
        }
    }
    Ok(Requirement {
        key: key.to_string(),
        operator,
        values,
    })
}

/// A token of the label selector grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    End,
    OpenPar,
    ClosePar,
    Comma,
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    In,
    NotIn,
    Identifier(String),
}

impl Token {
    /// The literal as apimachinery prints it in "found '…'" messages.
    fn literal(&self) -> &str {
        match self {
            Token::End => "",
            Token::OpenPar => "(",
            Token::ClosePar => ")",
            Token::Comma => ",",
            Token::Not => "!",
            Token::Equals => "=",
            Token::DoubleEquals => "==",
            Token::NotEquals => "!=",
            Token::GreaterThan => ">",
            Token::LessThan => "<",
            Token::In => "in",
            Token::NotIn => "notin",
            Token::Identifier(s) => s,
        }
    }

    /// In value position the keywords `in` and `notin` are ordinary identifiers.
    fn as_value(&self) -> Option<&str> {
        match self {
            Token::Identifier(s) => Some(s),
            Token::In => Some("in"),
            Token::NotIn => Some("notin"),
            _ => None,
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn lex(input: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = input.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if is_special(c) {
            chars.next();
            let token = match (c, chars.peek()) {
                ('=', Some('=')) => {
                    chars.next();
                    Token::DoubleEquals
                }
                ('!', Some('=')) => {
                    chars.next();
                    Token::NotEquals
                }
                ('=', _) => Token::Equals,
                ('!', _) => Token::Not,
                ('(', _) => Token::OpenPar,
                (')', _) => Token::ClosePar,
                (',', _) => Token::Comma,
                ('>', _) => Token::GreaterThan,
                (_, _) => Token::LessThan,
            };
            tokens.push(token);
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() || is_special(c) {
                    break;
                }
                word.push(c);
                chars.next();
            }
            tokens.push(match word.as_str() {
                "in" => Token::In,
                "notin" => Token::NotIn,
                _ => Token::Identifier(word),
            });
        }
    }
    tokens.push(Token::End);
    tokens
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        self.tokens.get(self.pos).unwrap_or(&Token::End)
    }

    fn next(&mut self) -> Token {
        let token = self.peek().clone();
        self.pos += 1;
        token
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            match self.peek() {
                Token::End => return Ok(requirements),
                t if t.as_value().is_some() || *t == Token::Not => {
                    let requirement = self
                        .requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    match self.next() {
                        Token::End => return Ok(requirements),
                        Token::Comma => {
                            let after = self.peek();
                            if after.as_value().is_none() && *after != Token::Not {
                                return Err(format!(
                                    "found '{}', expected: identifier after ','",
                                    after.literal()
                                ));
                            }
                        }
                        other => {
                            return Err(format!(
                                "found '{}', expected: ',' or 'end of string'",
                                other.literal()
                            ))
                        }
                    }
                }
                other => {
                    return Err(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        other.literal()
                    ))
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, String> {
        let mut token = self.next();
        let negated = token == Token::Not;
        if negated {
            token = self.next();
        }
        let Some(key) = token.as_value().map(str::to_string) else {
            return Err(format!("found '{}', expected: identifier", token.literal()));
        };
        let key_errors = is_qualified_name(&key);
        if !key_errors.is_empty() {
            return Err(format!("Invalid value: {key:?}: {}", key_errors.join("; ")));
        }
        if matches!(self.peek(), Token::End | Token::Comma) {
            let operator = if negated {
                Operator::DoesNotExist
            } else {
                Operator::Exists
            };
            return Ok(Requirement {
                key,
                operator,
                values: Vec::new(),
            });
        }
        if negated {
            // `!key` takes no operator.
            let found = self.peek().literal().to_string();
            return Err(format!("found '{found}', expected: ',' or 'end of string'"));
        }
        let operator = match self.next() {
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::NotEquals => Operator::NotEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            other => {
                return Err(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    other.literal()
                ))
            }
        };
        let values = match operator {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => vec![self.exact_value()?],
        };
        match operator {
            Operator::In | Operator::NotIn if values.is_empty() => {
                return Err("values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty".to_string())
            }
            Operator::GreaterThan | Operator::LessThan if values[0].parse::<i64>().is_err() => {
                return Err(format!(
                    "values[0]: Invalid value: {:?}: for 'Gt', 'Lt' operators, the value must be an integer",
                    values[0]
                ))
            }
            _ => {}
        }
        for (i, value) in values.iter().enumerate() {
            let errors = is_valid_label_value(value);
            if !errors.is_empty() {
                return Err(format!(
                    "values[{i}][{key}]: Invalid value: {value:?}: {}",
                    errors.join("; ")
                ));
            }
        }
        Ok(Requirement {
            key,
            operator,
            values,
        })
    }

    /// `(a, b, c)`; empty members are the empty value, duplicates collapse.
    fn value_set(&mut self) -> Result<Vec<String>, String> {
        let open = self.next();
        if open != Token::OpenPar {
            return Err(format!("found '{}' expected: '('", open.literal()));
        }
        let mut values: Vec<String> = Vec::new();
        let mut expect_value = true;
        loop {
            let token = self.next();
            match token {
                Token::ClosePar => {
                    if expect_value {
                        values.push(String::new());
                    }
                    break;
                }
                Token::Comma => {
                    if expect_value {
                        values.push(String::new());
                    }
                    expect_value = true;
                }
                ref t if t.as_value().is_some() && expect_value => {
                    values.push(t.literal().to_string());
                    expect_value = false;
                }
                other => {
                    let expected = if expect_value {
                        "',', ')' or identifier"
                    } else {
                        "',' or ')'"
                    };
                    return Err(format!("found '{}', expected: {expected}", other.literal()));
                }
            }
        }
        values.sort();
        values.dedup();
        Ok(values)
    }

    /// The value after `=`, `==`, `!=`, `>`, `<`; nothing before `,` or the end is the empty value.
    fn exact_value(&mut self) -> Result<String, String> {
        if matches!(self.peek(), Token::End | Token::Comma) {
            return Ok(String::new());
        }
        let token = self.next();
        token
            .as_value()
            .map(str::to_string)
            .ok_or_else(|| format!("found '{}', expected: identifier", token.literal()))
    }
}

/// A field selector operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldOperator {
    Equals,
    NotEquals,
}

/// One `field=value` / `field!=value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldTerm {
    pub field: String,
    pub operator: FieldOperator,
    pub value: String,
}

/// A parsed field selector: the AND of its terms.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// Fields every resource can be selected by.
const COMMON_FIELDS: &[&str] = &["metadata.name", "metadata.namespace"];
const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingComponent",
    "reportingController",
    "source",
    "deprecatedSource",
    "type",
];
/// Boolean fields Kubernetes renders as "false" when unset.
const BOOL_FIELDS: &[&str] = &["spec.unschedulable", "spec.hostNetwork"];

impl FieldSelector {
    /// Parses `metadata.name=x,spec.nodeName!=y` (`=`, `==`, `!=`; `\,`, `\=` and `\\` escape in
    /// values). The empty string selects everything.
    pub fn parse(selector: &str) -> Result<FieldSelector, SelectorError> {
        let mut terms = Vec::new();
        for part in split_unescaped(selector, ',') {
            if part.is_empty() {
                continue;
            }
            let Some((field, operator, raw_value)) = split_term(part) else {
                return Err(SelectorError::Field {
                    selector: selector.to_string(),
                    term: part.to_string(),
                });
            };
            let value = unescape(raw_value)?;
            terms.push(FieldTerm {
                field: field.to_string(),
                operator,
                value,
            });
        }
        Ok(FieldSelector { terms })
    }

    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn terms(&self) -> &[FieldTerm] {
        &self.terms
    }

    /// Refuses fields the resource cannot be selected by, with Kubernetes' message.
    pub fn validate_for(&self, resource: &ResourceInfo) -> Result<(), SelectorError> {
        let specific: &[&str] = match (resource.group, resource.plural) {
            ("", "pods") => POD_FIELDS,
            ("", "nodes") => &["spec.unschedulable"],
            ("", "events") | ("events.k8s.io", "events") => EVENT_FIELDS,
            ("", "namespaces") => &["status.phase"],
            ("", "secrets") => &["type"],
            _ => &[],
        };
        match self.terms.iter().find(|t| {
            !COMMON_FIELDS.contains(&t.field.as_str()) && !specific.contains(&t.field.as_str())
        }) {
            Some(term) => Err(SelectorError::UnsupportedField {
                field: term.field.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Whether the object satisfies every term; a missing field reads as "" (or "false" for the
    /// boolean fields).
    pub fn matches(&self, object: &Value) -> bool {
        self.matches_with(
            |path| match object.pointer(&format!("/{}", path.replace('.', "/"))) {
                Some(Value::String(s)) => Some(Cow::Borrowed(s.as_str())),
                Some(Value::Bool(b)) => Some(Cow::Owned(b.to_string())),
                Some(Value::Number(n)) => Some(Cow::Owned(n.to_string())),
                _ => None,
            },
        )
    }

    /// [`FieldSelector::matches`] on an object known only through `lookup`, which gives the
    /// rendered value at a dotted path (`spec.nodeName`), `None` when absent. Lets a cache keep
    /// just the selectable fields, not a JSON tree of them.
    pub fn matches_with<'a>(&self, lookup: impl Fn(&str) -> Option<Cow<'a, str>>) -> bool {
        self.terms.iter().all(|t| {
            let have = field_value(&lookup, &t.field);
            match t.operator {
                FieldOperator::Equals => have == t.value,
                FieldOperator::NotEquals => have != t.value,
            }
        })
    }

    /// The value an `=`/`==` term requires of `field`, for indexed lookups.
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.terms
            .iter()
            .find(|t| t.field == field && t.operator == FieldOperator::Equals)
            .map(|t| t.value.as_str())
    }
}

impl std::fmt::Display for FieldSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            let op = if t.operator == FieldOperator::Equals {
                "="
            } else {
                "!="
            };
            let value = t
                .value
                .replace('\\', "\\\\")
                .replace(',', "\\,")
                .replace('=', "\\=");
            write!(f, "{}{op}{value}", t.field)?;
        }
        Ok(())
    }
}

/// The selectable value of a field, as Kubernetes' per-resource field sets render it. Event
/// fields read either event schema (core `involvedObject`/`source`, events.k8s.io
/// `regarding`/`deprecatedSource`), since both are stored together.
fn field_value<'a>(lookup: &impl Fn(&str) -> Option<Cow<'a, str>>, field: &str) -> String {
    let candidates: Vec<String> = if let Some(rest) = field.strip_prefix("involvedObject.") {
        vec![field.to_string(), format!("regarding.{rest}")]
    } else if let Some(rest) = field.strip_prefix("regarding.") {
        vec![field.to_string(), format!("involvedObject.{rest}")]
    } else {
        match field {
            "source" | "deprecatedSource" => vec![
                "source.component".into(),
                "deprecatedSource.component".into(),
            ],
            "reportingComponent" | "reportingController" => {
                vec!["reportingComponent".into(), "reportingController".into()]
            }
            _ => vec![field.to_string()],
        }
    };
    for candidate in &candidates {
        match lookup(candidate) {
            Some(s) if !s.is_empty() => return s.into_owned(),
            _ => {}
        }
    }
    if BOOL_FIELDS.contains(&field) {
        "false".to_string()
    } else {
        String::new()
    }
}

/// Splits on `sep` where it is not escaped by a backslash.
fn split_unescaped(s: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    parts.push(&s[start..]);
    parts
}

/// Splits `field<op>value` at the first unescaped operator (`!=`, `==`, `=`).
fn split_term(term: &str) -> Option<(&str, FieldOperator, &str)> {
    let bytes = term.as_bytes();
    let mut escaped = false;
    for i in 0..bytes.len() {
        if escaped {
            escaped = false;
            continue;
        }
        match bytes[i] {
            b'\\' => escaped = true,
            b'!' if bytes.get(i + 1) == Some(&b'=') => {
                return Some((&term[..i], FieldOperator::NotEquals, &term[i + 2..]))
            }
            b'=' if bytes.get(i + 1) == Some(&b'=') => {
                return Some((&term[..i], FieldOperator::Equals, &term[i + 2..]))
            }
            b'=' => return Some((&term[..i], FieldOperator::Equals, &term[i + 1..])),
            _ => {}
        }
    }
    None
}

fn unescape(value: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(_) => {
                    return Err(SelectorError::FieldEscape {
                        value: value.to_string(),
                        reason: "invalid escape sequence",
                    })
                }
                None => {
                    return Err(SelectorError::FieldEscape {
                        value: value.to_string(),
                        reason: "unterminated escape sequence",
                    })
                }
            },
            ',' | '=' => {
                return Err(SelectorError::FieldEscape {
                    value: value.to_string(),
                    reason: "unescaped operator",
                })
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::find;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn label_selector_operators() {
        let l = labels(&[("app", "web"), ("tier", "front"), ("n", "5")]);
        assert!(sel("app=web").matches(&l));
        assert!(sel("app==web").matches(&l));
        assert!(!sel("app!=web").matches(&l));
        assert!(sel("missing!=x").matches(&l));
        assert!(sel("app in (web, db)").matches(&l));
        assert!(!sel("app notin (web)").matches(&l));
        assert!(sel("missing notin (x)").matches(&l));
        assert!(sel("app").matches(&l));
        assert!(!sel("!app").matches(&l));
        assert!(sel("!missing").matches(&l));
        assert!(sel("app=web,tier=front").matches(&l));
        assert!(!sel("app=web,tier=back").matches(&l));
        assert!(sel("n>3,n<6").matches(&l));
        assert!(!sel("n>5").matches(&l));
        assert!(sel("").is_empty());
        assert!(sel("").matches(&l));
        assert!(sel(" app = web ").matches(&l));
        assert!(sel("x in (in, notin)").matches(&labels(&[("x", "in")])));
        assert!(sel("app=").matches(&labels(&[("app", "")])));
        assert!(
            sel("app in ()").matches(&labels(&[("app", "")])),
            "() is the empty value, as in apimachinery"
        );
        assert!(sel("example.com/role=a").matches(&labels(&[("example.com/role", "a")])));
    }

    #[test]
    fn label_selector_errors_name_the_bad_part() {
        let cases = [
            ("app=web,", "found '', expected: identifier after ','"),
            ("app in web", "found 'web' expected: '('"),
            ("app in (a b)", "found 'b', expected: ',' or ')'"),
            ("app in (a", "found '', expected: ',' or ')'"),
            (
                "=x",
                "found '=', expected: !, identifier, or 'end of string'",
            ),
            ("app=a=b", "found '=', expected: ',' or 'end of string'"),
            (
                "bad key!=x",
                "found 'key', expected: in, notin, =, ==, !=, gt, lt",
            ),
            ("app=a b", "found 'b', expected: ',' or 'end of string'"),
            ("-bad=x", "Invalid value: \"-bad\""),
            ("app=-bad-", "values[0][app]: Invalid value: \"-bad-\""),
            ("n>x", "the value must be an integer"),
        ];
        for (input, want) in cases {
            let err = LabelSelector::parse(input).expect_err(input).to_string();
            assert!(err.contains(want), "{input}: {err}");
        }
    }

    #[test]
    fn label_selector_exact_and_display() {
        let s = sel("tier in (front),app=web,!x");
        assert_eq!(s.exact("app"), Some("web"));
        assert_eq!(s.exact("tier"), Some("front"));
        assert_eq!(s.exact("x"), None);
        assert_eq!(s.to_string(), "app=web,tier in (front),!x");
    }

    #[test]
    fn label_selector_object() {
        let s = LabelSelector::from_label_selector_json(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "edge"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "env", "operator": "NotIn", "values": ["dev"]},
                {"key": "zone", "operator": "Exists"}
            ]
        }))
        .expect("valid");
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "edge"), ("zone", "a")])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "edge"),
            ("zone", "a"),
            ("canary", "1")
        ])));
        assert!(!s.matches(&labels(&[
            ("app", "web"),
            ("tier", "edge"),
            ("zone", "a"),
            ("env", "dev")
        ])));
        assert!(s.matches_object(
            &json!({"metadata": {"labels": {"app": "web", "tier": "front", "zone": "z"}}})
        ));

        let everything = LabelSelector::from_label_selector_json(&json!({})).expect("empty");
        assert!(everything.is_empty() && everything.matches(&labels(&[])));
        let nothing = LabelSelector::from_label_selector_json(&Value::Null).expect("null");
        assert!(!nothing.is_empty() && !nothing.matches(&labels(&[])));

        let bad_op = LabelSelector::from_label_selector_json(
            &json!({"matchExpressions": [{"key": "a", "operator": "Equals"}]}),
        );
        assert_eq!(
            bad_op.unwrap_err().to_string(),
            "\"Equals\" is not a valid label selector operator"
        );
        let no_values = LabelSelector::from_label_selector_json(
            &json!({"matchExpressions": [{"key": "a", "operator": "In"}]}),
        );
        assert!(no_values
            .unwrap_err()
            .to_string()
            .contains("values set can't be empty"));
    }

    #[test]
    fn field_selector_parse_match_exact() {
        let s = FieldSelector::parse("metadata.name=web,spec.nodeName!=n1").expect("parse");
        let pod = json!({"metadata": {"name": "web"}, "spec": {"nodeName": "n2"}, "status": {"phase": "Running"}});
        assert!(s.matches(&pod));
        assert_eq!(s.exact("metadata.name"), Some("web"));
        assert_eq!(s.exact("spec.nodeName"), None);
        assert!(FieldSelector::parse("spec.nodeName=")
            .expect("empty value")
            .matches(&json!({"spec": {}})));
        assert!(!FieldSelector::parse("spec.nodeName=")
            .expect("empty value")
            .matches(&pod));
        assert!(FieldSelector::parse("status.phase==Running")
            .expect("==")
            .matches(&pod));
        assert!(FieldSelector::parse("").expect("empty").is_empty());
        let escaped = FieldSelector::parse(r"metadata.name=a\,b").expect("escaped");
        assert_eq!(escaped.exact("metadata.name"), Some("a,b"));
        assert_eq!(
            FieldSelector::parse("metadata.name")
                .unwrap_err()
                .to_string(),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
        );
        assert!(FieldSelector::parse(r"metadata.name=a\x").is_err());
        let node = json!({"metadata": {"name": "n"}, "spec": {}});
        assert!(FieldSelector::parse("spec.unschedulable=false")
            .expect("bool")
            .matches(&node));
        assert!(FieldSelector::parse("spec.unschedulable=true")
            .expect("bool")
            .matches(&json!({"spec": {"unschedulable": true}})));
    }

    #[test]
    fn field_selector_support_per_resource() {
        let pods = find("", "v1", "pods").expect("pods");
        let nodes = find("", "v1", "nodes").expect("nodes");
        let events = find("", "v1", "events").expect("events");
        let new_events = find("events.k8s.io", "v1", "events").expect("events.k8s.io");
        let secrets = find("", "v1", "secrets").expect("secrets");
        let configmaps = find("", "v1", "configmaps").expect("configmaps");
        let ok = |s: &str, r| FieldSelector::parse(s).expect("parse").validate_for(r);
        assert!(ok(
            "spec.nodeName=n1,status.phase!=Failed,metadata.namespace=a",
            pods
        )
        .is_ok());
        assert!(ok("spec.unschedulable=false", nodes).is_ok());
        assert!(ok("involvedObject.name=web,reason=Started,type=Normal", events).is_ok());
        assert!(ok("regarding.name=web,involvedObject.kind=Pod", new_events).is_ok());
        assert!(ok("type=Opaque", secrets).is_ok());
        assert_eq!(
            ok("spec.nodeName=n1", configmaps).unwrap_err().to_string(),
            "field label not supported: spec.nodeName"
        );
        assert_eq!(
            ok("spec.foo=x", pods).unwrap_err().to_string(),
            "field label not supported: spec.foo"
        );
    }

    #[test]
    fn event_fields_read_both_schemas() {
        let core = json!({"involvedObject": {"name": "web", "kind": "Pod"}, "source": {"component": "kubelet"}});
        let new = json!({"regarding": {"name": "web", "kind": "Pod"}, "deprecatedSource": {"component": "kubelet"}, "reportingController": "kubelet"});
        for event in [&core, &new] {
            assert!(FieldSelector::parse(
                "involvedObject.name=web,regarding.kind=Pod,source=kubelet"
            )
            .expect("p")
            .matches(event));
        }
        assert!(FieldSelector::parse("reportingComponent=kubelet")
            .expect("p")
            .matches(&new));
    }
}
