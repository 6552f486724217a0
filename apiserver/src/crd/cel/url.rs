//! Kubernetes' CEL URL library: `url(string)`, `isURL(string)` and the members of a
//! `kubernetes.URL` (`getScheme`, `getHost`, `getHostname`, `getPort`, `getEscapedPath`,
//! `getQuery`). A URL is accepted as Go's `url.ParseRequestURI` accepts it (an absolute URL or
//! an absolute path), which is also what the OpenAPI `uri` format checks.

use std::collections::HashMap;
use std::sync::Arc;

use cel::extractors::This;
use cel::objects::{Key, Map, Opaque};
use cel::{Context, ExecutionError, Value as CelValue};

/// The CEL type name of a URL.
pub const TYPE_NAME: &str = "kubernetes.URL";

/// A parsed URL: the parts the library's members read.
#[derive(Debug, PartialEq, Eq, Default)]
pub struct CelUrl {
    scheme: String,
    /// `host[:port]` as written.
    host: String,
    /// The path as written (still escaped).
    path: String,
    raw_query: String,
}

impl Opaque for CelUrl {
    fn runtime_type_name(&self) -> &str {
        TYPE_NAME
    }
}

/// Adds the library's functions to an evaluation's context.
pub fn register(context: &mut Context<'_, '_>) {
    // None of these names is the environment's, so adding them cannot conflict.
    let _ = context.add_function("url", |This(s): This<Arc<String>>| {
        parse(&s)
            .map(|u| CelValue::Opaque(Arc::new(u)))
            .map_err(|e| {
                ExecutionError::function_error(
                    "url",
                    format!("URL parse error during conversion from string: {e}"),
                )
            })
    });
    let _ = context.add_function("isURL", |This(s): This<Arc<String>>| parse(&s).is_ok());
    let _ = context.add_function("getScheme", |This(v): This<CelValue>| {
        part(&v, "getScheme", |u| u.scheme.clone())
    });
    let _ = context.add_function("getHost", |This(v): This<CelValue>| {
        part(&v, "getHost", |u| u.host.clone())
    });
    let _ = context.add_function("getHostname", |This(v): This<CelValue>| {
        part(&v, "getHostname", |u| split_host(&u.host).0.to_string())
    });
    let _ = context.add_function("getPort", |This(v): This<CelValue>| {
        part(&v, "getPort", |u| split_host(&u.host).1.to_string())
    });
    let _ = context.add_function("getEscapedPath", |This(v): This<CelValue>| {
        part(&v, "getEscapedPath", |u| escape_path(&u.path))
    });
    let _ = context.add_function("getQuery", |This(v): This<CelValue>| {
        let u = of(&v, "getQuery")?;
        Ok::<_, ExecutionError>(query(&u.raw_query))
    });
}

fn of<'v>(value: &'v CelValue, function: &str) -> Result<&'v CelUrl, ExecutionError> {
    match value {
        CelValue::Opaque(o) => o
            .downcast_ref::<CelUrl>()
            .ok_or_else(|| ExecutionError::no_such_overload(function, Vec::new())),
        _ => Err(ExecutionError::no_such_overload(function, Vec::new())),
    }
}

fn part(
    value: &CelValue,
    function: &str,
    get: impl Fn(&CelUrl) -> String,
) -> Result<CelValue, ExecutionError> {
    Ok(CelValue::String(Arc::new(get(of(value, function)?))))
}

/// `url.ParseRequestURI`, then the fragment dropped as `url.Parse` drops it; the error is
/// Go's (`parse "x": invalid URI for request`).
pub fn parse(raw: &str) -> Result<CelUrl, String> {
    // A request URI keeps a '#' in its path or query; url.Parse, which runs after, cuts it.
    let checked = parse_request_uri(raw)?;
    match raw.split_once('#') {
        Some((before, _)) => Ok(parse_request_uri(before).unwrap_or(checked)),
        None => Ok(checked),
    }
}

fn parse_request_uri(raw: &str) -> Result<CelUrl, String> {
    let failed = |message: &str| format!("parse {raw:?}: {message}");
    if raw.is_empty() {
        return Err(failed("empty url"));
    }
    if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(failed("net/url: invalid control character in URL"));
    }
    let mut url = CelUrl::default();
    if raw == "*" {
        url.path = "*".into();
        return Ok(url);
    }
    let (scheme, mut rest) = split_scheme(raw).map_err(failed)?;
    url.scheme = scheme.to_ascii_lowercase();
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        rest = &rest[..rest.len() - 1];
    } else if let Some((before, query)) = rest.split_once('?') {
        url.raw_query = query.to_string();
        rest = before;
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            // An opaque URL (`mailto:x`): no host and no path.
            return Ok(url);
        }
        return Err(failed("invalid URI for request"));
    }
    if !url.scheme.is_empty() && rest.starts_with("//") && !rest.starts_with("///") {
        let authority_end = rest[2..].find('/').map_or(rest.len(), |i| i + 2);
        let authority = &rest[2..authority_end];
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        check_host(host).map_err(|m| failed(&m))?;
        url.host = host.to_string();
        rest = &rest[authority_end..];
    }
    check_escapes(rest).map_err(|m| failed(&m))?;
    url.path = rest.to_string();
    Ok(url)
}

/// The scheme and what follows its `:` (no scheme: all of it).
fn split_scheme(raw: &str) -> Result<(&str, &str), &'static str> {
    for (i, c) in raw.char_indices() {
        match c {
            'a'..='z' | 'A'..='Z' => {}
            '0'..='9' | '+' | '-' | '.' if i > 0 => {}
            ':' if i == 0 => return Err("missing protocol scheme"),
            ':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// The port after a host must be digits (`invalid port ":x" after host`).
fn check_host(host: &str) -> Result<(), String> {
    let after_bracket = match host.rfind(']') {
        Some(i) if host.starts_with('[') => &host[i + 1..],
        Some(_) => return Err(format!("invalid host {host:?}")),
        None if host.starts_with('[') => {
            return Err("missing ']' in host".into());
        }
        None => host,
    };
    if let Some(i) = after_bracket.rfind(':') {
        let port = &after_bracket[i..];
        if !port[1..].bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("invalid port {port:?} after host"));
        }
    }
    check_escapes(host)
}

/// Every `%` must start two hex digits.
fn check_escapes(s: &str) -> Result<(), String> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let valid = i + 2 < bytes.len()
                && bytes[i + 1].is_ascii_hexdigit()
                && bytes[i + 2].is_ascii_hexdigit();
            if !valid {
                let end = (i + 3).min(s.len());
                return Err(format!("invalid URL escape {:?}", &s[i..end]));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// `host[:port]` split as `Hostname()` and `Port()` split it (brackets dropped).
fn split_host(host: &str) -> (&str, &str) {
    let (name, port) = match host.rfind(':') {
        Some(i) if !host[i..].contains(']') => (&host[..i], &host[i + 1..]),
        _ => (host, ""),
    };
    let name = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    (name, port)
}

/// `EscapedPath()`: the path as written where it is a valid escaping, with the characters a
/// path may not hold (space, quotes, non-ASCII, ...) percent-encoded.
fn escape_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        let keep = b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/%".contains(&b);
        if keep {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `Query()`: every key with its values in order; `+` is a space, pairs that do not
/// unescape (or hold a `;`) are dropped.
fn query(raw: &str) -> CelValue {
    let mut values: Vec<(String, Vec<CelValue>)> = Vec::new();
    for pair in raw.split('&').filter(|p| !p.is_empty()) {
        if pair.contains(';') {
            continue;
        }
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let (Some(key), Some(value)) = (unescape(key), unescape(value)) else {
            continue;
        };
        let value = CelValue::String(Arc::new(value));
        match values.iter_mut().find(|(k, _)| *k == key) {
            Some((_, list)) => list.push(value),
            None => values.push((key, vec![value])),
        }
    }
    let map: HashMap<Key, CelValue> = values
        .into_iter()
        .map(|(k, v)| (Key::from(k), CelValue::List(Arc::new(v))))
        .collect();
    CelValue::Map(Map { map: Arc::new(map) })
}

/// Query unescaping: `%XX` and `+` for a space; `None` on a bad escape.
fn unescape(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_as_request_uris() {
        let u = parse("https://user@example.com:8080/a b/c?k1=a&k2=b&k2=c#frag").unwrap();
        assert_eq!(u.scheme, "https");
        assert_eq!(u.host, "example.com:8080");
        assert_eq!(split_host(&u.host), ("example.com", "8080"));
        assert_eq!(escape_path(&u.path), "/a%20b/c");
        assert_eq!(u.raw_query, "k1=a&k2=b&k2=c");
        assert_eq!(split_host("[::1]:80"), ("::1", "80"));
        assert_eq!(split_host("[::1]"), ("::1", ""));
        assert_eq!(parse("/path").unwrap().path, "/path");
        assert_eq!(
            parse("example.com").unwrap_err(),
            "parse \"example.com\": invalid URI for request"
        );
        assert_eq!(
            parse("https://example.com:x/").unwrap_err(),
            "parse \"https://example.com:x/\": invalid port \":x\" after host"
        );
        assert_eq!(
            parse(":foo").unwrap_err(),
            "parse \":foo\": missing protocol scheme"
        );
    }
}
