//! The checks a CRD's `x-kubernetes-validations` must pass when the CRD is written, with
//! kube-apiserver's paths and messages: a rule (and a `messageExpression`) must parse, refer
//! only to `self`, `oldSelf`, the variables of its macros, fields its schema declares and
//! functions that exist, and a rule must be a boolean; `oldSelf` only where an old value
//! correlates; a supported `reason`; a `fieldPath` into the schema; and an estimated cost
//! within the limit.
//!
//! The cost is estimated as kube-apiserver estimates it, in the same spirit if not the same
//! units: one per variable, field selection and call, and for every comprehension (`all`,
//! `exists`, `map`, ...) the cost of its body times the most elements its range can have —
//! `maxItems`/`maxProperties` where the schema declares them, else as many as fit in a
//! 3 MiB request — and a rule's cost times the number of times it can run (the elements of
//! the lists and maps above it). A rule over nested unbounded lists is refused, so every
//! rule that is admitted runs in bounded time.

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::{ParseErrors, Program};

use super::super::schema::{AdditionalProperties, Schema, ValidationRule};
use super::library;
use super::signatures::{self, Kind, Resolution};
use crate::validation::Cause;

/// Kubernetes' limit on one rule's estimated cost (times its cardinality).
pub const STATIC_COST_LIMIT: f64 = 10_000_000.0;
/// Kubernetes' limit on the estimated cost of all of a schema's rules.
pub const STATIC_TOTAL_COST_LIMIT: f64 = 100_000_000.0;
/// The request size bound that limits a list or map with no declared maximum.
const MAX_REQUEST_BYTES: f64 = 3.0 * 1024.0 * 1024.0;

const REASONS: &[&str] = &[
    "FieldValueDuplicate",
    "FieldValueForbidden",
    "FieldValueInvalid",
    "FieldValueRequired",
];

/// Global functions and namespaces a rule may call or name besides the variables.
const GLOBALS: &[&str] = &[
    "size",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "matches",
    "contains",
    "startsWith",
    "endsWith",
    "has",
    "null_type",
    "list",
    "map",
    "optional",
    "strings",
    "lists",
    "math",
    "base64",
];

/// Checks every rule of `schema` (a version's `openAPIV3Schema`, at `path`).
pub fn check_schema(schema: &Schema, path: &str) -> Vec<Cause> {
    let mut checker = Checker {
        out: Vec::new(),
        total: 0.0,
    };
    checker.node(schema, path, true, 1.0, None);
    if checker.total > STATIC_TOTAL_COST_LIMIT {
        checker.out.push(forbidden(
            path,
            &cost_message(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                checker.total,
                STATIC_TOTAL_COST_LIMIT,
            ),
        ));
    }
    checker.out
}

struct Checker {
    out: Vec<Cause>,
    total: f64,
}

impl Checker {
    /// `cardinality`: how many times a rule here can run; `uncorrelatable`: the path of the
    /// nearest list above whose items have no old value.
    fn node(
        &mut self,
        schema: &Schema,
        path: &str,
        resource: bool,
        cardinality: f64,
        uncorrelatable: Option<&str>,
    ) {
        // The node's own rules, then those of its allOf entries (which see the same value).
        let all_of = schema.all_of.iter().enumerate().flat_map(|(i, entry)| {
            let at = format!("{path}.allOf[{i}]");
            entry
                .validations
                .iter()
                .enumerate()
                .map(move |(r, rule)| (at.clone(), r, rule))
        });
        let own = schema
            .validations
            .iter()
            .enumerate()
            .map(|(r, rule)| (path.to_string(), r, rule));
        for (at, r, rule) in own.chain(all_of) {
            let rule_path = format!("{at}.x-kubernetes-validations[{r}]");
            self.rule(
                rule,
                &rule_path,
                schema,
                resource,
                cardinality,
                uncorrelatable,
            );
        }
        for (name, child) in &schema.properties {
            if resource && name == "metadata" {
                continue;
            }
            self.node(
                child,
                &format!("{path}.properties[{name}]"),
                child.embedded_resource,
                cardinality,
                uncorrelatable,
            );
        }
        if let Some(AdditionalProperties::Schema(child)) = &schema.additional_properties {
            self.node(
                child,
                &format!("{path}.additionalProperties"),
                child.embedded_resource,
                cardinality * max_elements(schema.max_properties, child),
                uncorrelatable,
            );
        }
        if let Some(items) = &schema.items {
            let within = if schema.list_type.as_deref() == Some("map") {
                uncorrelatable
            } else {
                uncorrelatable.or(Some(path))
            };
            self.node(
                items,
                &format!("{path}.items"),
                items.embedded_resource,
                cardinality * max_elements(schema.max_items, items),
                within,
            );
        }
    }

    fn rule(
        &mut self,
        rule: &ValidationRule,
        path: &str,
        schema: &Schema,
        resource: bool,
        cardinality: f64,
        uncorrelatable: Option<&str>,
    ) {
        let rule_field = format!("{path}.rule");
        let text = rule.rule.trim();
        let message = rule.message.as_deref().unwrap_or("");
        if text.is_empty() {
            self.out
                .push(required(&rule_field, "rule is not specified"));
        } else if !message.is_empty() && message.trim().is_empty() {
            self.out.push(invalid_text(
                &format!("{path}.message"),
                message,
                "message must be non-empty if specified",
            ));
        } else if message.trim().contains(['\n', '\r']) {
            self.out.push(invalid_text(
                &format!("{path}.message"),
                message,
                "message must not contain line breaks",
            ));
        } else if text.contains(['\n', '\r']) && message.trim().is_empty() {
            self.out.push(required(
                &format!("{path}.message"),
                "message must be specified if rule contains line breaks",
            ));
        }
        if let Some(expression) = &rule.message_expression {
            if expression.trim().is_empty() {
                self.out.push(required(
                    &format!("{path}.messageExpression"),
                    "messageExpression must be non-empty if specified",
                ));
            }
        }
        if let Some(reason) = rule.reason.as_deref() {
            if !REASONS.contains(&reason) {
                let listed: Vec<String> = REASONS.iter().map(|r| format!("{r:?}")).collect();
                self.out.push(Cause {
                    reason: "FieldValueNotSupported".into(),
                    message: format!(
                        "Unsupported value: {reason:?}: supported values: {}",
                        listed.join(", ")
                    ),
                    field: format!("{path}.reason"),
                });
            }
        }
        if let Some(field_path) = rule.field_path.as_deref() {
            let problem = if !field_path.is_empty() && field_path.trim().is_empty() {
                Some("fieldPath must be non-empty if specified")
            } else if field_path.contains(['\n', '\r']) {
                Some("fieldPath must not contain line breaks")
            } else if !field_path.is_empty() && !field_path_valid(schema, field_path) {
                Some("fieldPath must be a valid path")
            } else {
                None
            };
            if let Some(problem) = problem {
                self.out.push(invalid_text(
                    &format!("{path}.fieldPath"),
                    field_path,
                    problem,
                ));
            }
        }
        if text.is_empty() {
            return;
        }
        let program = match super::compile(text) {
            Ok(program) => program,
            Err(detail) => {
                self.out.push(invalid_rule(&rule_field, rule, &detail));
                return;
            }
        };
        let optional_old_self = rule.optional_old_self == Some(true);
        let analysis = analyze(
            &program,
            text,
            schema,
            resource,
            optional_old_self,
            Expected::Bool,
        );
        if let Some(detail) = analysis.error {
            self.out.push(invalid_rule(&rule_field, rule, &detail));
        }
        let cost = analysis.cost * cardinality;
        if cost > STATIC_COST_LIMIT {
            self.out.push(forbidden(
                &rule_field,
                &cost_message("estimated rule cost", cost, STATIC_COST_LIMIT),
            ));
        }
        self.total += cost;
        let uses_old_self = program.references().has_variable("oldSelf");
        if uses_old_self {
            if let Some(within) = uncorrelatable {
                self.out.push(invalid_text(
                    &rule_field,
                    &rule.rule,
                    &format!(
                        "oldSelf cannot be used on the uncorrelatable portion of the schema within {within}"
                    ),
                ));
            }
        } else if let Some(optional) = rule.optional_old_self {
            self.out.push(Cause {
                reason: "FieldValueInvalid".into(),
                message: format!(
                    "Invalid value: {optional}: may not be set if oldSelf is not used in rule"
                ),
                field: format!("{path}.optionalOldSelf"),
            });
        }
        if let Some(expression) = rule.message_expression.as_deref().map(str::trim) {
            if !expression.is_empty() {
                let field = format!("{path}.messageExpression");
                let detail = match super::compile(expression) {
                    Err(detail) => Some(detail),
                    Ok(program) => {
                        analyze(
                            &program,
                            expression,
                            schema,
                            resource,
                            optional_old_self,
                            Expected::String,
                        )
                        .error
                    }
                };
                if let Some(detail) = detail {
                    let detail = detail
                        .replace("compilation failed", "messageExpression compilation failed")
                        .replace(
                            "cel expression must evaluate to a bool",
                            "must evaluate to a string",
                        );
                    self.out.push(invalid_rule(&field, rule, &detail));
                }
            }
        }
    }
}

/// How many elements a list or map with this maximum (or none) can have.
fn max_elements(declared: Option<u64>, element: &Schema) -> f64 {
    match declared {
        Some(n) => n as f64,
        None => {
            // The smallest an element can be written, with its separator.
            let smallest = match element.ty.as_deref() {
                Some("integer" | "number" | "boolean") => 2.0,
                _ => 3.0,
            };
            (MAX_REQUEST_BYTES / smallest).floor()
        }
    }
}

/// kube-apiserver's words for a cost over its limit.
fn cost_message(name: &str, cost: f64, limit: f64) -> String {
    let factor = cost / limit;
    let shown = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{name} exceeds budget by factor of {shown} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// A rule as Go's `%#v` prints it in kube-apiserver's field errors.
fn go_rule(rule: &ValidationRule) -> String {
    let pointer = |set: bool, ty: &str| {
        if set {
            format!("(*{ty})(0xc000a1b2c0)")
        } else {
            format!("(*{ty})(nil)")
        }
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{:?}, Message:{:?}, MessageExpression:{:?}, Reason:{}, FieldPath:{:?}, OptionalOldSelf:{}}}",
        rule.rule,
        rule.message.as_deref().unwrap_or(""),
        rule.message_expression.as_deref().unwrap_or(""),
        pointer(rule.reason.is_some(), "apiextensions.FieldValueErrorReason"),
        rule.field_path.as_deref().unwrap_or(""),
        pointer(rule.optional_old_self.is_some(), "bool"),
    )
}

fn invalid_rule(field: &str, rule: &ValidationRule, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {}: {detail}", go_rule(rule)),
        field: field.to_string(),
    }
}

fn invalid_text(field: &str, value: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {value:?}: {detail}"),
        field: field.to_string(),
    }
}

fn required(field: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired".into(),
        message: format!("Required value: {detail}"),
        field: field.to_string(),
    }
}

fn forbidden(field: &str, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueForbidden".into(),
        message: format!("Forbidden: {detail}"),
        field: field.to_string(),
    }
}

/// cel-go's rendering of compile errors: `ERROR: <input>:1:6: ...` with the line and a caret.
pub fn describe_parse_errors(source: &str, errors: &ParseErrors) -> String {
    let described: Vec<String> = errors
        .errors
        .iter()
        .map(|e| {
            located(
                source,
                e.pos.0.max(1) as usize,
                e.pos.1.max(1) as usize,
                &e.msg,
            )
        })
        .collect();
    format!("compilation failed: {}", described.join("\n"))
}

fn located(source: &str, line: usize, column: usize, message: &str) -> String {
    let text = source.lines().nth(line - 1).unwrap_or("");
    format!(
        "ERROR: <input>:{line}:{column}: {message}\n | {text}\n | {}^",
        ".".repeat(column - 1)
    )
}

/// `fieldPath` (`.spec.replicas`, `.labels['app']`) as the field path it names
/// (`spec.replicas`, `labels[app]`), appended to the rule's own path in errors.
pub fn normalize_field_path(field_path: &str) -> String {
    let mut out = String::new();
    for (i, step) in field_steps(field_path)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        match step {
            Step::Field(name) if i == 0 => out.push_str(name),
            Step::Field(name) => {
                out.push('.');
                out.push_str(name);
            }
            Step::Key(key) => out.push_str(&format!("[{key}]")),
        }
    }
    out
}

enum Step {
    Field(String),
    Key(String),
}

/// The steps of a `fieldPath`: `.name` and `['key']`; `None` when it is not one.
fn field_steps(path: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    let mut rest = path.trim();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            let name = &after[..end];
            if name.is_empty() {
                return None;
            }
            steps.push(Step::Field(name.to_string()));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix("['") {
            let end = after.find("']")?;
            steps.push(Step::Key(after[..end].to_string()));
            rest = &after[end + 2..];
        } else {
            return None;
        }
    }
    (!steps.is_empty()).then_some(steps)
}

/// Whether `path` leads from `schema` to a declared field.
fn field_path_valid(schema: &Schema, path: &str) -> bool {
    let Some(steps) = field_steps(path) else {
        return false;
    };
    let mut at = schema;
    for step in steps {
        let (Step::Field(name) | Step::Key(name)) = &step;
        at = if let Some(child) = at.properties.get(name) {
            child
        } else if let Some(AdditionalProperties::Schema(child)) = &at.additional_properties {
            child
        } else {
            return false;
        };
    }
    true
}

/// What a rule's value must be.
#[derive(Clone, Copy, PartialEq)]
enum Expected {
    Bool,
    String,
}

/// The static type of an expression, as far as the schema tells.
#[derive(Clone, Copy)]
enum Ty<'s> {
    Bool,
    Int,
    Double,
    Str,
    /// A timestamp, duration, bytes or a value of one of Kubernetes' library types.
    Typed(Kind),
    /// A value of this schema (`resource`: a resource root, with TypeMeta and ObjectMeta).
    Schema(&'s Schema, bool),
    /// The root's metadata: only name and generateName are visible.
    Metadata,
    List,
    /// A list whose elements are all of this type (a literal, or what a macro builds).
    ListOf(Kind),
    Map,
    Unknown,
}

struct Analysis {
    cost: f64,
    error: Option<String>,
}

struct Analyzer<'s, 'p> {
    source: &'p str,
    program: &'p Program,
    scope: Vec<(String, Ty<'s>, f64)>,
    error: Option<String>,
}

fn analyze(
    program: &Program,
    source: &str,
    schema: &Schema,
    resource: bool,
    optional_old_self: bool,
    expected: Expected,
) -> Analysis {
    // With `optionalOldSelf`, `oldSelf` is an optional, which the analysis does not follow.
    let old_self = if optional_old_self {
        Ty::Unknown
    } else {
        schema_ty(schema, resource)
    };
    let mut analyzer = Analyzer {
        source,
        program,
        scope: vec![
            (
                "self".into(),
                schema_ty(schema, resource),
                elements_of(schema_ty(schema, resource)),
            ),
            ("oldSelf".into(), old_self, elements_of(old_self)),
        ],
        error: None,
    };
    let (ty, cost, _) = analyzer.expr(program.expression());
    if analyzer.error.is_none() {
        let wrong = match (expected, ty) {
            (
                Expected::Bool,
                Ty::Int | Ty::Double | Ty::Str | Ty::List | Ty::ListOf(_) | Ty::Map | Ty::Typed(_),
            ) => true,
            (Expected::Bool, Ty::Schema(s, _)) => {
                matches!(s.ty.as_deref(), Some(t) if t != "boolean")
            }
            (
                Expected::String,
                Ty::Bool | Ty::Int | Ty::Double | Ty::List | Ty::ListOf(_) | Ty::Map | Ty::Typed(_),
            ) => true,
            (Expected::String, Ty::Schema(s, _)) => {
                matches!(s.ty.as_deref(), Some(t) if t != "string")
            }
            _ => false,
        };
        if wrong {
            analyzer.error = Some("cel expression must evaluate to a bool".into());
        }
    }
    Analysis {
        cost,
        error: analyzer.error,
    }
}

fn schema_ty(schema: &Schema, resource: bool) -> Ty<'_> {
    match schema.ty.as_deref() {
        Some("boolean") => Ty::Bool,
        Some("integer") => Ty::Int,
        Some("number") => Ty::Double,
        // Kubernetes gives these formats their own CEL types.
        Some("string") => match schema.format.as_deref() {
            Some("byte") => Ty::Typed(Kind::Bytes),
            Some("duration") => Ty::Typed(Kind::Duration),
            Some("date" | "date-time") => Ty::Typed(Kind::Timestamp),
            _ => Ty::Str,
        },
        Some(_) => Ty::Schema(schema, resource),
        None => Ty::Unknown,
    }
}

impl<'s> Analyzer<'s, '_> {
    fn fail(&mut self, expr: &IdedExpr, message: String) {
        if self.error.is_some() {
            return;
        }
        let (line, column) = self
            .program
            .source_info()
            .offset_for(expr.id)
            .map(|(start, _)| position(self.source, start as usize))
            .unwrap_or((1, 1));
        self.error = Some(format!(
            "compilation failed: {}",
            located(self.source, line, column, &message)
        ));
    }

    /// The type, estimated cost and most elements (for a list or map) of `expr`.
    fn expr(&mut self, expr: &IdedExpr) -> (Ty<'s>, f64, f64) {
        match &expr.expr {
            Expr::Literal(literal) => {
                let ty = match literal {
                    LiteralValue::Boolean(_) => Ty::Bool,
                    LiteralValue::Int(_) => Ty::Int,
                    LiteralValue::UInt(_) => Ty::Typed(Kind::Uint),
                    LiteralValue::Double(_) => Ty::Double,
                    LiteralValue::String(_) => Ty::Str,
                    LiteralValue::Bytes(_) => Ty::Typed(Kind::Bytes),
                    LiteralValue::Null => Ty::Unknown,
                };
                (ty, 0.0, 1.0)
            }
            Expr::Ident(name) => {
                if let Some((_, ty, elements)) =
                    self.scope.iter().rev().find(|(n, _, _)| n == name).cloned()
                {
                    return (ty, 1.0, elements);
                }
                if !GLOBALS.contains(&name.as_str()) {
                    self.fail(
                        expr,
                        format!("undeclared reference to '{name}' (in container '')"),
                    );
                }
                (Ty::Unknown, 1.0, 1.0)
            }
            Expr::Select(select) => {
                let (operand, cost, _) = self.expr(&select.operand);
                let field = select.field.as_str();
                let ty = match operand {
                    Ty::Schema(schema, _) if schema.items.is_some() => {
                        self.fail(
                            expr,
                            format!(
                                "type '{}' does not support field selection",
                                type_name(operand)
                            ),
                        );
                        Ty::Unknown
                    }
                    Ty::Schema(schema, resource) => self.field(expr, schema, resource, field),
                    Ty::Metadata => {
                        if !matches!(field, "name" | "generateName") {
                            self.fail(expr, format!("undefined field '{field}'"));
                        }
                        Ty::Str
                    }
                    other => {
                        // Only messages and maps have fields.
                        if kind_of(other).is_some_and(|k| k != Kind::Map) {
                            self.fail(
                                expr,
                                format!(
                                    "type '{}' does not support field selection",
                                    type_name(other)
                                ),
                            );
                        }
                        Ty::Unknown
                    }
                };
                let ty = if select.test { Ty::Bool } else { ty };
                (ty, cost + 1.0, elements_of(ty))
            }
            Expr::Call(call) => {
                let mut cost = 1.0;
                let mut target_ty = None;
                // A call through a namespace (`ip.isCanonical(s)`) is a global function's.
                let qualified = call.target.as_ref().and_then(|target| match &target.expr {
                    Expr::Ident(namespace)
                        if !self.scope.iter().any(|(n, _, _)| n == namespace) =>
                    {
                        let name = format!("{namespace}.{}", call.func_name);
                        library::KUBERNETES_FUNCTIONS
                            .contains(&name.as_str())
                            .then_some(name)
                    }
                    _ => None,
                });
                let name = qualified.as_deref().unwrap_or(call.func_name.as_str());
                if qualified.is_some() {
                    cost += 1.0;
                } else if let Some(target) = &call.target {
                    let (ty, target_cost, _) = self.expr(target);
                    cost += target_cost;
                    target_ty = Some(ty);
                } else if !call.func_name.starts_with('_')
                    && !call.func_name.starts_with('@')
                    && !call.func_name.starts_with('!')
                    && !GLOBALS.contains(&call.func_name.as_str())
                    && !library::KUBERNETES_FUNCTIONS.contains(&call.func_name.as_str())
                    && !call.func_name.contains('.')
                {
                    self.fail(
                        expr,
                        format!(
                            "undeclared reference to '{}' (in container '')",
                            call.func_name
                        ),
                    );
                }
                let mut operands = Vec::new();
                for arg in &call.args {
                    let (ty, arg_cost, _) = self.expr(arg);
                    cost += arg_cost;
                    operands.push(ty);
                }
                let first = operands.first().copied().unwrap_or(Ty::Unknown);
                let mut operator_ty = None;
                if let [left, right] = operands[..] {
                    operator_ty = self.check_operands(expr, name, left, right);
                }
                let builtin_ty = self.check_builtin(expr, name, &call.args, &operands);
                let kinds: Vec<Option<Kind>> = operands.iter().map(|t| kind_of(*t)).collect();
                let declared = match signatures::resolve(name, target_ty.map(kind_of), &kinds) {
                    Resolution::Undeclared => None,
                    Resolution::Result(kind) => Some(kind.map_or(Ty::Unknown, ty_of)),
                    Resolution::NoMatch(_) => {
                        let args: Vec<String> = operands.iter().map(|t| type_name(*t)).collect();
                        let target = target_ty.map(type_name);
                        self.fail(
                            expr,
                            signatures::no_matching_overload(name, target.as_deref(), &args),
                        );
                        Some(Ty::Unknown)
                    }
                };
                let by_name = match name {
                    "_+_" | "_-_" | "_*_" | "_/_" | "_%_" | "-_" => match first {
                        Ty::Schema(s, r) => schema_ty(s, r),
                        other => other,
                    },
                    "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" | "_&&_" | "_||_" | "!_"
                    | "@in" | "matches" | "startsWith" | "endsWith" | "contains" | "isSorted" => {
                        Ty::Bool
                    }
                    "size" | "int" | "indexOf" | "lastIndexOf" => Ty::Int,
                    "string" | "lowerAscii" | "upperAscii" | "trim" | "replace" | "substring"
                    | "join" | "find" => Ty::Str,
                    "double" => Ty::Double,
                    _ => Ty::Unknown,
                };
                (
                    declared.or(builtin_ty).or(operator_ty).unwrap_or(by_name),
                    cost,
                    1.0,
                )
            }
            Expr::List(list) => {
                let mut cost = 1.0;
                let mut kinds = Vec::new();
                for element in &list.elements {
                    let (ty, element_cost, _) = self.expr(element);
                    cost += element_cost;
                    kinds.push(operand_kind(ty));
                }
                // A literal whose elements are all of one known type is a list of it.
                let ty = match kinds.first() {
                    Some(Some(k)) if kinds.iter().all(|e| *e == Some(*k)) => Ty::ListOf(*k),
                    _ => Ty::List,
                };
                (ty, cost, list.elements.len() as f64)
            }
            Expr::Map(map) => {
                let mut cost = 1.0;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        cost += self.expr(&entry.key).1 + self.expr(&entry.value).1;
                    }
                }
                (Ty::Map, cost, map.entries.len() as f64)
            }
            Expr::Comprehension(comprehension) => {
                let (range, range_cost, elements) = self.expr(&comprehension.iter_range);
                if kind_of(range).is_some_and(|k| !matches!(k, Kind::List | Kind::Map)) {
                    self.fail(
                        &comprehension.iter_range,
                        format!(
                            "expression of type '{}' cannot be range of a comprehension (must be list, map, or dynamic)",
                            type_name(range)
                        ),
                    );
                }
                let element = element_ty(range);
                let (accu, init_cost, _) = self.expr(&comprehension.accu_init);
                let scope = self.scope.len();
                self.scope
                    .push((comprehension.accu_var.clone(), accu, elements));
                match &comprehension.iter_var2 {
                    // Two-variable forms: the index or key, then the value.
                    Some(second) => {
                        self.scope
                            .push((comprehension.iter_var.clone(), Ty::Unknown, 1.0));
                        self.scope
                            .push((second.clone(), element, elements_of(element)));
                    }
                    None => self.scope.push((
                        comprehension.iter_var.clone(),
                        element,
                        elements_of(element),
                    )),
                }
                let step =
                    self.expr(&comprehension.loop_cond).1 + self.expr(&comprehension.loop_step).1;
                let (result, result_cost, _) = self.expr(&comprehension.result);
                self.scope.truncate(scope);
                let ty = match result {
                    Ty::Unknown => accu,
                    other => other,
                };
                (
                    ty,
                    range_cost + init_cost + elements * step + result_cost,
                    elements,
                )
            }
            Expr::Struct(_) | Expr::Unspecified => (Ty::Unknown, 1.0, 1.0),
        }
    }

    /// A binary operator's operands must be of types one of its overloads takes, as cel-go's
    /// checker has it (numbers of different kinds mix, as Kubernetes' CEL environment allows);
    /// the result's type where both are known.
    fn check_operands(
        &mut self,
        expr: &IdedExpr,
        operator: &str,
        left: Ty<'s>,
        right: Ty<'s>,
    ) -> Option<Ty<'s>> {
        const OPERATORS: &[&str] = &[
            "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "_+_", "_-_", "_*_", "_/_", "_%_",
        ];
        if !OPERATORS.contains(&operator) {
            return None;
        }
        let (Some(a), Some(b)) = (operand_kind(left), operand_kind(right)) else {
            return None;
        };
        match signatures::operator(operator, a, b) {
            Ok(kind) => Some(ty_of(kind)),
            Err(message) => {
                self.fail(expr, message);
                None
            }
        }
    }

    /// The standard operators cel-go types beyond their operands' overloads: `&&` and `||`
    /// take booleans, `!` a boolean, `-` a number, `?:` a boolean condition, `in` a list or
    /// map of the value's type, `[]` a list by int or a map by its key type. The result's
    /// type where it follows.
    fn check_builtin(
        &mut self,
        expr: &IdedExpr,
        name: &str,
        args: &[IdedExpr],
        operands: &[Ty<'s>],
    ) -> Option<Ty<'s>> {
        let names = |tys: &[Ty<'_>]| tys.iter().map(|t| type_name(*t)).collect::<Vec<_>>();
        match (name, operands) {
            ("_&&_" | "_||_", _) => {
                for (arg, ty) in args.iter().zip(operands) {
                    if kind_of(*ty).is_some_and(|k| k != Kind::Bool) {
                        self.fail(
                            arg,
                            format!("expected type 'bool' but found '{}'", type_name(*ty)),
                        );
                    }
                }
                Some(Ty::Bool)
            }
            ("!_", [operand]) => {
                if kind_of(*operand).is_some_and(|k| k != Kind::Bool) {
                    let message = signatures::no_matching_overload(name, None, &names(operands));
                    self.fail(expr, message);
                }
                Some(Ty::Bool)
            }
            ("-_", [operand]) => {
                if kind_of(*operand).is_some_and(|k| !matches!(k, Kind::Int | Kind::Double)) {
                    let message = signatures::no_matching_overload(name, None, &names(operands));
                    self.fail(expr, message);
                }
                None
            }
            ("_?_:_", [condition, then, otherwise]) => {
                if kind_of(*condition).is_some_and(|k| k != Kind::Bool) {
                    // A macro's accumulator (`[]`) takes its elements' type from the other arm.
                    let list = match (then, otherwise) {
                        (Ty::ListOf(k), Ty::List) | (Ty::List, Ty::ListOf(k)) => Some(*k),
                        _ => None,
                    };
                    let arms: Vec<String> = [*then, *otherwise]
                        .iter()
                        .map(|t| match (t, list) {
                            (Ty::List, Some(k)) => type_name(Ty::ListOf(k)),
                            _ => type_name(*t),
                        })
                        .collect();
                    let shown = [vec![type_name(*condition)], arms].concat();
                    let message = signatures::no_matching_overload(name, None, &shown);
                    self.fail(expr, message);
                }
                let same = kind_of(*then).is_some() && kind_of(*then) == kind_of(*otherwise);
                match (then, otherwise) {
                    (Ty::ListOf(k), Ty::List) | (Ty::List, Ty::ListOf(k)) => Some(Ty::ListOf(*k)),
                    _ if same => Some(*then),
                    _ => None,
                }
            }
            ("_+_", [left, right])
                if kind_of(*left) == Some(Kind::List) && kind_of(*right) == Some(Kind::List) =>
            {
                match (element_kind(*left), element_kind(*right)) {
                    (Some(a), Some(b)) if a == b => Some(Ty::ListOf(a)),
                    (Some(a), None) if matches!(right, Ty::List) => Some(Ty::ListOf(a)),
                    (None, Some(b)) if matches!(left, Ty::List) => Some(Ty::ListOf(b)),
                    _ => Some(Ty::List),
                }
            }
            ("@in", [value, container]) => {
                let fits = match kind_of(*container) {
                    None => true,
                    Some(Kind::List) => compatible(operand_kind(*value), element_kind(*container)),
                    Some(Kind::Map) => compatible(operand_kind(*value), key_kind(*container)),
                    Some(_) => false,
                };
                if !fits {
                    let message = signatures::no_matching_overload(name, None, &names(operands));
                    self.fail(expr, message);
                }
                Some(Ty::Bool)
            }
            ("_[_]" | "_[?_]", [container, index]) => {
                let fits = match kind_of(*container) {
                    None => true,
                    Some(Kind::List) => {
                        compatible(operand_kind(*index), Some(Kind::Int))
                            || operand_kind(*index) == Some(Kind::Uint)
                    }
                    Some(Kind::Map) => compatible(operand_kind(*index), key_kind(*container)),
                    Some(_) => false,
                };
                if !fits {
                    let message = signatures::no_matching_overload(name, None, &names(operands));
                    self.fail(expr, message);
                }
                // An optional index (`[?i]`) is an optional, which is not followed.
                (name == "_[_]").then(|| indexed_ty(*container))
            }
            _ => None,
        }
    }

    /// The type of `schema`'s field `field` (as a rule writes it, escaped).
    fn field(
        &mut self,
        expr: &IdedExpr,
        schema: &'s Schema,
        resource: bool,
        field: &str,
    ) -> Ty<'s> {
        if resource {
            match field {
                "apiVersion" | "kind" => return Ty::Str,
                "metadata" => return Ty::Metadata,
                _ => {}
            }
        }
        if let Some(AdditionalProperties::Schema(values)) = &schema.additional_properties {
            return schema_ty(values, values.embedded_resource);
        }
        if let Some((_, child)) = schema
            .properties
            .iter()
            .find(|(name, _)| library::escape(name).as_deref() == Some(field))
        {
            return schema_ty(child, child.embedded_resource);
        }
        let open = schema.preserve_unknown_fields
            || matches!(
                schema.additional_properties,
                Some(AdditionalProperties::Allowed(true))
            )
            || schema.ty.as_deref() != Some("object");
        if !open {
            self.fail(expr, format!("undefined field '{field}'"));
        }
        Ty::Unknown
    }
}

/// The CEL type of `ty` where it is known (a schema value by its schema type: arrays are
/// lists, objects with `additionalProperties` maps; objects with properties are messages,
/// which the checks leave alone).
fn kind_of(ty: Ty<'_>) -> Option<Kind> {
    match ty {
        Ty::Bool => Some(Kind::Bool),
        Ty::Int => Some(Kind::Int),
        Ty::Double => Some(Kind::Double),
        Ty::Str => Some(Kind::String),
        Ty::Typed(kind) => Some(kind),
        Ty::List | Ty::ListOf(_) => Some(Kind::List),
        Ty::Map => Some(Kind::Map),
        Ty::Schema(schema, _) => match (&schema.items, &schema.additional_properties) {
            (Some(_), _) => Some(Kind::List),
            (None, Some(AdditionalProperties::Schema(_))) => Some(Kind::Map),
            _ => None,
        },
        Ty::Metadata | Ty::Unknown => None,
    }
}

/// The type of a list's elements, where known.
fn element_kind(ty: Ty<'_>) -> Option<Kind> {
    match ty {
        Ty::ListOf(kind) => Some(kind),
        Ty::Schema(schema, _) => schema
            .items
            .as_deref()
            .and_then(|items| operand_kind(schema_ty(items, items.embedded_resource))),
        _ => None,
    }
}

/// The type of a map's keys, where known: a schema's maps are keyed by strings.
fn key_kind(ty: Ty<'_>) -> Option<Kind> {
    match ty {
        Ty::Schema(..) => Some(Kind::String),
        _ => None,
    }
}

/// Whether a value of type `have` may stand where `want` is expected (unknown types may;
/// numbers of different kinds mix, as Kubernetes' CEL environment allows).
fn compatible(have: Option<Kind>, want: Option<Kind>) -> bool {
    let numeric = |k: Kind| matches!(k, Kind::Int | Kind::Uint | Kind::Double);
    match (have, want) {
        (Some(h), Some(w)) => h == w || (numeric(h) && numeric(w)),
        _ => true,
    }
}

/// A type as cel-go's checker names it in its messages (`int`, `list(string)`,
/// `map(string, int)`); `dyn` where the analysis does not know it.
fn type_name(ty: Ty<'_>) -> String {
    match ty {
        Ty::Schema(schema, _) => match (&schema.items, &schema.additional_properties) {
            (Some(items), _) => format!(
                "list({})",
                type_name(schema_ty(items, items.embedded_resource))
            ),
            (None, Some(AdditionalProperties::Schema(values))) => format!(
                "map(string, {})",
                type_name(schema_ty(values, values.embedded_resource))
            ),
            _ => "dyn".into(),
        },
        Ty::ListOf(kind) => format!("list({})", kind.name()),
        Ty::List => "list(dyn)".into(),
        Ty::Map => "map(dyn, dyn)".into(),
        Ty::Metadata | Ty::Unknown => "dyn".into(),
        other => kind_of(other).map_or("dyn", Kind::name).to_string(),
    }
}

/// The type of an operator's operand, for its overloads: lists and maps (whose element
/// types are not tracked) are left to the runtime.
fn operand_kind(ty: Ty<'_>) -> Option<Kind> {
    kind_of(ty).filter(|k| !matches!(k, Kind::List | Kind::Map))
}

fn ty_of<'s>(kind: Kind) -> Ty<'s> {
    match kind {
        Kind::Bool => Ty::Bool,
        Kind::Int => Ty::Int,
        Kind::Double => Ty::Double,
        Kind::String => Ty::Str,
        Kind::List => Ty::List,
        Kind::Map => Ty::Map,
        other => Ty::Typed(other),
    }
}

/// The elements of a list or map the schema bounds, for comprehensions over it.
fn elements_of(ty: Ty<'_>) -> f64 {
    match ty {
        Ty::Schema(schema, _) => match (&schema.items, &schema.additional_properties) {
            (Some(items), _) => max_elements(schema.max_items, items),
            (None, Some(AdditionalProperties::Schema(values))) => {
                max_elements(schema.max_properties, values)
            }
            _ if schema.ty.as_deref() == Some("object") => schema
                .max_properties
                .map_or(schema.properties.len().max(1) as f64, |m| m as f64),
            _ => 1.0,
        },
        Ty::Str | Ty::List | Ty::ListOf(_) | Ty::Map | Ty::Unknown => {
            (MAX_REQUEST_BYTES / 2.0).floor()
        }
        _ => 1.0,
    }
}

/// What indexing a value of this type gives: a list's element, a map's value.
fn indexed_ty(container: Ty<'_>) -> Ty<'_> {
    match container {
        Ty::Schema(schema, _) => match (&schema.items, &schema.additional_properties) {
            (Some(items), _) => schema_ty(items, items.embedded_resource),
            (None, Some(AdditionalProperties::Schema(values))) => {
                schema_ty(values, values.embedded_resource)
            }
            _ => Ty::Unknown,
        },
        Ty::ListOf(kind) => ty_of(kind),
        _ => Ty::Unknown,
    }
}

/// What a comprehension's variable holds over a range of this type.
fn element_ty(range: Ty<'_>) -> Ty<'_> {
    match range {
        Ty::Schema(schema, _) => match (&schema.items, &schema.additional_properties) {
            (Some(items), _) => schema_ty(items, items.embedded_resource),
            // A map's comprehension variable is its key.
            _ => Ty::Str,
        },
        Ty::ListOf(kind) => ty_of(kind),
        _ => Ty::Unknown,
    }
}

/// The 1-based line and column of a byte offset.
fn position(source: &str, offset: usize) -> (usize, usize) {
    let before = source.get(..offset).unwrap_or(source);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}
