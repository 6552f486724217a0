//! Kubernetes protobuf request bodies, decoded into the JSON the same object would have.
//!
//! client-go's typed clients (and so kubectl's `create namespace|configmap|secret|deployment|…`
//! and `auth can-i`) send `Content-Type: application/vnd.kubernetes.protobuf`, and client-go has
//! no fallback to JSON on a 415 for protobuf (only for CBOR), so the server has to read it.
//!
//! The body is the magic `k8s\0` followed by a `runtime.Unknown`
//! `{typeMeta{apiVersion=1, kind=2}=1, raw=2, contentEncoding=3, contentType=4}`, whose `raw` is
//! the object's own message. That message is decoded with hand-written schema tables (field
//! number → JSON name and type) taken from Kubernetes' `generated.proto` files.
//!
//! Presence follows what Go's `encoding/json` would print for the struct the Go client encoded,
//! since that struct is what the protobuf carries: gogo-protobuf writes every non-pointer scalar
//! even when it is zero (kubectl sends `uid: ""`, `generation: 0`, `workingDir: ""`…), so
//! - `omitempty` value fields ([`Pres::Omit`]) are dropped when zero (`""`, `0`, `false`, empty
//!   list or map) — keeping them would defeat server-side defaulting (`terminationMessagePath`);
//! - pointer fields ([`Pres::Ptr`]) are kept whenever present, zero included (`replicas: 0`);
//! - fields without `omitempty` ([`Pres::Req`]) are kept, and a missing one gets its zero value
//!   (`containerPort: 0`, `metadata: {}`).
//!
//! Unknown field numbers are skipped (wire types 0, 1, 2, 5). Malformed input is an error naming
//! the message and field; nothing is allocated beyond what the input holds, and nesting is
//! bounded.

mod schemas;

use serde_json::{Map, Value};

use api::resources::ResourceInfo;

use schemas::schema_for;

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// Deepest nesting accepted (the schemas here nest at most about ten levels).
const MAX_DEPTH: usize = 32;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// A well-formed body of a kind (or encoding) this decoder has no schema for.
    #[error("{0}")]
    Unsupported(String),
    /// Bytes that are not a valid encoding.
    #[error("{0}")]
    Malformed(String),
}

fn malformed(message: &str, field: &str, what: &str) -> ProtobufError {
    if field.is_empty() {
        ProtobufError::Malformed(format!("malformed protobuf in {message}: {what}"))
    } else {
        ProtobufError::Malformed(format!("malformed protobuf in {message}.{field}: {what}"))
    }
}

/// Decodes a protobuf request body for `resource` into its JSON object, with `apiVersion` and
/// `kind` from the envelope (or from `resource` when the envelope leaves them empty).
pub fn decode_request(resource: &ResourceInfo, body: &[u8]) -> Result<Value, ProtobufError> {
    let raw = body.strip_prefix(MAGIC.as_slice()).ok_or_else(|| {
        ProtobufError::Malformed(
            "the protobuf body does not start with the Kubernetes magic \"k8s\\0\"".into(),
        )
    })?;
    let envelope = Envelope::decode(raw)?;
    if !envelope.content_encoding.is_empty() {
        return Err(ProtobufError::Unsupported(format!(
            "protobuf content encoding {:?} is not supported",
            envelope.content_encoding
        )));
    }
    if !envelope.content_type.is_empty()
        && envelope.content_type != "application/vnd.kubernetes.protobuf"
    {
        return Err(ProtobufError::Unsupported(format!(
            "a protobuf envelope holding {:?} is not supported",
            envelope.content_type
        )));
    }
    let (api_version, kind) = if envelope.kind.is_empty() {
        let api_version = if resource.group.is_empty() {
            resource.version.to_string()
        } else {
            format!("{}/{}", resource.group, resource.version)
        };
        (api_version, resource.kind.to_string())
    } else {
        (envelope.api_version, envelope.kind)
    };
    let (group, version) = match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version.as_str()),
    };
    let schema = schema_for(group, version, &kind).ok_or_else(|| {
        ProtobufError::Unsupported(format!(
            "protobuf is not supported for {api_version}, Kind={kind}; send application/json"
        ))
    })?;
    let mut object = decode_message(schema, envelope.raw, 0)?;
    object.insert("apiVersion".into(), Value::String(api_version.clone()));
    object.insert("kind".into(), Value::String(kind));
    Ok(Value::Object(object))
}

/// The `runtime.Unknown` wrapper.
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
    content_encoding: String,
    content_type: String,
}

impl<'a> Envelope<'a> {
    fn decode(buf: &'a [u8]) -> Result<Envelope<'a>, ProtobufError> {
        let mut envelope = Envelope {
            api_version: String::new(),
            kind: String::new(),
            raw: &[],
            content_encoding: String::new(),
            content_type: String::new(),
        };
        let mut r = Reader::new(buf);
        while let Some((num, wire)) = r.key("Unknown")? {
            let field = match num {
                1 => "typeMeta",
                2 => "raw",
                3 => "contentEncoding",
                4 => "contentType",
                _ => {
                    r.skip(wire)
                        .map_err(|w| malformed("Unknown", &format!("#{num}"), w))?;
                    continue;
                }
            };
            let bytes = match r.value(wire).map_err(|w| malformed("Unknown", field, w))? {
                Raw::Len(bytes) => bytes,
                _ => {
                    return Err(malformed(
                        "Unknown",
                        field,
                        "expected a length-delimited value",
                    ))
                }
            };
            match num {
                1 => {
                    let mut t = Reader::new(bytes);
                    while let Some((n, w)) = t.key("TypeMeta")? {
                        let name = match n {
                            1 => "apiVersion",
                            2 => "kind",
                            _ => {
                                t.skip(w)
                                    .map_err(|e| malformed("TypeMeta", &format!("#{n}"), e))?;
                                continue;
                            }
                        };
                        let s = match t.value(w).map_err(|e| malformed("TypeMeta", name, e))? {
                            Raw::Len(s) => lossy(s),
                            _ => return Err(malformed("TypeMeta", name, "expected a string")),
                        };
                        if n == 1 {
                            envelope.api_version = s;
                        } else {
                            envelope.kind = s;
                        }
                    }
                }
                2 => envelope.raw = bytes,
                3 => envelope.content_encoding = lossy(bytes),
                _ => envelope.content_type = lossy(bytes),
            }
        }
        Ok(envelope)
    }
}

// ---------------------------------------------------------------------------------------------
// Wire reading

/// One field value as read off the wire.
enum Raw<'a> {
    Varint(u64),
    Len(&'a [u8]),
    Fixed,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    fn varint(&mut self) -> Result<u64, &'static str> {
        let mut value: u64 = 0;
        for i in 0..10 {
            let byte = *self.buf.get(self.pos).ok_or("truncated varint")?;
            self.pos += 1;
            if i == 9 && byte > 1 {
                return Err("varint overflows 64 bits");
            }
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint overflows 64 bits")
    }

    fn take(&mut self, n: u64) -> Result<&'a [u8], &'static str> {
        let remaining = self.buf.len() - self.pos;
        if n > remaining as u64 {
            return Err("length runs past the end of the message");
        }
        let n = n as usize;
        let out = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// The next field's number and wire type, or `None` at the end.
    fn key(&mut self, message: &str) -> Result<Option<(u64, u8)>, ProtobufError> {
        if self.pos >= self.buf.len() {
            return Ok(None);
        }
        let key = self.varint().map_err(|w| malformed(message, "", w))?;
        let num = key >> 3;
        if num == 0 || num > 0x1fff_ffff {
            return Err(malformed(
                message,
                "",
                &format!("invalid field number {num}"),
            ));
        }
        Ok(Some((num, (key & 7) as u8)))
    }

    fn value(&mut self, wire: u8) -> Result<Raw<'a>, &'static str> {
        match wire {
            0 => Ok(Raw::Varint(self.varint()?)),
            1 => self.take(8).map(|_| Raw::Fixed),
            2 => {
                let n = self.varint()?;
                Ok(Raw::Len(self.take(n)?))
            }
            5 => self.take(4).map(|_| Raw::Fixed),
            3 | 4 => Err("groups (wire types 3 and 4) are not supported"),
            _ => Err("invalid wire type"),
        }
    }

    fn skip(&mut self, wire: u8) -> Result<(), &'static str> {
        self.value(wire).map(|_| ())
    }
}

fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Schemas (the tables themselves are in `schemas`)

/// How a field is encoded and printed.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int32,
    Int64,
    Bool,
    Msg(&'static Msg),
    /// An embedded struct (`json:",inline"`): its fields go into the enclosing object.
    Inline(&'static Msg),
    MapStr,
    MapBytes,
    MapQuantity,
    /// `metav1.Time` `{seconds=1, nanos=2}`: RFC 3339 in seconds.
    Time,
    /// `metav1.MicroTime`: RFC 3339 in microseconds.
    MicroTime,
    /// `intstr.IntOrString` `{type=1, intVal=2, strVal=3}`.
    IntOrString,
    /// `resource.Quantity` `{string=1}`.
    Quantity,
}

/// When a field appears in the JSON (see the module docs).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pres {
    Omit,
    Ptr,
    Req,
}

#[derive(Clone, Copy)]
struct Field {
    num: u32,
    name: &'static str,
    kind: Kind,
    pres: Pres,
    repeated: bool,
}

struct Msg {
    name: &'static str,
    fields: &'static [Field],
}

// ---------------------------------------------------------------------------------------------
// Decoding

fn decode_message(
    msg: &'static Msg,
    buf: &[u8],
    depth: usize,
) -> Result<Map<String, Value>, ProtobufError> {
    let mut out = Map::new();
    decode_into(msg, buf, depth, &mut out)?;
    finish(msg, &mut out);
    Ok(out)
}

fn decode_into(
    msg: &'static Msg,
    buf: &[u8],
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), ProtobufError> {
    if depth > MAX_DEPTH {
        return Err(malformed(msg.name, "", "nested too deeply"));
    }
    let mut r = Reader::new(buf);
    while let Some((num, wire)) = r.key(msg.name)? {
        let Some(field) = msg.fields.iter().find(|f| u64::from(f.num) == num) else {
            r.skip(wire)
                .map_err(|w| malformed(msg.name, &format!("#{num}"), w))?;
            continue;
        };
        let name = if field.name.is_empty() {
            "(inline)"
        } else {
            field.name
        };
        let raw = r.value(wire).map_err(|w| malformed(msg.name, name, w))?;
        decode_field(msg, field, raw, depth, out)?;
    }
    Ok(())
}

fn decode_field(
    msg: &'static Msg,
    field: &Field,
    raw: Raw<'_>,
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), ProtobufError> {
    let wrong = |expected: &str| malformed(msg.name, field.name, &format!("expected {expected}"));
    // Packed repeated integers.
    if field.repeated && matches!(field.kind, Kind::Int32 | Kind::Int64) {
        if let Raw::Len(bytes) = raw {
            let mut r = Reader::new(bytes);
            while r.pos < bytes.len() {
                let v = r.varint().map_err(|w| malformed(msg.name, field.name, w))?;
                push(out, field.name, int_value(field.kind, v));
            }
            return Ok(());
        }
    }
    let value = match (field.kind, raw) {
        (Kind::Str, Raw::Len(b)) => Value::String(lossy(b)),
        (Kind::Str, _) => return Err(wrong("a string")),
        (Kind::Int32 | Kind::Int64, Raw::Varint(v)) => int_value(field.kind, v),
        (Kind::Int32 | Kind::Int64, _) => return Err(wrong("a varint")),
        (Kind::Bool, Raw::Varint(v)) => Value::Bool(v != 0),
        (Kind::Bool, _) => return Err(wrong("a varint")),
        (Kind::Msg(m), Raw::Len(b)) => Value::Object(decode_message(m, b, depth + 1)?),
        (Kind::Inline(m), Raw::Len(b)) => return decode_into(m, b, depth + 1, out),
        (Kind::MapStr | Kind::MapBytes | Kind::MapQuantity, Raw::Len(b)) => {
            let (key, value) = map_entry(msg, field, b, depth)?;
            let map = out
                .entry(field.name)
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(map) = map {
                map.insert(key, value);
            }
            return Ok(());
        }
        (Kind::Time | Kind::MicroTime, Raw::Len(b)) => time_value(msg, field, b)?,
        (Kind::IntOrString, Raw::Len(b)) => int_or_string_value(msg, field, b)?,
        (Kind::Quantity, Raw::Len(b)) => Value::String(quantity_value(msg, field, b)?),
        _ => return Err(wrong("a length-delimited value")),
    };
    if field.repeated {
        push(out, field.name, value);
    } else {
        out.insert(field.name.to_string(), value);
    }
    Ok(())
}

fn push(out: &mut Map<String, Value>, name: &str, value: Value) {
    let list = out.entry(name).or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = list {
        list.push(value);
    }
}

fn int_value(kind: Kind, v: u64) -> Value {
    match kind {
        // int32 negatives are sign-extended to ten bytes on the wire.
        Kind::Int32 => Value::from(v as i64 as i32),
        _ => Value::from(v as i64),
    }
}

/// A map entry `{key=1, value=2}`.
fn map_entry(
    msg: &'static Msg,
    field: &Field,
    buf: &[u8],
    depth: usize,
) -> Result<(String, Value), ProtobufError> {
    if depth + 1 > MAX_DEPTH {
        return Err(malformed(msg.name, field.name, "nested too deeply"));
    }
    let bad = |what: &str| malformed(msg.name, field.name, what);
    let mut key = String::new();
    let mut value = match field.kind {
        Kind::MapQuantity => Value::String("0".into()),
        _ => Value::String(String::new()),
    };
    let mut r = Reader::new(buf);
    while let Some((num, wire)) = r.key(msg.name)? {
        let raw = r.value(wire).map_err(bad)?;
        match (num, raw) {
            (1, Raw::Len(b)) => key = lossy(b),
            (1, _) => return Err(bad("expected a string map key")),
            (2, Raw::Len(b)) => {
                value = Value::String(match field.kind {
                    Kind::MapBytes => base64(b),
                    Kind::MapQuantity => quantity_value(msg, field, b)?,
                    _ => lossy(b),
                })
            }
            (2, _) => return Err(bad("expected a length-delimited map value")),
            _ => {}
        }
    }
    Ok((key, value))
}

/// `metav1.Time`/`MicroTime` `{seconds=1, nanos=2}`. An empty message is the zero time (JSON
/// `null`); `Time` keeps whole seconds only, as its protobuf decoding does.
fn time_value(msg: &'static Msg, field: &Field, buf: &[u8]) -> Result<Value, ProtobufError> {
    if buf.is_empty() {
        return Ok(Value::Null);
    }
    let bad = |what: &str| malformed(msg.name, field.name, what);
    let (mut seconds, mut nanos) = (0i64, 0i64);
    let mut r = Reader::new(buf);
    while let Some((num, wire)) = r.key("Timestamp")? {
        match (num, r.value(wire).map_err(bad)?) {
            (1, Raw::Varint(v)) => seconds = v as i64,
            (2, Raw::Varint(v)) => nanos = i64::from(v as i64 as i32),
            (1 | 2, _) => return Err(bad("expected a varint")),
            _ => {}
        }
    }
    let micro = matches!(field.kind, Kind::MicroTime);
    let nanos = if micro {
        u32::try_from(nanos)
            .ok()
            .filter(|n| *n < 1_000_000_000)
            .ok_or_else(|| bad("nanos out of range"))?
    } else {
        0
    };
    let t =
        chrono::DateTime::from_timestamp(seconds, nanos).ok_or_else(|| bad("time out of range"))?;
    let text = if micro {
        t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
    } else {
        t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    };
    Ok(Value::String(text))
}

/// `intstr.IntOrString` `{type=1, intVal=2, strVal=3}`.
fn int_or_string_value(
    msg: &'static Msg,
    field: &Field,
    buf: &[u8],
) -> Result<Value, ProtobufError> {
    let bad = |what: &str| malformed(msg.name, field.name, what);
    let (mut ty, mut int_val, mut str_val) = (0u64, 0i32, String::new());
    let mut r = Reader::new(buf);
    while let Some((num, wire)) = r.key("IntOrString")? {
        match (num, r.value(wire).map_err(bad)?) {
            (1, Raw::Varint(v)) => ty = v,
            (2, Raw::Varint(v)) => int_val = v as i64 as i32,
            (3, Raw::Len(b)) => str_val = lossy(b),
            (1..=3, _) => return Err(bad("wrong wire type in IntOrString")),
            _ => {}
        }
    }
    Ok(if ty == 1 {
        Value::String(str_val)
    } else {
        Value::from(int_val)
    })
}

/// `resource.Quantity` `{string=1}`.
fn quantity_value(msg: &'static Msg, field: &Field, buf: &[u8]) -> Result<String, ProtobufError> {
    let bad = |what: &str| malformed(msg.name, field.name, what);
    let mut out = String::from("0");
    let mut r = Reader::new(buf);
    while let Some((num, wire)) = r.key("Quantity")? {
        match (num, r.value(wire).map_err(bad)?) {
            (1, Raw::Len(b)) => out = lossy(b),
            (1, _) => return Err(bad("expected a string in Quantity")),
            _ => {}
        }
    }
    Ok(out)
}

/// Applies the presence rules: drops zero `omitempty` values, fills in missing required ones.
fn finish(msg: &'static Msg, out: &mut Map<String, Value>) {
    for field in msg.fields {
        if let Kind::Inline(m) = field.kind {
            finish(m, out);
            continue;
        }
        let present = out.get(field.name);
        match field.pres {
            // A null time is the zero time: the same as absent.
            _ if present.is_some_and(Value::is_null) => {
                out.remove(field.name);
            }
            Pres::Omit if present.is_some_and(is_zero) => {
                out.remove(field.name);
            }
            Pres::Req if present.is_none() && !field.repeated => {
                if let Some(zero) = zero_value(field.kind) {
                    out.insert(field.name.to_string(), zero);
                }
            }
            _ => {}
        }
    }
}

fn is_zero(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_i64() == Some(0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
    }
}

fn zero_value(kind: Kind) -> Option<Value> {
    match kind {
        Kind::Str => Some(Value::String(String::new())),
        Kind::Int32 | Kind::Int64 | Kind::IntOrString => Some(Value::from(0)),
        Kind::Bool => Some(Value::Bool(false)),
        Kind::Msg(m) => {
            let mut out = Map::new();
            finish(m, &mut out);
            Some(Value::Object(out))
        }
        _ => None,
    }
}

/// Standard base64 with padding, as Go's `encoding/json` prints `[]byte`.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
