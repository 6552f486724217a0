//! What a rule sees: the CEL environment (the standard library with timestamps and durations,
//! the strings and lists extensions, the Kubernetes list and regex functions the crate lacks,
//! and Kubernetes' quantity, URL, IP and CIDR libraries) and custom objects turned into CEL
//! values as kube-apiserver types them from the schema.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};

use cel::extractors::This;
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, Value as CelValue};
use serde_json::Value;

use super::super::schema::Schema;

/// The environment every rule is compiled and run in.
pub fn env() -> Arc<Env> {
    static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
        let mut env = Env::stdlib();
        // Both extensions declare only new names, so adding them to the standard library
        // cannot clash; a failure would be a bug in the crate, and leaves the function out.
        if let Err(error) = env.add_extension(cel::extensions::strings) {
            tracing::error!(%error, "CEL strings extension not loaded");
        }
        if let Err(error) = env.add_extension(cel::extensions::lists) {
            tracing::error!(%error, "CEL lists extension not loaded");
        }
        // `string()` of an IP or a CIDR: overloads of the standard library's own function.
        if let Err(error) = env.add_extension(super::net::declare) {
            tracing::error!(%error, "CEL IP and CIDR string() overloads not loaded");
        }
        Arc::new(env)
    });
    ENV.clone()
}

/// The functions of Kubernetes' CEL libraries that the crate does not have, by name: a rule
/// calling one of these, or one of the environment's, refers to something that exists.
pub const KUBERNETES_FUNCTIONS: &[&str] = &[
    "isSorted",
    "sum",
    "min",
    "max",
    "find",
    "findAll",
    "quantity",
    "isQuantity",
    "sign",
    "url",
    "isURL",
    "ip",
    "isIP",
    "ip.isCanonical",
    "cidr",
    "isCIDR",
    "timestamp",
    "duration",
];

/// A context for one evaluation, with the Kubernetes functions added.
pub fn context() -> Context<'static, 'static> {
    let mut context = Context::with_env(env());
    // The names are not the environment's, so adding them cannot conflict.
    let _ = context.add_function("isSorted", is_sorted);
    let _ = context.add_function("sum", sum);
    let _ = context.add_function("min", |This(list): This<CelValue>| {
        extreme(list, "min", true)
    });
    let _ = context.add_function("max", |This(list): This<CelValue>| {
        extreme(list, "max", false)
    });
    let _ = context.add_function("find", find);
    let _ = context.add_function("findAll", find_all);
    super::quantity::register(&mut context);
    super::url::register(&mut context);
    super::net::register(&mut context);
    context
}

fn list_of(value: CelValue, function: &str) -> Result<Arc<Vec<CelValue>>, ExecutionError> {
    match value {
        CelValue::List(items) => Ok(items),
        other => Err(ExecutionError::function_error(
            function,
            format!("no such overload for {:?}", other.type_of().to_string()),
        )),
    }
}

fn compare(a: &CelValue, b: &CelValue) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (CelValue::Int(a), CelValue::Int(b)) => Some(a.cmp(b)),
        (CelValue::UInt(a), CelValue::UInt(b)) => Some(a.cmp(b)),
        (CelValue::Float(a), CelValue::Float(b)) => a.partial_cmp(b),
        (CelValue::String(a), CelValue::String(b)) => Some(a.cmp(b)),
        (CelValue::Bool(a), CelValue::Bool(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

/// `list.isSorted()`.
fn is_sorted(This(list): This<CelValue>) -> Result<bool, ExecutionError> {
    let items = list_of(list, "isSorted")?;
    for pair in items.windows(2) {
        match compare(&pair[0], &pair[1]) {
            Some(std::cmp::Ordering::Greater) => return Ok(false),
            Some(_) => {}
            None => {
                return Err(ExecutionError::function_error(
                    "isSorted",
                    "no such overload",
                ))
            }
        }
    }
    Ok(true)
}

/// `list.sum()`: 0 of the element type for an empty list.
fn sum(This(list): This<CelValue>) -> Result<CelValue, ExecutionError> {
    let items = list_of(list, "sum")?;
    let mut total = match items.first() {
        Some(CelValue::Float(_)) => CelValue::Float(0.0),
        Some(CelValue::UInt(_)) => CelValue::UInt(0),
        _ => CelValue::Int(0),
    };
    for item in items.iter() {
        total = match (&total, item) {
            (CelValue::Int(a), CelValue::Int(b)) => a
                .checked_add(*b)
                .map(CelValue::Int)
                .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            (CelValue::UInt(a), CelValue::UInt(b)) => {
                a.checked_add(*b).map(CelValue::UInt).ok_or_else(|| {
                    ExecutionError::function_error("sum", "unsigned integer overflow")
                })?
            }
            (CelValue::Float(a), CelValue::Float(b)) => CelValue::Float(a + b),
            _ => return Err(ExecutionError::function_error("sum", "no such overload")),
        };
    }
    Ok(total)
}

/// `list.min()` and `list.max()`: an error for an empty list.
fn extreme(list: CelValue, function: &str, least: bool) -> Result<CelValue, ExecutionError> {
    let items = list_of(list, function)?;
    let mut best: Option<&CelValue> = None;
    for item in items.iter() {
        best = match best {
            None => Some(item),
            Some(current) => match compare(item, current) {
                Some(std::cmp::Ordering::Less) if least => Some(item),
                Some(std::cmp::Ordering::Greater) if !least => Some(item),
                Some(_) => Some(current),
                None => return Err(ExecutionError::function_error(function, "no such overload")),
            },
        };
    }
    best.cloned().ok_or_else(|| {
        ExecutionError::function_error(function, format!("{function} called on empty list"))
    })
}

fn regex(pattern: &str, function: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(pattern).map_err(|e| ExecutionError::function_error(function, e))
}

/// `string.find(regex)`: the first match, or "".
fn find(This(text): This<Arc<String>>, pattern: Arc<String>) -> Result<CelValue, ExecutionError> {
    let re = regex(&pattern, "find")?;
    let found = re.find(&text).map(|m| m.as_str().to_string());
    Ok(CelValue::String(Arc::new(found.unwrap_or_default())))
}

/// `string.findAll(regex)`: every match.
fn find_all(
    This(text): This<Arc<String>>,
    pattern: Arc<String>,
) -> Result<CelValue, ExecutionError> {
    let re = regex(&pattern, "findAll")?;
    let found: Vec<CelValue> = re
        .find_iter(&text)
        .map(|m| CelValue::String(Arc::new(m.as_str().to_string())))
        .collect();
    Ok(CelValue::List(Arc::new(found)))
}

/// CEL's reserved words, which a property may be named but a rule must write escaped.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The name a rule uses for a property, as Kubernetes escapes it (`foo-bar` is
/// `foo__dash__bar`, `namespace` is `__namespace__`); `None` when no rule can name it.
pub fn escape(property: &str) -> Option<String> {
    if RESERVED.contains(&property) {
        return Some(format!("__{property}__"));
    }
    let mut chars = property.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '_' | '.' | '-' | '/'));
    if !first_ok
        || !property
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
    {
        return None;
    }
    Some(
        property
            .replace("__", "__underscores__")
            .replace('.', "__dot__")
            .replace('-', "__dash__")
            .replace('/', "__slash__"),
    )
}

/// The ObjectMeta fields a rule at a resource's root sees.
const VISIBLE_METADATA: &[&str] = &["name", "generateName"];

/// `value` as the CEL value a rule sees, typed by `schema`: integers as `int`, numbers as
/// `double`, objects with properties as messages (escaped field names), maps and lists as
/// themselves. At a resource root (`resource`), apiVersion, kind and metadata's name and
/// generateName are visible too.
pub fn to_cel(value: &Value, schema: Option<&Schema>, resource: bool) -> CelValue {
    match value {
        Value::Null => CelValue::Null,
        Value::Bool(b) => CelValue::Bool(*b),
        Value::Number(n) => {
            let ty = schema.and_then(|s| s.ty.as_deref());
            match (ty, n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some("number"), _, _, Some(f)) => CelValue::Float(f),
                (_, Some(i), _, _) => CelValue::Int(i),
                (Some("integer"), None, _, Some(f)) if f.fract() == 0.0 => CelValue::Int(f as i64),
                (_, None, Some(u), _) => CelValue::UInt(u),
                (_, _, _, f) => CelValue::Float(f.unwrap_or(0.0)),
            }
        }
        Value::String(s) => formatted(s, schema.and_then(|s| s.format.as_deref()))
            .unwrap_or_else(|| CelValue::String(Arc::new(s.clone()))),
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.items.as_deref());
            CelValue::List(Arc::new(
                items
                    .iter()
                    .map(|item| {
                        to_cel(
                            item,
                            item_schema,
                            item_schema.is_some_and(|s| s.embedded_resource),
                        )
                    })
                    .collect(),
            ))
        }
        Value::Object(fields) => {
            let mut out: HashMap<Key, CelValue> = HashMap::with_capacity(fields.len());
            let additional = schema.and_then(additional_schema);
            let is_map = additional.is_some()
                || schema.is_some_and(|s| s.properties.is_empty() && !s.preserve_unknown_fields);
            for (key, child) in fields {
                if resource && matches!(key.as_str(), "apiVersion" | "kind") {
                    out.insert(key.as_str().into(), to_cel(child, None, false));
                    continue;
                }
                if resource && key == "metadata" {
                    out.insert("metadata".into(), visible_metadata(child));
                    continue;
                }
                if is_map {
                    let embedded = additional.is_some_and(|s| s.embedded_resource);
                    out.insert(key.as_str().into(), to_cel(child, additional, embedded));
                    continue;
                }
                let property = schema.and_then(|s| s.properties.get(key));
                if let Some(name) = escape(key) {
                    let embedded = property.is_some_and(|s| s.embedded_resource);
                    out.insert(name.into(), to_cel(child, property, embedded));
                }
            }
            CelValue::Map(Map { map: Arc::new(out) })
        }
    }
}

fn additional_schema(schema: &Schema) -> Option<&Schema> {
    match &schema.additional_properties {
        Some(super::super::schema::AdditionalProperties::Schema(s)) => Some(s),
        _ => None,
    }
}

fn visible_metadata(metadata: &Value) -> CelValue {
    let mut out: HashMap<Key, CelValue> = HashMap::new();
    if let Value::Object(fields) = metadata {
        for name in VISIBLE_METADATA {
            if let Some(Value::String(s)) = fields.get(*name) {
                out.insert((*name).into(), CelValue::String(Arc::new(s.clone())));
            }
        }
    }
    CelValue::Map(Map { map: Arc::new(out) })
}

/// A string of a format Kubernetes gives a CEL type of its own: `date-time` and `date` are
/// timestamps, `duration` a duration, `byte` bytes. `None` for other formats, and for a value
/// that does not parse (schema validation reports that).
fn formatted(text: &str, format: Option<&str>) -> Option<CelValue> {
    use base64::Engine as _;
    match format? {
        "date-time" => chrono::DateTime::parse_from_rfc3339(text)
            .ok()
            .map(CelValue::Timestamp),
        "date" => chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| CelValue::Timestamp(t.and_utc().fixed_offset())),
        "duration" => parse_duration(text).map(CelValue::Duration),
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()
            .map(|b| CelValue::Bytes(Arc::new(b))),
        _ => None,
    }
}

/// A duration as the OpenAPI `duration` format reads it: Go's `time.ParseDuration` (`1h30m`,
/// `-1.5s`, `300ms`) with days (`d`) and weeks (`w`) too.
pub fn parse_duration(text: &str) -> Option<chrono::Duration> {
    let (negative, mut rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "\u{b5}s" | "\u{3bc}s" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "d" => 86_400e9,
            "w" => 604_800e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        nanos += number * unit;
    }
    if !nanos.is_finite() || nanos > i64::MAX as f64 {
        return None;
    }
    let duration = chrono::Duration::nanoseconds(nanos.round() as i64);
    Some(if negative { -duration } else { duration })
}
