//! Kubernetes' CEL quantity library: `quantity(string)`, `isQuantity(string)` and the members of
//! a `kubernetes.Quantity` (`sign`, `isInteger`, `asInteger`, `asApproximateFloat`, `compareTo`,
//! `isLessThan`, `isGreaterThan`, `add`, `sub`), on [`api::quantity::Quantity`].

use std::cmp::Ordering;
use std::sync::Arc;

use api::quantity::Quantity;
use cel::extractors::This;
use cel::objects::Opaque;
use cel::{Context, ExecutionError, Value as CelValue};

/// The CEL type name kube-apiserver gives a quantity.
pub const TYPE_NAME: &str = "kubernetes.Quantity";

/// A quantity as a CEL value; equal when their values are (`1` and `1000m`).
#[derive(Debug, PartialEq, Eq)]
pub struct CelQuantity(pub Quantity);

impl Opaque for CelQuantity {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

/// Adds the library's functions to an evaluation's context.
pub fn register(context: &mut Context<'_, '_>) {
    // None of these names is the environment's, so adding them cannot conflict.
    let _ = context.add_function("quantity", |This(text): This<Arc<String>>| {
        parse(&text).map(value)
    });
    let _ = context.add_function("isQuantity", |This(text): This<Arc<String>>| {
        Quantity::parse(&text).is_ok()
    });
    let _ = context.add_function("sign", |This(q): This<CelValue>| {
        let q = of(&q, "sign")?;
        Ok::<_, ExecutionError>(if q.is_negative() {
            -1i64
        } else if q.is_zero() {
            0
        } else {
            1
        })
    });
    let _ = context.add_function("isInteger", |This(q): This<CelValue>| {
        of(&q, "isInteger").map(|q| as_integer(q).is_some())
    });
    let _ = context.add_function("asInteger", |This(q): This<CelValue>| {
        as_integer(of(&q, "asInteger")?).ok_or_else(|| {
            ExecutionError::function_error("asInteger", "cannot convert value to integer")
        })
    });
    let _ = context.add_function("asApproximateFloat", |This(q): This<CelValue>| {
        of(&q, "asApproximateFloat").map(|q| q.ratio(&Quantity::from_count(1)))
    });
    let _ = context.add_function("compareTo", |This(q): This<CelValue>, other: CelValue| {
        compare(&q, &other, "compareTo").map(|o| o as i64)
    });
    let _ = context.add_function("isLessThan", |This(q): This<CelValue>, other: CelValue| {
        compare(&q, &other, "isLessThan").map(|o| o == Ordering::Less)
    });
    let _ = context.add_function(
        "isGreaterThan",
        |This(q): This<CelValue>, other: CelValue| {
            compare(&q, &other, "isGreaterThan").map(|o| o == Ordering::Greater)
        },
    );
    let _ = context.add_function("add", |This(q): This<CelValue>, other: CelValue| {
        let q = of(&q, "add")?;
        Ok::<_, ExecutionError>(value(q.add(&operand(&other, "add")?)))
    });
    let _ = context.add_function("sub", |This(q): This<CelValue>, other: CelValue| {
        let q = of(&q, "sub")?;
        Ok::<_, ExecutionError>(value(q.sub(&operand(&other, "sub")?)))
    });
}

/// `quantity(text)`, failing as `resource.ParseQuantity` does.
pub fn parse(text: &str) -> Result<Quantity, ExecutionError> {
    Quantity::parse(text).map_err(|e| ExecutionError::function_error("quantity", e.detail()))
}

fn value(q: Quantity) -> CelValue {
    CelValue::Opaque(Arc::new(CelQuantity(q)))
}

/// The quantity a member function was called on.
fn of<'v>(value: &'v CelValue, function: &str) -> Result<&'v Quantity, ExecutionError> {
    match value {
        CelValue::Opaque(o) => o
            .downcast_ref::<CelQuantity>()
            .map(|q| &q.0)
            .ok_or_else(|| ExecutionError::no_such_overload(function, Vec::new())),
        _ => Err(ExecutionError::no_such_overload(function, Vec::new())),
    }
}

/// The right-hand side of `add` and `sub`: a quantity or an int.
fn operand(value: &CelValue, function: &str) -> Result<Quantity, ExecutionError> {
    match value {
        CelValue::Int(i) => Ok(Quantity::from_count(*i)),
        other => of(other, function).cloned(),
    }
}

fn compare(a: &CelValue, b: &CelValue, function: &str) -> Result<Ordering, ExecutionError> {
    Ok(of(a, function)?.cmp(of(b, function)?))
}

/// The value as an int when it is a whole number within int64 (`AsInt64`).
fn as_integer(q: &Quantity) -> Option<i64> {
    let units = q.as_units();
    (Quantity::from_count(units) == *q).then_some(units)
}
