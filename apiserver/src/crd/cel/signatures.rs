//! The declared signatures of the functions whose argument types the CRD check verifies:
//! timestamps and durations, and Kubernetes' quantity, URL, IP and CIDR libraries. A call to one
//! of them with arguments of known types that match none of its overloads is refused when the
//! CRD is written, with cel-go's checker message.

/// A CEL type as the checker tells them apart.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Bool,
    Int,
    Double,
    String,
    Bytes,
    Timestamp,
    Duration,
    Quantity,
    Url,
    Ip,
    Cidr,
    List,
    Map,
}

impl Kind {
    /// The type's name as cel-go prints it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::Double => "double",
            Kind::String => "string",
            Kind::Bytes => "bytes",
            Kind::Timestamp => "google.protobuf.Timestamp",
            Kind::Duration => "google.protobuf.Duration",
            Kind::Quantity => super::quantity::TYPE_NAME,
            Kind::Url => super::url::TYPE_NAME,
            Kind::Ip => super::net::IP_TYPE_NAME,
            Kind::Cidr => super::net::CIDR_TYPE_NAME,
            Kind::List => "list(dyn)",
            Kind::Map => "map(dyn, dyn)",
        }
    }
}

struct Overload {
    name: &'static str,
    /// The receiver of a member overload; `None` for a global function.
    target: Option<Kind>,
    args: &'static [Kind],
    result: Kind,
}

const fn global(name: &'static str, args: &'static [Kind], result: Kind) -> Overload {
    Overload {
        name,
        target: None,
        args,
        result,
    }
}

const fn member(name: &'static str, target: Kind, args: &'static [Kind], result: Kind) -> Overload {
    Overload {
        name,
        target: Some(target),
        args,
        result,
    }
}

use Kind as K;

const OVERLOADS: &[Overload] = &[
    global("timestamp", &[K::String], K::Timestamp),
    global("timestamp", &[K::Timestamp], K::Timestamp),
    global("timestamp", &[K::Int], K::Timestamp),
    global("duration", &[K::String], K::Duration),
    global("duration", &[K::Duration], K::Duration),
    member("getFullYear", K::Timestamp, &[], K::Int),
    member("getFullYear", K::Timestamp, &[K::String], K::Int),
    member("getMonth", K::Timestamp, &[], K::Int),
    member("getMonth", K::Timestamp, &[K::String], K::Int),
    member("getDayOfYear", K::Timestamp, &[], K::Int),
    member("getDayOfYear", K::Timestamp, &[K::String], K::Int),
    member("getDayOfMonth", K::Timestamp, &[], K::Int),
    member("getDayOfMonth", K::Timestamp, &[K::String], K::Int),
    member("getDate", K::Timestamp, &[], K::Int),
    member("getDate", K::Timestamp, &[K::String], K::Int),
    member("getDayOfWeek", K::Timestamp, &[], K::Int),
    member("getDayOfWeek", K::Timestamp, &[K::String], K::Int),
    member("getHours", K::Timestamp, &[], K::Int),
    member("getHours", K::Timestamp, &[K::String], K::Int),
    member("getHours", K::Duration, &[], K::Int),
    member("getMinutes", K::Timestamp, &[], K::Int),
    member("getMinutes", K::Timestamp, &[K::String], K::Int),
    member("getMinutes", K::Duration, &[], K::Int),
    member("getSeconds", K::Timestamp, &[], K::Int),
    member("getSeconds", K::Timestamp, &[K::String], K::Int),
    member("getSeconds", K::Duration, &[], K::Int),
    member("getMilliseconds", K::Timestamp, &[], K::Int),
    member("getMilliseconds", K::Timestamp, &[K::String], K::Int),
    member("getMilliseconds", K::Duration, &[], K::Int),
    global("quantity", &[K::String], K::Quantity),
    global("isQuantity", &[K::String], K::Bool),
    member("sign", K::Quantity, &[], K::Int),
    member("isInteger", K::Quantity, &[], K::Bool),
    member("asInteger", K::Quantity, &[], K::Int),
    member("asApproximateFloat", K::Quantity, &[], K::Double),
    member("compareTo", K::Quantity, &[K::Quantity], K::Int),
    member("isLessThan", K::Quantity, &[K::Quantity], K::Bool),
    member("isGreaterThan", K::Quantity, &[K::Quantity], K::Bool),
    member("add", K::Quantity, &[K::Quantity], K::Quantity),
    member("add", K::Quantity, &[K::Int], K::Quantity),
    member("sub", K::Quantity, &[K::Quantity], K::Quantity),
    member("sub", K::Quantity, &[K::Int], K::Quantity),
    global("url", &[K::String], K::Url),
    global("isURL", &[K::String], K::Bool),
    member("getScheme", K::Url, &[], K::String),
    member("getHost", K::Url, &[], K::String),
    member("getHostname", K::Url, &[], K::String),
    member("getPort", K::Url, &[], K::String),
    member("getEscapedPath", K::Url, &[], K::String),
    member("getQuery", K::Url, &[], K::Map),
    global("ip", &[K::String], K::Ip),
    global("isIP", &[K::String], K::Bool),
    member("family", K::Ip, &[], K::Int),
    member("isUnspecified", K::Ip, &[], K::Bool),
    member("isLoopback", K::Ip, &[], K::Bool),
    member("isLinkLocalMulticast", K::Ip, &[], K::Bool),
    member("isLinkLocalUnicast", K::Ip, &[], K::Bool),
    member("isGlobalUnicast", K::Ip, &[], K::Bool),
    global("cidr", &[K::String], K::Cidr),
    global("isCIDR", &[K::String], K::Bool),
    member("containsIP", K::Cidr, &[K::String], K::Bool),
    member("containsIP", K::Cidr, &[K::Ip], K::Bool),
    member("containsCIDR", K::Cidr, &[K::String], K::Bool),
    member("containsCIDR", K::Cidr, &[K::Cidr], K::Bool),
    member("ip", K::Cidr, &[], K::Ip),
    member("masked", K::Cidr, &[], K::Cidr),
    member("prefixLength", K::Cidr, &[], K::Int),
];

/// What a call resolves to.
#[derive(Debug, PartialEq)]
pub enum Resolution {
    /// Not a function of the table (or not with this call style): nothing is known.
    Undeclared,
    /// An overload matches; its result type when the matches agree on one.
    Result(Option<Kind>),
    /// No overload takes these arguments: cel-go's message.
    NoMatch(String),
}

/// Resolves a call of `name` (`target`: the receiver's type of a member call, `None` inside
/// when unknown) with arguments of these types (`None`: unknown, which matches anything).
pub fn resolve(name: &str, target: Option<Option<Kind>>, args: &[Option<Kind>]) -> Resolution {
    let is_member = target.is_some();
    let candidates: Vec<&Overload> = OVERLOADS
        .iter()
        .filter(|o| o.name == name && o.target.is_some() == is_member)
        .collect();
    if candidates.is_empty() {
        return Resolution::Undeclared;
    }
    let fits = |want: Kind, have: Option<Kind>| have.is_none_or(|h| h == want);
    let matching: Vec<&&Overload> = candidates
        .iter()
        .filter(|o| {
            o.args.len() == args.len()
                && o.target.is_none_or(|t| fits(t, target.flatten()))
                && o.args.iter().zip(args).all(|(w, h)| fits(*w, *h))
        })
        .collect();
    match matching.first() {
        None => {
            let shown = |k: Option<Kind>| k.map_or("dyn", Kind::name);
            let list: Vec<&str> = args.iter().map(|a| shown(*a)).collect();
            let signature = match target {
                Some(t) => format!("{}.({})", shown(t), list.join(", ")),
                None => format!("({})", list.join(", ")),
            };
            Resolution::NoMatch(format!(
                "found no matching overload for '{name}' applied to '{signature}'"
            ))
        }
        Some(first) => {
            let agreed = matching.iter().all(|o| o.result == first.result);
            Resolution::Result(agreed.then_some(first.result))
        }
    }
}

/// The result of a binary operator on operands of these types, `Err` with cel-go's message
/// where no overload of the operator takes them. Numbers of different kinds mix, as
/// Kubernetes' CEL environment allows; the library types only compare for equality.
pub fn operator(operator: &str, left: Kind, right: Kind) -> Result<Kind, String> {
    let numeric = |k: Kind| matches!(k, K::Int | K::Double);
    let result = match operator {
        "_==_" | "_!=_" if left == right || (numeric(left) && numeric(right)) => Some(K::Bool),
        "_<_" | "_<=_" | "_>_" | "_>=_"
            if (left == right
                && matches!(
                    left,
                    K::Bool
                        | K::Int
                        | K::Double
                        | K::String
                        | K::Bytes
                        | K::Timestamp
                        | K::Duration
                ))
                || (numeric(left) && numeric(right)) =>
        {
            Some(K::Bool)
        }
        "_+_" => match (left, right) {
            (K::Timestamp, K::Duration) | (K::Duration, K::Timestamp) => Some(K::Timestamp),
            (K::Duration, K::Duration) => Some(K::Duration),
            (a, b)
                if a == b && matches!(a, K::Int | K::Double | K::String | K::Bytes | K::List) =>
            {
                Some(a)
            }
            (a, b) if numeric(a) && numeric(b) => Some(a),
            _ => None,
        },
        "_-_" => match (left, right) {
            (K::Timestamp, K::Timestamp) | (K::Duration, K::Duration) => Some(K::Duration),
            (K::Timestamp, K::Duration) => Some(K::Timestamp),
            (a, b) if numeric(a) && numeric(b) => Some(a),
            _ => None,
        },
        "_*_" | "_/_" | "_%_" if numeric(left) && numeric(right) => Some(left),
        _ => None,
    };
    result.ok_or_else(|| {
        format!(
            "found no matching overload for '{operator}' applied to '({}, {})'",
            left.name(),
            right.name()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_resolve_by_argument_types() {
        assert_eq!(
            resolve("quantity", None, &[Some(K::String)]),
            Resolution::Result(Some(K::Quantity))
        );
        assert_eq!(
            resolve("quantity", None, &[Some(K::Int)]),
            Resolution::NoMatch(
                "found no matching overload for 'quantity' applied to '(int)'".into()
            )
        );
        assert_eq!(
            resolve("isGreaterThan", Some(Some(K::Quantity)), &[Some(K::Int)]),
            Resolution::NoMatch("found no matching overload for 'isGreaterThan' applied to 'kubernetes.Quantity.(int)'".into())
        );
        assert_eq!(
            resolve("add", Some(Some(K::Quantity)), &[None]),
            Resolution::Result(Some(K::Quantity))
        );
        assert_eq!(
            resolve("ip", Some(Some(K::Cidr)), &[]),
            Resolution::Result(Some(K::Ip))
        );
        assert_eq!(resolve("size", None, &[None]), Resolution::Undeclared);
        assert_eq!(operator("_-_", K::Timestamp, K::Timestamp), Ok(K::Duration));
        assert_eq!(
            operator("_<_", K::Timestamp, K::String),
            Err("found no matching overload for '_<_' applied to '(google.protobuf.Timestamp, string)'".into())
        );
    }
}
