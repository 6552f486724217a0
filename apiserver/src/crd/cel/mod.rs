//! `x-kubernetes-validations`: CEL rules on a CustomResourceDefinition's schema, evaluated as
//! kube-apiserver evaluates them.
//!
//! Each served version's schema is compiled once into a [`Rules`] tree that mirrors the schema
//! where it has rules. A write walks the object (and, on update, the old object beside it)
//! down that tree: at every node with rules, `self` is the value there and `oldSelf` the old
//! value at the same place when one correlates (properties, map values, and the items of
//! `x-kubernetes-list-type: map` lists by their keys). A rule that uses `oldSelf` (a
//! transition rule) runs only where there is an old value, unless it sets `optionalOldSelf`,
//! when `oldSelf` is an optional. A rule that is false yields a field error at the node's path
//! (or at its `fieldPath`) with its `reason`, from its `messageExpression`, its `message` or
//! `failed rule: <rule>`.
//!
//! The rules run on the [`cel`] crate (cel-rust), which has no type checker and no cost
//! accounting: [`check`] does the checks kube-apiserver's compiler does when the CRD is
//! written (syntax, references to variables and schema fields, the result type, the estimated
//! cost of a rule against the schema's size limits), so no rule that could take unbounded time
//! is ever admitted, and [`Rules::validate`] stops evaluating an object's rules once they have
//! taken [`RUNTIME_BUDGET`].
//!
//! - [`library`]: the environment and the conversion of JSON into CEL values;
//! - [`quantity`], [`url`], [`net`]: Kubernetes' quantity, URL, IP and CIDR libraries;
//! - [`signatures`]: the argument types of the functions the check verifies;
//! - [`check`]: what a CRD's rules must pass to be accepted.

pub mod check;
pub mod library;
pub mod net;
pub mod quantity;
pub mod signatures;
pub mod url;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use cel::common::types::CelOptional;
use cel::common::value::Val;
use cel::{ExecutionError, Program, Value as CelValue};
use serde_json::Value;

use super::schema::{AdditionalProperties, Schema, ValidationRule};
use crate::validation::Cause;

/// How long one object's rules may run in all: kube-apiserver's runtime cost budget is
/// sized to about a second.
pub const RUNTIME_BUDGET: Duration = Duration::from_secs(1);

/// Longest message a `messageExpression` may produce (Kubernetes' limit).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// One compiled `x-kubernetes-validations` entry.
#[derive(Debug)]
struct CompiledRule {
    rule: ValidationRule,
    /// The program, or why it does not compile (refused when the CRD was written, so only a
    /// CRD stored before that check can have one).
    program: Result<Program, String>,
    message: Option<Program>,
    uses_old_self: bool,
}

/// The compiled rules of a schema, shaped as the schema where it has rules.
#[derive(Debug, Default)]
pub struct Rules {
    rules: Vec<CompiledRule>,
    properties: BTreeMap<String, Rules>,
    items: Option<Box<Rules>>,
    additional: Option<Box<Rules>>,
    all_of: Vec<Rules>,
}

/// The result of compiling a rule's text.
pub fn compile(source: &str) -> Result<Program, String> {
    library::env()
        .compile(source)
        .map_err(|errors| check::describe_parse_errors(source, &errors))
}

impl Rules {
    /// The rules of `schema` (a version's `openAPIV3Schema`), or `None` when it has none.
    pub fn compile(schema: &Schema) -> Option<Rules> {
        let rules: Vec<CompiledRule> = schema
            .validations
            .iter()
            .map(|rule| {
                let program = compile(&rule.rule);
                let uses_old_self = program
                    .as_ref()
                    .is_ok_and(|p| p.references().has_variable("oldSelf"));
                CompiledRule {
                    rule: rule.clone(),
                    program,
                    message: rule
                        .message_expression
                        .as_deref()
                        .filter(|m| !m.trim().is_empty())
                        .and_then(|m| compile(m).ok()),
                    uses_old_self,
                }
            })
            .collect();
        let properties: BTreeMap<String, Rules> = schema
            .properties
            .iter()
            .filter_map(|(name, child)| Rules::compile(child).map(|r| (name.clone(), r)))
            .collect();
        let items = schema
            .items
            .as_deref()
            .and_then(Rules::compile)
            .map(Box::new);
        let additional = match &schema.additional_properties {
            Some(AdditionalProperties::Schema(s)) => Rules::compile(s).map(Box::new),
            _ => None,
        };
        let all_of: Vec<Rules> = schema.all_of.iter().filter_map(Rules::compile).collect();
        let empty = rules.is_empty()
            && properties.is_empty()
            && items.is_none()
            && additional.is_none()
            && all_of.is_empty();
        (!empty).then_some(Rules {
            rules,
            properties,
            items,
            additional,
            all_of,
        })
    }

    /// Evaluates every rule against a whole object (`old`: the object before an update) and
    /// returns the field errors of the rules that fail.
    pub fn validate(&self, schema: &Schema, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut walk = Walk {
            deadline: Instant::now() + RUNTIME_BUDGET,
            out: Vec::new(),
            stopped: false,
        };
        walk.node(self, schema, None, object, old, true);
        walk.out
    }
}

/// One validation's state: the errors so far and the time left.
struct Walk {
    deadline: Instant,
    out: Vec<Cause>,
    /// Set once the budget ran out or a rule asked to stop: nothing more is evaluated.
    stopped: bool,
}

/// `path` with `child` appended as Kubernetes' field paths write it.
fn child_path(path: Option<&str>, child: &str) -> String {
    match path {
        None => child.to_string(),
        Some(p) => format!("{p}.{child}"),
    }
}

/// The path Kubernetes prints for a node: the root has none and prints `<nil>`.
fn shown(path: Option<&str>) -> String {
    path.unwrap_or("<nil>").to_string()
}

impl Walk {
    fn node(
        &mut self,
        rules: &Rules,
        schema: &Schema,
        path: Option<&str>,
        value: &Value,
        old: Option<&Value>,
        resource: bool,
    ) {
        if self.stopped || value.is_null() {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        if !rules.rules.is_empty() {
            self.rules(&rules.rules, schema, path, value, old, resource);
        }
        for all_of in &rules.all_of {
            self.node(all_of, schema, path, value, old, resource);
        }
        match value {
            Value::Object(fields) => {
                for (key, child) in fields {
                    if self.stopped {
                        return;
                    }
                    let old_child = old.and_then(|o| o.get(key));
                    if let (Some(child_rules), Some(child_schema)) =
                        (rules.properties.get(key), schema.properties.get(key))
                    {
                        let child_path = child_path(path, key);
                        self.node(
                            child_rules,
                            child_schema,
                            Some(&child_path),
                            child,
                            old_child,
                            child_schema.embedded_resource,
                        );
                    } else if let (Some(child_rules), Some(AdditionalProperties::Schema(s))) =
                        (&rules.additional, &schema.additional_properties)
                    {
                        let child_path = format!("{}[{key}]", path.unwrap_or(""));
                        self.node(
                            child_rules,
                            s,
                            Some(&child_path),
                            child,
                            old_child,
                            s.embedded_resource,
                        );
                    }
                }
            }
            Value::Array(items) => {
                let (Some(item_rules), Some(item_schema)) = (&rules.items, &schema.items) else {
                    return;
                };
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    if self.stopped {
                        return;
                    }
                    let old_item = old_items.and_then(|olds| correlate(schema, item, olds));
                    let item_path = format!("{}[{i}]", path.unwrap_or(""));
                    self.node(
                        item_rules,
                        item_schema,
                        Some(&item_path),
                        item,
                        old_item,
                        item_schema.embedded_resource,
                    );
                }
            }
            _ => {}
        }
    }

    fn rules(
        &mut self,
        rules: &[CompiledRule],
        schema: &Schema,
        path: Option<&str>,
        value: &Value,
        old: Option<&Value>,
        resource: bool,
    ) {
        let ty = type_name(schema);
        let this = library::to_cel(value, Some(schema), resource);
        let previous = old.map(|o| library::to_cel(o, Some(schema), resource));
        for compiled in rules {
            if self.stopped {
                return;
            }
            let rule = &compiled.rule;
            let optional_old_self = rule.optional_old_self == Some(true);
            if compiled.uses_old_self && previous.is_none() && !optional_old_self {
                continue;
            }
            let program = match &compiled.program {
                Ok(p) => p,
                Err(error) => {
                    self.out.push(invalid(
                        &shown(path),
                        ty,
                        &format!("rule compile error: {error}"),
                    ));
                    continue;
                }
            };
            let outcome = evaluate(program, &this, previous.as_ref(), optional_old_self);
            if Instant::now() > self.deadline {
                self.out.push(invalid(
                    &shown(path),
                    ty,
                    "validation failed due to running out of cost budget, no further validation rules will be run",
                ));
                self.stopped = true;
                return;
            }
            match outcome {
                Ok(CelValue::Bool(true)) => {}
                Ok(CelValue::Bool(false)) => {
                    let field = match rule.field_path.as_deref().filter(|f| !f.is_empty()) {
                        Some(field_path) => {
                            child_path(path, &check::normalize_field_path(field_path))
                        }
                        None => shown(path),
                    };
                    let detail = compiled
                        .message
                        .as_ref()
                        .and_then(|m| message(m, &this, previous.as_ref(), optional_old_self).ok())
                        .unwrap_or_else(|| default_message(rule));
                    self.out
                        .push(for_reason(rule.reason.as_deref(), &field, ty, &detail));
                }
                Ok(_) => self.out.push(invalid(
                    &shown(path),
                    ty,
                    &format!(
                        "cel expression must evaluate to a bool evaluating rule: {}",
                        rule_text(rule)
                    ),
                )),
                Err(error) => {
                    self.out
                        .push(invalid(&shown(path), ty, &runtime_error(&error, rule)))
                }
            }
        }
    }
}

/// The old item a new item of a list corresponds to: by the map keys of an
/// `x-kubernetes-list-type: map` list; items of other lists have none.
fn correlate<'a>(schema: &Schema, item: &Value, olds: &'a [Value]) -> Option<&'a Value> {
    if schema.list_type.as_deref() != Some("map") || schema.list_map_keys.is_empty() {
        return None;
    }
    let key = |v: &Value| -> Vec<Value> {
        schema
            .list_map_keys
            .iter()
            .map(|k| v.get(k).cloned().unwrap_or(Value::Null))
            .collect()
    };
    let wanted = key(item);
    olds.iter().find(|o| key(o) == wanted)
}

/// The schema type kube-apiserver shows as a failing rule's value (`"object"`, `"string"`;
/// `""` for an int-or-string or an untyped field).
fn type_name(schema: &Schema) -> &str {
    schema.ty.as_deref().unwrap_or("")
}

fn boxed(value: &CelValue) -> Result<Box<dyn Val>, ExecutionError> {
    Box::<dyn Val>::try_from(value.clone())
}

fn evaluate(
    program: &Program,
    this: &CelValue,
    old: Option<&CelValue>,
    optional_old_self: bool,
) -> Result<CelValue, ExecutionError> {
    let mut context = library::context();
    context.add_variable_as_val("self", boxed(this)?);
    match (old, optional_old_self) {
        (Some(old), false) => context.add_variable_as_val("oldSelf", boxed(old)?),
        (Some(old), true) => {
            context.add_variable_as_val("oldSelf", Box::new(CelOptional::of(boxed(old)?)))
        }
        (None, true) => context.add_variable_as_val("oldSelf", Box::new(CelOptional::none())),
        (None, false) => {}
    }
    program.execute(&context)
}

/// A `messageExpression`'s message: a non-empty single line of at most 5 KiB, else the rule's
/// own message is used.
fn message(
    program: &Program,
    this: &CelValue,
    old: Option<&CelValue>,
    optional_old_self: bool,
) -> Result<String, ()> {
    match evaluate(program, this, old, optional_old_self) {
        Ok(CelValue::String(s)) => {
            let trimmed = s.trim();
            if trimmed.is_empty() || trimmed.len() > MAX_MESSAGE_BYTES || trimmed.contains('\n') {
                Err(())
            } else {
                Ok(trimmed.to_string())
            }
        }
        _ => Err(()),
    }
}

fn rule_text(rule: &ValidationRule) -> String {
    match rule.message.as_deref().map(str::trim) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => rule.rule.trim().to_string(),
    }
}

fn default_message(rule: &ValidationRule) -> String {
    match rule.message.as_deref().map(str::trim) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => format!("failed rule: {}", rule.rule.trim()),
    }
}

/// A runtime error in kube-apiserver's words (cel-go's error texts).
fn runtime_error(error: &ExecutionError, rule: &ValidationRule) -> String {
    let rule = rule_text(rule);
    let text = match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::NoSuchOverload(_)
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnexpectedType { .. } => {
            return format!(
                "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {rule}"
            )
        }
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::IndexOutOfBounds(index) => {
            format!("index out of bounds: {}", cel_scalar(index))
        }
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    format!("{text} evaluating rule: {rule}")
}

fn cel_scalar(value: &CelValue) -> String {
    match value {
        CelValue::Int(i) => i.to_string(),
        CelValue::UInt(u) => u.to_string(),
        CelValue::String(s) => s.to_string(),
        other => format!("{other:?}"),
    }
}

fn invalid(field: &str, ty: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {ty:?}: {detail}"),
        field: field.to_string(),
    }
}

/// The field error a failing rule's `reason` asks for (`FieldValueInvalid` by default).
fn for_reason(reason: Option<&str>, field: &str, ty: &str, detail: &str) -> Cause {
    let (reason, message) = match reason {
        Some("FieldValueForbidden") => ("FieldValueForbidden", format!("Forbidden: {detail}")),
        Some("FieldValueRequired") => ("FieldValueRequired", format!("Required value: {detail}")),
        Some("FieldValueDuplicate") => ("FieldValueDuplicate", format!("Duplicate value: {ty:?}")),
        _ => (
            "FieldValueInvalid",
            format!("Invalid value: {ty:?}: {detail}"),
        ),
    };
    Cause {
        reason: reason.into(),
        message,
        field: field.to_string(),
    }
}

/// Schema errors that make the rules meaningless (a wrong type, a value not allowed): with
/// one of these, kube-apiserver runs no rule and says so.
pub fn blocks_rules(causes: &[Cause]) -> Option<Cause> {
    causes
        .iter()
        .any(|c| matches!(c.reason.as_str(), "FieldValueTypeInvalid" | "FieldValueNotSupported"))
        .then(|| Cause {
            reason: "FieldValueInvalid".into(),
            message: "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
            field: "<nil>".into(),
        })
}

#[cfg(test)]
mod tests;
