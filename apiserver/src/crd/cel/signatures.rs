//! The declared signatures of the functions whose argument types the CRD check verifies: the
//! standard library's (`size`, `contains`, `startsWith`, `endsWith`, `matches`, the
//! conversions `bool`, `bytes`, `double`, `int`, `uint`, `string`, `duration`, `timestamp`,
//! and the timestamp and duration accessors) and Kubernetes' quantity, URL, IP and CIDR
//! libraries, each with every overload Kubernetes' CEL environment declares for its name. A
//! call to one of them with arguments of known types that match none of its overloads is
//! refused when the CRD is written, with cel-go's checker message.

/// A CEL type as the checker tells them apart.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Bool,
    Int,
    Uint,
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
            Kind::Uint => "uint",
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
    // The standard library (cel-go's `stdlib`).
    global("size", &[K::String], K::Int),
    global("size", &[K::Bytes], K::Int),
    global("size", &[K::List], K::Int),
    global("size", &[K::Map], K::Int),
    member("size", K::String, &[], K::Int),
    member("size", K::Bytes, &[], K::Int),
    member("size", K::List, &[], K::Int),
    member("size", K::Map, &[], K::Int),
    member("contains", K::String, &[K::String], K::Bool),
    member("startsWith", K::String, &[K::String], K::Bool),
    member("endsWith", K::String, &[K::String], K::Bool),
    global("matches", &[K::String, K::String], K::Bool),
    member("matches", K::String, &[K::String], K::Bool),
    global("bool", &[K::Bool], K::Bool),
    global("bool", &[K::String], K::Bool),
    global("bytes", &[K::Bytes], K::Bytes),
    global("bytes", &[K::String], K::Bytes),
    global("double", &[K::Double], K::Double),
    global("double", &[K::Int], K::Double),
    global("double", &[K::String], K::Double),
    global("double", &[K::Uint], K::Double),
    global("int", &[K::Int], K::Int),
    global("int", &[K::Double], K::Int),
    global("int", &[K::Duration], K::Int),
    global("int", &[K::String], K::Int),
    global("int", &[K::Timestamp], K::Int),
    global("int", &[K::Uint], K::Int),
    global("uint", &[K::Uint], K::Uint),
    global("uint", &[K::Double], K::Uint),
    global("uint", &[K::Int], K::Uint),
    global("uint", &[K::String], K::Uint),
    global("string", &[K::String], K::String),
    global("string", &[K::Bool], K::String),
    global("string", &[K::Bytes], K::String),
    global("string", &[K::Double], K::String),
    global("string", &[K::Duration], K::String),
    global("string", &[K::Int], K::String),
    global("string", &[K::Timestamp], K::String),
    global("string", &[K::Uint], K::String),
    // Kubernetes' IP and CIDR libraries add their own `string()`.
    global("string", &[K::Ip], K::String),
    global("string", &[K::Cidr], K::String),
    global("timestamp", &[K::String], K::Timestamp),
    global("timestamp", &[K::Timestamp], K::Timestamp),
    global("timestamp", &[K::Int], K::Timestamp),
    global("duration", &[K::String], K::Duration),
    global("duration", &[K::Duration], K::Duration),
    global("duration", &[K::Int], K::Duration),
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
    // Kubernetes declares `sign` as a function of a quantity (`sign(q)`); kemu takes the
    // member form `q.sign()` too.
    global("sign", &[K::Quantity], K::Int),
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
    global("ip.isCanonical", &[K::String], K::Bool),
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
            let shown = |k: Option<Kind>| k.map_or("dyn", Kind::name).to_string();
            let list: Vec<String> = args.iter().map(|a| shown(*a)).collect();
            Resolution::NoMatch(no_matching_overload(
                name,
                target.map(shown).as_deref(),
                &list,
            ))
        }
        Some(first) => {
            let agreed = matching.iter().all(|o| o.result == first.result);
            Resolution::Result(agreed.then_some(first.result))
        }
    }
}

/// cel-go's checker message for a call no overload takes: `'(int)'` for a global call,
/// `'string.(int)'` for a member call on a string.
pub fn no_matching_overload(name: &str, target: Option<&str>, args: &[String]) -> String {
    let signature = match target {
        Some(t) => format!("{t}.({})", args.join(", ")),
        None => format!("({})", args.join(", ")),
    };
    format!("found no matching overload for '{name}' applied to '{signature}'")
}

/// The result of a binary operator on operands of these types, `Err` with cel-go's message
/// where no overload of the operator takes them. Numbers of different kinds mix, as
/// Kubernetes' CEL environment allows; the library types only compare for equality.
pub fn operator(operator: &str, left: Kind, right: Kind) -> Result<Kind, String> {
    let numeric = |k: Kind| matches!(k, K::Int | K::Uint | K::Double);
    let result = match operator {
        "_==_" | "_!=_" if left == right || (numeric(left) && numeric(right)) => Some(K::Bool),
        "_<_" | "_<=_" | "_>_" | "_>=_"
            if (left == right
                && matches!(
                    left,
                    K::Bool
                        | K::Int
                        | K::Uint
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
                if a == b
                    && matches!(
                        a,
                        K::Int | K::Uint | K::Double | K::String | K::Bytes | K::List
                    ) =>
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
        assert_eq!(resolve("frobnicate", None, &[None]), Resolution::Undeclared);
        assert_eq!(
            resolve("size", None, &[Some(K::Int)]),
            Resolution::NoMatch("found no matching overload for 'size' applied to '(int)'".into())
        );
        assert_eq!(
            resolve("size", Some(Some(K::List)), &[]),
            Resolution::Result(Some(K::Int))
        );
        assert_eq!(
            resolve("startsWith", Some(Some(K::String)), &[Some(K::Int)]),
            Resolution::NoMatch(
                "found no matching overload for 'startsWith' applied to 'string.(int)'".into()
            )
        );
        // `contains` is only a member function: a global call is left to the runtime.
        assert_eq!(
            resolve("contains", None, &[Some(K::String), Some(K::String)]),
            Resolution::Undeclared
        );
        assert_eq!(
            resolve("string", None, &[Some(K::Cidr)]),
            Resolution::Result(Some(K::String))
        );
        assert_eq!(
            resolve("int", None, &[None]),
            Resolution::Result(Some(K::Int))
        );
        assert_eq!(
            resolve("ip.isCanonical", None, &[Some(K::Ip)]),
            Resolution::NoMatch(
                "found no matching overload for 'ip.isCanonical' applied to '(net.IP)'".into()
            )
        );
        assert_eq!(operator("_-_", K::Timestamp, K::Timestamp), Ok(K::Duration));
        assert_eq!(
            operator("_<_", K::Timestamp, K::String),
            Err("found no matching overload for '_<_' applied to '(google.protobuf.Timestamp, string)'".into())
        );
    }
}
