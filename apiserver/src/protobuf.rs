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

use serde_json::{Map, Value};

use api::resources::ResourceInfo;

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
// Schemas

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

const fn fld(num: u32, name: &'static str, kind: Kind, pres: Pres, repeated: bool) -> Field {
    Field {
        num,
        name,
        kind,
        pres,
        repeated,
    }
}
/// `string` with `omitempty`.
const fn s(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Str, Pres::Omit, false)
}
/// `string` without `omitempty`.
const fn s_req(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Str, Pres::Req, false)
}
/// `*string`.
const fn s_ptr(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Str, Pres::Ptr, false)
}
/// `[]string`.
const fn strs(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Str, Pres::Omit, true)
}
const fn i32_o(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int32, Pres::Omit, false)
}
const fn i32_r(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int32, Pres::Req, false)
}
const fn i32_p(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int32, Pres::Ptr, false)
}
const fn i64_o(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int64, Pres::Omit, false)
}
const fn i64_p(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int64, Pres::Ptr, false)
}
const fn i64s(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Int64, Pres::Omit, true)
}
const fn b_o(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Bool, Pres::Omit, false)
}
const fn b_r(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Bool, Pres::Req, false)
}
const fn b_p(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Bool, Pres::Ptr, false)
}
/// A struct value field (always printed).
const fn msg(num: u32, name: &'static str, m: &'static Msg) -> Field {
    fld(num, name, Kind::Msg(m), Pres::Req, false)
}
/// A pointer-to-struct field.
const fn msg_p(num: u32, name: &'static str, m: &'static Msg) -> Field {
    fld(num, name, Kind::Msg(m), Pres::Ptr, false)
}
/// A list of structs.
const fn msgs(num: u32, name: &'static str, m: &'static Msg) -> Field {
    fld(num, name, Kind::Msg(m), Pres::Omit, true)
}
const fn inline(num: u32, m: &'static Msg) -> Field {
    fld(num, "", Kind::Inline(m), Pres::Req, false)
}
const fn map_s(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::MapStr, Pres::Omit, false)
}
const fn map_b(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::MapBytes, Pres::Omit, false)
}
const fn map_q(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::MapQuantity, Pres::Omit, false)
}
const fn time(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Time, Pres::Ptr, false)
}
const fn micro_time(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::MicroTime, Pres::Ptr, false)
}
const fn int_or_string(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::IntOrString, Pres::Ptr, false)
}
const fn int_or_string_req(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::IntOrString, Pres::Req, false)
}
const fn quantity(num: u32, name: &'static str) -> Field {
    fld(num, name, Kind::Quantity, Pres::Ptr, false)
}

// --- k8s.io/apimachinery meta/v1 ---

static OBJECT_META: Msg = Msg {
    name: "ObjectMeta",
    fields: &[
        s(1, "name"),
        s(2, "generateName"),
        s(3, "namespace"),
        s(4, "selfLink"),
        s(5, "uid"),
        s(6, "resourceVersion"),
        i64_o(7, "generation"),
        time(8, "creationTimestamp"),
        time(9, "deletionTimestamp"),
        i64_p(10, "deletionGracePeriodSeconds"),
        map_s(11, "labels"),
        map_s(12, "annotations"),
        msgs(13, "ownerReferences", &OWNER_REFERENCE),
        strs(14, "finalizers"),
        // managedFields (17) is skipped.
    ],
};

static OWNER_REFERENCE: Msg = Msg {
    name: "OwnerReference",
    fields: &[
        s_req(5, "apiVersion"),
        s_req(1, "kind"),
        s_req(3, "name"),
        s_req(4, "uid"),
        b_p(6, "controller"),
        b_p(7, "blockOwnerDeletion"),
    ],
};

static LABEL_SELECTOR: Msg = Msg {
    name: "LabelSelector",
    fields: &[
        map_s(1, "matchLabels"),
        msgs(2, "matchExpressions", &LABEL_SELECTOR_REQUIREMENT),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Msg = Msg {
    name: "LabelSelectorRequirement",
    fields: &[s_req(1, "key"), s_req(2, "operator"), strs(3, "values")],
};

static CONDITION: Msg = Msg {
    name: "Condition",
    fields: &[
        s_req(1, "type"),
        s_req(2, "status"),
        i64_o(3, "observedGeneration"),
        time(4, "lastTransitionTime"),
        s_req(5, "reason"),
        s_req(6, "message"),
    ],
};

static DELETE_OPTIONS: Msg = Msg {
    name: "DeleteOptions",
    fields: &[
        i64_p(1, "gracePeriodSeconds"),
        msg_p(2, "preconditions", &PRECONDITIONS),
        b_p(3, "orphanDependents"),
        s_ptr(4, "propagationPolicy"),
        strs(5, "dryRun"),
        b_p(6, "ignoreStoreReadErrorWithClusterBreakingPotential"),
    ],
};

static PRECONDITIONS: Msg = Msg {
    name: "Preconditions",
    fields: &[s_ptr(1, "uid"), s_ptr(2, "resourceVersion")],
};

// --- k8s.io/api core/v1 ---

static NAMESPACE: Msg = Msg {
    name: "Namespace",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &NAMESPACE_SPEC),
        msg(3, "status", &NAMESPACE_STATUS),
    ],
};

static NAMESPACE_SPEC: Msg = Msg {
    name: "NamespaceSpec",
    fields: &[strs(1, "finalizers")],
};

static NAMESPACE_STATUS: Msg = Msg {
    name: "NamespaceStatus",
    fields: &[s(1, "phase"), msgs(2, "conditions", &NAMESPACE_CONDITION)],
};

static NAMESPACE_CONDITION: Msg = Msg {
    name: "NamespaceCondition",
    fields: &[
        s_req(1, "type"),
        s_req(2, "status"),
        time(4, "lastTransitionTime"),
        s(5, "reason"),
        s(6, "message"),
    ],
};

static CONFIG_MAP: Msg = Msg {
    name: "ConfigMap",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        b_p(4, "immutable"),
        map_s(2, "data"),
        map_b(3, "binaryData"),
    ],
};

static SECRET: Msg = Msg {
    name: "Secret",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        b_p(5, "immutable"),
        map_b(2, "data"),
        map_s(4, "stringData"),
        s(3, "type"),
    ],
};

static SERVICE_ACCOUNT: Msg = Msg {
    name: "ServiceAccount",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msgs(2, "secrets", &OBJECT_REFERENCE),
        msgs(3, "imagePullSecrets", &LOCAL_OBJECT_REFERENCE),
        b_p(4, "automountServiceAccountToken"),
    ],
};

static OBJECT_REFERENCE: Msg = Msg {
    name: "ObjectReference",
    fields: &[
        s(1, "kind"),
        s(2, "namespace"),
        s(3, "name"),
        s(4, "uid"),
        s(5, "apiVersion"),
        s(6, "resourceVersion"),
        s(7, "fieldPath"),
    ],
};

static LOCAL_OBJECT_REFERENCE: Msg = Msg {
    name: "LocalObjectReference",
    fields: &[s(1, "name")],
};

static BINDING: Msg = Msg {
    name: "Binding",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "target", &OBJECT_REFERENCE),
    ],
};

static SERVICE: Msg = Msg {
    name: "Service",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &SERVICE_SPEC),
        msg(3, "status", &SERVICE_STATUS),
    ],
};

static SERVICE_SPEC: Msg = Msg {
    name: "ServiceSpec",
    fields: &[
        msgs(1, "ports", &SERVICE_PORT),
        map_s(2, "selector"),
        s(3, "clusterIP"),
        strs(18, "clusterIPs"),
        s(4, "type"),
        strs(5, "externalIPs"),
        s(7, "sessionAffinity"),
        s(8, "loadBalancerIP"),
        strs(9, "loadBalancerSourceRanges"),
        s(10, "externalName"),
        s(11, "externalTrafficPolicy"),
        i32_o(12, "healthCheckNodePort"),
        b_o(13, "publishNotReadyAddresses"),
        msg_p(14, "sessionAffinityConfig", &SESSION_AFFINITY_CONFIG),
        strs(19, "ipFamilies"),
        s_ptr(17, "ipFamilyPolicy"),
        b_p(20, "allocateLoadBalancerNodePorts"),
        s_ptr(21, "loadBalancerClass"),
        s_ptr(22, "internalTrafficPolicy"),
        s_ptr(23, "trafficDistribution"),
    ],
};

static SESSION_AFFINITY_CONFIG: Msg = Msg {
    name: "SessionAffinityConfig",
    fields: &[msg_p(1, "clientIP", &CLIENT_IP_CONFIG)],
};

static CLIENT_IP_CONFIG: Msg = Msg {
    name: "ClientIPConfig",
    fields: &[i32_p(1, "timeoutSeconds")],
};

static SERVICE_PORT: Msg = Msg {
    name: "ServicePort",
    fields: &[
        s(1, "name"),
        s(2, "protocol"),
        s_ptr(6, "appProtocol"),
        i32_r(3, "port"),
        int_or_string_req(4, "targetPort"),
        i32_o(5, "nodePort"),
    ],
};

static SERVICE_STATUS: Msg = Msg {
    name: "ServiceStatus",
    fields: &[
        msg(1, "loadBalancer", &LOAD_BALANCER_STATUS),
        msgs(2, "conditions", &CONDITION),
    ],
};

static LOAD_BALANCER_STATUS: Msg = Msg {
    name: "LoadBalancerStatus",
    fields: &[msgs(1, "ingress", &LOAD_BALANCER_INGRESS)],
};

static LOAD_BALANCER_INGRESS: Msg = Msg {
    name: "LoadBalancerIngress",
    fields: &[
        s(1, "ip"),
        s(2, "hostname"),
        s_ptr(3, "ipMode"),
        msgs(4, "ports", &PORT_STATUS),
    ],
};

static PORT_STATUS: Msg = Msg {
    name: "PortStatus",
    fields: &[i32_r(1, "port"), s_req(2, "protocol"), s_ptr(3, "error")],
};

static POD: Msg = Msg {
    name: "Pod",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &POD_SPEC),
        msg(3, "status", &POD_STATUS),
    ],
};

/// Only the scalar part of a pod's status (a client creating a pod sends it empty).
static POD_STATUS: Msg = Msg {
    name: "PodStatus",
    fields: &[
        s(1, "phase"),
        s(3, "message"),
        s(4, "reason"),
        s(11, "nominatedNodeName"),
        s(5, "hostIP"),
        s(6, "podIP"),
        time(7, "startTime"),
        s(9, "qosClass"),
    ],
};

static POD_TEMPLATE_SPEC: Msg = Msg {
    name: "PodTemplateSpec",
    fields: &[msg(1, "metadata", &OBJECT_META), msg(2, "spec", &POD_SPEC)],
};

static POD_SPEC: Msg = Msg {
    name: "PodSpec",
    fields: &[
        msgs(1, "volumes", &VOLUME),
        msgs(20, "initContainers", &CONTAINER),
        msgs(2, "containers", &CONTAINER),
        s(3, "restartPolicy"),
        i64_p(4, "terminationGracePeriodSeconds"),
        i64_p(5, "activeDeadlineSeconds"),
        s(6, "dnsPolicy"),
        map_s(7, "nodeSelector"),
        s(8, "serviceAccountName"),
        s(9, "serviceAccount"),
        b_p(21, "automountServiceAccountToken"),
        s(10, "nodeName"),
        b_o(11, "hostNetwork"),
        b_o(12, "hostPID"),
        b_o(13, "hostIPC"),
        b_p(27, "shareProcessNamespace"),
        msg_p(14, "securityContext", &POD_SECURITY_CONTEXT),
        msgs(15, "imagePullSecrets", &LOCAL_OBJECT_REFERENCE),
        s(16, "hostname"),
        s(17, "subdomain"),
        // affinity (18) is skipped.
        s(19, "schedulerName"),
        msgs(22, "tolerations", &TOLERATION),
        s(24, "priorityClassName"),
        i32_p(25, "priority"),
        s_ptr(29, "runtimeClassName"),
        b_p(30, "enableServiceLinks"),
        s_ptr(31, "preemptionPolicy"),
        b_p(35, "setHostnameAsFQDN"),
        msg_p(36, "os", &POD_OS),
        b_p(37, "hostUsers"),
    ],
};

static POD_OS: Msg = Msg {
    name: "PodOS",
    fields: &[s_req(1, "name")],
};

static POD_SECURITY_CONTEXT: Msg = Msg {
    name: "PodSecurityContext",
    fields: &[
        i64_p(2, "runAsUser"),
        i64_p(6, "runAsGroup"),
        b_p(3, "runAsNonRoot"),
        i64s(4, "supplementalGroups"),
        i64_p(5, "fsGroup"),
        msgs(7, "sysctls", &SYSCTL),
        s_ptr(9, "fsGroupChangePolicy"),
        msg_p(10, "seccompProfile", &SECCOMP_PROFILE),
    ],
};

static SYSCTL: Msg = Msg {
    name: "Sysctl",
    fields: &[s_req(1, "name"), s_req(2, "value")],
};

static SECCOMP_PROFILE: Msg = Msg {
    name: "SeccompProfile",
    fields: &[s_req(1, "type"), s_ptr(2, "localhostProfile")],
};

static TOLERATION: Msg = Msg {
    name: "Toleration",
    fields: &[
        s(1, "key"),
        s(2, "operator"),
        s(3, "value"),
        s(4, "effect"),
        i64_p(5, "tolerationSeconds"),
    ],
};

static CONTAINER: Msg = Msg {
    name: "Container",
    fields: &[
        s_req(1, "name"),
        s(2, "image"),
        strs(3, "command"),
        strs(4, "args"),
        s(5, "workingDir"),
        msgs(6, "ports", &CONTAINER_PORT),
        msgs(19, "envFrom", &ENV_FROM_SOURCE),
        msgs(7, "env", &ENV_VAR),
        msg(8, "resources", &RESOURCE_REQUIREMENTS),
        msgs(9, "volumeMounts", &VOLUME_MOUNT),
        // probes (10, 11, 22) and lifecycle (12) are skipped.
        s(13, "terminationMessagePath"),
        s(20, "terminationMessagePolicy"),
        s(14, "imagePullPolicy"),
        msg_p(15, "securityContext", &SECURITY_CONTEXT),
        b_o(16, "stdin"),
        b_o(17, "stdinOnce"),
        b_o(18, "tty"),
    ],
};

static CONTAINER_PORT: Msg = Msg {
    name: "ContainerPort",
    fields: &[
        s(1, "name"),
        i32_o(2, "hostPort"),
        i32_r(3, "containerPort"),
        s(4, "protocol"),
        s(5, "hostIP"),
    ],
};

static ENV_VAR: Msg = Msg {
    name: "EnvVar",
    fields: &[
        s_req(1, "name"),
        s(2, "value"),
        msg_p(3, "valueFrom", &ENV_VAR_SOURCE),
    ],
};

static ENV_VAR_SOURCE: Msg = Msg {
    name: "EnvVarSource",
    fields: &[
        msg_p(1, "fieldRef", &OBJECT_FIELD_SELECTOR),
        msg_p(2, "resourceFieldRef", &RESOURCE_FIELD_SELECTOR),
        msg_p(3, "configMapKeyRef", &KEY_SELECTOR),
        msg_p(4, "secretKeyRef", &KEY_SELECTOR),
    ],
};

static OBJECT_FIELD_SELECTOR: Msg = Msg {
    name: "ObjectFieldSelector",
    fields: &[s(1, "apiVersion"), s_req(2, "fieldPath")],
};

static RESOURCE_FIELD_SELECTOR: Msg = Msg {
    name: "ResourceFieldSelector",
    fields: &[
        s(1, "containerName"),
        s_req(2, "resource"),
        quantity(3, "divisor"),
    ],
};

/// `ConfigMapKeySelector` and `SecretKeySelector`.
static KEY_SELECTOR: Msg = Msg {
    name: "KeySelector",
    fields: &[
        inline(1, &LOCAL_OBJECT_REFERENCE),
        s_req(2, "key"),
        b_p(3, "optional"),
    ],
};

static ENV_FROM_SOURCE: Msg = Msg {
    name: "EnvFromSource",
    fields: &[
        s(1, "prefix"),
        msg_p(2, "configMapRef", &ENV_SOURCE),
        msg_p(3, "secretRef", &ENV_SOURCE),
    ],
};

/// `ConfigMapEnvSource` and `SecretEnvSource`.
static ENV_SOURCE: Msg = Msg {
    name: "EnvSource",
    fields: &[inline(1, &LOCAL_OBJECT_REFERENCE), b_p(2, "optional")],
};

static RESOURCE_REQUIREMENTS: Msg = Msg {
    name: "ResourceRequirements",
    fields: &[
        map_q(1, "limits"),
        map_q(2, "requests"),
        msgs(3, "claims", &RESOURCE_CLAIM),
    ],
};

static RESOURCE_CLAIM: Msg = Msg {
    name: "ResourceClaim",
    fields: &[s_req(1, "name"), s(2, "request")],
};

static VOLUME_MOUNT: Msg = Msg {
    name: "VolumeMount",
    fields: &[
        s_req(1, "name"),
        b_o(2, "readOnly"),
        s_ptr(7, "recursiveReadOnly"),
        s_req(3, "mountPath"),
        s(4, "subPath"),
        s_ptr(5, "mountPropagation"),
        s(6, "subPathExpr"),
    ],
};

static SECURITY_CONTEXT: Msg = Msg {
    name: "SecurityContext",
    fields: &[
        msg_p(1, "capabilities", &CAPABILITIES),
        b_p(2, "privileged"),
        i64_p(4, "runAsUser"),
        i64_p(8, "runAsGroup"),
        b_p(5, "runAsNonRoot"),
        b_p(6, "readOnlyRootFilesystem"),
        b_p(7, "allowPrivilegeEscalation"),
        s_ptr(9, "procMount"),
        msg_p(11, "seccompProfile", &SECCOMP_PROFILE),
    ],
};

static CAPABILITIES: Msg = Msg {
    name: "Capabilities",
    fields: &[strs(1, "add"), strs(2, "drop")],
};

/// A volume with the common sources; other sources are skipped.
static VOLUME: Msg = Msg {
    name: "Volume",
    fields: &[s_req(1, "name"), inline(2, &VOLUME_SOURCE)],
};

static VOLUME_SOURCE: Msg = Msg {
    name: "VolumeSource",
    fields: &[
        msg_p(1, "hostPath", &HOST_PATH_VOLUME_SOURCE),
        msg_p(2, "emptyDir", &EMPTY_DIR_VOLUME_SOURCE),
        msg_p(6, "secret", &SECRET_VOLUME_SOURCE),
        msg_p(10, "persistentVolumeClaim", &PVC_VOLUME_SOURCE),
        msg_p(19, "configMap", &CONFIG_MAP_VOLUME_SOURCE),
    ],
};

static HOST_PATH_VOLUME_SOURCE: Msg = Msg {
    name: "HostPathVolumeSource",
    fields: &[s_req(1, "path"), s_ptr(2, "type")],
};

static EMPTY_DIR_VOLUME_SOURCE: Msg = Msg {
    name: "EmptyDirVolumeSource",
    fields: &[s(1, "medium"), quantity(2, "sizeLimit")],
};

static SECRET_VOLUME_SOURCE: Msg = Msg {
    name: "SecretVolumeSource",
    fields: &[
        s(1, "secretName"),
        msgs(2, "items", &KEY_TO_PATH),
        i32_p(3, "defaultMode"),
        b_p(4, "optional"),
    ],
};

static CONFIG_MAP_VOLUME_SOURCE: Msg = Msg {
    name: "ConfigMapVolumeSource",
    fields: &[
        inline(1, &LOCAL_OBJECT_REFERENCE),
        msgs(2, "items", &KEY_TO_PATH),
        i32_p(3, "defaultMode"),
        b_p(4, "optional"),
    ],
};

static KEY_TO_PATH: Msg = Msg {
    name: "KeyToPath",
    fields: &[s_req(1, "key"), s_req(2, "path"), i32_p(3, "mode")],
};

static PVC_VOLUME_SOURCE: Msg = Msg {
    name: "PersistentVolumeClaimVolumeSource",
    fields: &[s_req(1, "claimName"), b_o(2, "readOnly")],
};

static RESOURCE_QUOTA: Msg = Msg {
    name: "ResourceQuota",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &RESOURCE_QUOTA_SPEC),
        msg(3, "status", &RESOURCE_QUOTA_STATUS),
    ],
};

static RESOURCE_QUOTA_SPEC: Msg = Msg {
    name: "ResourceQuotaSpec",
    fields: &[
        map_q(1, "hard"),
        strs(2, "scopes"),
        msg_p(3, "scopeSelector", &SCOPE_SELECTOR),
    ],
};

static SCOPE_SELECTOR: Msg = Msg {
    name: "ScopeSelector",
    fields: &[msgs(
        1,
        "matchExpressions",
        &SCOPED_RESOURCE_SELECTOR_REQUIREMENT,
    )],
};

static SCOPED_RESOURCE_SELECTOR_REQUIREMENT: Msg = Msg {
    name: "ScopedResourceSelectorRequirement",
    fields: &[
        s_req(1, "scopeName"),
        s_req(2, "operator"),
        strs(3, "values"),
    ],
};

static RESOURCE_QUOTA_STATUS: Msg = Msg {
    name: "ResourceQuotaStatus",
    fields: &[map_q(1, "hard"), map_q(2, "used")],
};

// --- apps/v1 ---

static DEPLOYMENT: Msg = Msg {
    name: "Deployment",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &DEPLOYMENT_SPEC),
        msg(3, "status", &DEPLOYMENT_STATUS),
    ],
};

static DEPLOYMENT_SPEC: Msg = Msg {
    name: "DeploymentSpec",
    fields: &[
        i32_p(1, "replicas"),
        msg_p(2, "selector", &LABEL_SELECTOR),
        msg(3, "template", &POD_TEMPLATE_SPEC),
        msg(4, "strategy", &DEPLOYMENT_STRATEGY),
        i32_o(5, "minReadySeconds"),
        i32_p(6, "revisionHistoryLimit"),
        b_o(7, "paused"),
        i32_p(9, "progressDeadlineSeconds"),
        s_ptr(10, "podReplacementPolicy"),
    ],
};

static DEPLOYMENT_STRATEGY: Msg = Msg {
    name: "DeploymentStrategy",
    fields: &[
        s(1, "type"),
        msg_p(2, "rollingUpdate", &ROLLING_UPDATE_DEPLOYMENT),
    ],
};

static ROLLING_UPDATE_DEPLOYMENT: Msg = Msg {
    name: "RollingUpdateDeployment",
    fields: &[
        int_or_string(1, "maxUnavailable"),
        int_or_string(2, "maxSurge"),
    ],
};

static DEPLOYMENT_STATUS: Msg = Msg {
    name: "DeploymentStatus",
    fields: &[
        i64_o(1, "observedGeneration"),
        i32_o(2, "replicas"),
        i32_o(3, "updatedReplicas"),
        i32_o(7, "readyReplicas"),
        i32_o(4, "availableReplicas"),
        i32_o(5, "unavailableReplicas"),
        i32_p(9, "terminatingReplicas"),
        msgs(6, "conditions", &DEPLOYMENT_CONDITION),
        i32_p(8, "collisionCount"),
    ],
};

static DEPLOYMENT_CONDITION: Msg = Msg {
    name: "DeploymentCondition",
    fields: &[
        s_req(1, "type"),
        s_req(2, "status"),
        time(6, "lastUpdateTime"),
        time(7, "lastTransitionTime"),
        s(4, "reason"),
        s(5, "message"),
    ],
};

static REPLICA_SET: Msg = Msg {
    name: "ReplicaSet",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &REPLICA_SET_SPEC),
        msg(3, "status", &REPLICA_SET_STATUS),
    ],
};

static REPLICA_SET_SPEC: Msg = Msg {
    name: "ReplicaSetSpec",
    fields: &[
        i32_p(1, "replicas"),
        i32_o(4, "minReadySeconds"),
        msg_p(2, "selector", &LABEL_SELECTOR),
        msg(3, "template", &POD_TEMPLATE_SPEC),
    ],
};

static REPLICA_SET_STATUS: Msg = Msg {
    name: "ReplicaSetStatus",
    fields: &[
        i32_r(1, "replicas"),
        i32_o(2, "fullyLabeledReplicas"),
        i32_o(4, "readyReplicas"),
        i32_o(5, "availableReplicas"),
        i32_p(7, "terminatingReplicas"),
        i64_o(3, "observedGeneration"),
        msgs(6, "conditions", &REPLICA_SET_CONDITION),
    ],
};

static REPLICA_SET_CONDITION: Msg = Msg {
    name: "ReplicaSetCondition",
    fields: &[
        s_req(1, "type"),
        s_req(2, "status"),
        time(3, "lastTransitionTime"),
        s(4, "reason"),
        s(5, "message"),
    ],
};

// --- batch/v1 ---

static JOB: Msg = Msg {
    name: "Job",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &JOB_SPEC),
        msg(3, "status", &JOB_STATUS),
    ],
};

static JOB_SPEC: Msg = Msg {
    name: "JobSpec",
    fields: &[
        i32_p(1, "parallelism"),
        i32_p(2, "completions"),
        i64_p(3, "activeDeadlineSeconds"),
        // podFailurePolicy (11) and successPolicy (16) are skipped.
        i32_p(7, "backoffLimit"),
        i32_p(12, "backoffLimitPerIndex"),
        i32_p(13, "maxFailedIndexes"),
        msg_p(4, "selector", &LABEL_SELECTOR),
        b_p(5, "manualSelector"),
        msg(6, "template", &POD_TEMPLATE_SPEC),
        i32_p(8, "ttlSecondsAfterFinished"),
        s_ptr(9, "completionMode"),
        b_p(10, "suspend"),
        s_ptr(14, "podReplacementPolicy"),
        s_ptr(15, "managedBy"),
    ],
};

static JOB_STATUS: Msg = Msg {
    name: "JobStatus",
    fields: &[
        msgs(1, "conditions", &JOB_CONDITION),
        time(2, "startTime"),
        time(3, "completionTime"),
        i32_o(4, "active"),
        i32_o(5, "succeeded"),
        i32_o(6, "failed"),
        i32_p(11, "terminating"),
        s(7, "completedIndexes"),
        s_ptr(10, "failedIndexes"),
        i32_p(9, "ready"),
    ],
};

static JOB_CONDITION: Msg = Msg {
    name: "JobCondition",
    fields: &[
        s_req(1, "type"),
        s_req(2, "status"),
        time(3, "lastProbeTime"),
        time(4, "lastTransitionTime"),
        s(5, "reason"),
        s(6, "message"),
    ],
};

static CRON_JOB: Msg = Msg {
    name: "CronJob",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &CRON_JOB_SPEC),
        msg(3, "status", &CRON_JOB_STATUS),
    ],
};

static CRON_JOB_SPEC: Msg = Msg {
    name: "CronJobSpec",
    fields: &[
        s_req(1, "schedule"),
        s_ptr(8, "timeZone"),
        i64_p(2, "startingDeadlineSeconds"),
        s(3, "concurrencyPolicy"),
        b_p(4, "suspend"),
        msg(5, "jobTemplate", &JOB_TEMPLATE_SPEC),
        i32_p(6, "successfulJobsHistoryLimit"),
        i32_p(7, "failedJobsHistoryLimit"),
    ],
};

static JOB_TEMPLATE_SPEC: Msg = Msg {
    name: "JobTemplateSpec",
    fields: &[msg(1, "metadata", &OBJECT_META), msg(2, "spec", &JOB_SPEC)],
};

static CRON_JOB_STATUS: Msg = Msg {
    name: "CronJobStatus",
    fields: &[
        msgs(1, "active", &OBJECT_REFERENCE),
        time(4, "lastScheduleTime"),
        time(5, "lastSuccessfulTime"),
    ],
};

// --- rbac.authorization.k8s.io/v1 ---

static ROLE: Msg = Msg {
    name: "Role",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msgs(2, "rules", &POLICY_RULE),
    ],
};

static CLUSTER_ROLE: Msg = Msg {
    name: "ClusterRole",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msgs(2, "rules", &POLICY_RULE),
        msg_p(3, "aggregationRule", &AGGREGATION_RULE),
    ],
};

static POLICY_RULE: Msg = Msg {
    name: "PolicyRule",
    fields: &[
        strs(1, "verbs"),
        strs(2, "apiGroups"),
        strs(3, "resources"),
        strs(4, "resourceNames"),
        strs(5, "nonResourceURLs"),
    ],
};

static AGGREGATION_RULE: Msg = Msg {
    name: "AggregationRule",
    fields: &[msgs(1, "clusterRoleSelectors", &LABEL_SELECTOR)],
};

/// `RoleBinding` and `ClusterRoleBinding`.
static ROLE_BINDING: Msg = Msg {
    name: "RoleBinding",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msgs(2, "subjects", &SUBJECT),
        msg(3, "roleRef", &ROLE_REF),
    ],
};

static SUBJECT: Msg = Msg {
    name: "Subject",
    fields: &[
        s_req(1, "kind"),
        s(2, "apiGroup"),
        s_req(3, "name"),
        s(4, "namespace"),
    ],
};

static ROLE_REF: Msg = Msg {
    name: "RoleRef",
    fields: &[s_req(1, "apiGroup"), s_req(2, "kind"), s_req(3, "name")],
};

// --- authorization.k8s.io/v1 ---

static SELF_SUBJECT_ACCESS_REVIEW: Msg = Msg {
    name: "SelfSubjectAccessReview",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &SELF_SUBJECT_ACCESS_REVIEW_SPEC),
        msg(3, "status", &SUBJECT_ACCESS_REVIEW_STATUS),
    ],
};

/// `kubectl auth whoami` sends only metadata; the status is the server's answer (skipped).
static SELF_SUBJECT_REVIEW: Msg = Msg {
    name: "SelfSubjectReview",
    fields: &[msg(1, "metadata", &OBJECT_META)],
};

static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Msg = Msg {
    name: "SelfSubjectAccessReviewSpec",
    fields: &[
        msg_p(1, "resourceAttributes", &RESOURCE_ATTRIBUTES),
        msg_p(2, "nonResourceAttributes", &NON_RESOURCE_ATTRIBUTES),
    ],
};

static RESOURCE_ATTRIBUTES: Msg = Msg {
    name: "ResourceAttributes",
    fields: &[
        s(1, "namespace"),
        s(2, "verb"),
        s(3, "group"),
        s(4, "version"),
        s(5, "resource"),
        s(6, "subresource"),
        s(7, "name"),
        msg_p(8, "fieldSelector", &FIELD_SELECTOR_ATTRIBUTES),
        msg_p(9, "labelSelector", &LABEL_SELECTOR_ATTRIBUTES),
    ],
};

static FIELD_SELECTOR_ATTRIBUTES: Msg = Msg {
    name: "FieldSelectorAttributes",
    fields: &[
        s(1, "rawSelector"),
        msgs(2, "requirements", &FIELD_SELECTOR_REQUIREMENT),
    ],
};

static FIELD_SELECTOR_REQUIREMENT: Msg = Msg {
    name: "FieldSelectorRequirement",
    fields: &[s_req(1, "key"), s_req(2, "operator"), strs(3, "values")],
};

static LABEL_SELECTOR_ATTRIBUTES: Msg = Msg {
    name: "LabelSelectorAttributes",
    fields: &[
        s(1, "rawSelector"),
        msgs(2, "requirements", &LABEL_SELECTOR_REQUIREMENT),
    ],
};

static NON_RESOURCE_ATTRIBUTES: Msg = Msg {
    name: "NonResourceAttributes",
    fields: &[s(1, "path"), s(2, "verb")],
};

static SUBJECT_ACCESS_REVIEW_STATUS: Msg = Msg {
    name: "SubjectAccessReviewStatus",
    fields: &[
        b_r(1, "allowed"),
        b_o(4, "denied"),
        s(2, "reason"),
        s(3, "evaluationError"),
    ],
};

static SELF_SUBJECT_RULES_REVIEW: Msg = Msg {
    name: "SelfSubjectRulesReview",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &SELF_SUBJECT_RULES_REVIEW_SPEC),
        msg(3, "status", &SUBJECT_RULES_REVIEW_STATUS),
    ],
};

static SELF_SUBJECT_RULES_REVIEW_SPEC: Msg = Msg {
    name: "SelfSubjectRulesReviewSpec",
    fields: &[s(1, "namespace")],
};

static SUBJECT_RULES_REVIEW_STATUS: Msg = Msg {
    name: "SubjectRulesReviewStatus",
    fields: &[
        msgs(1, "resourceRules", &RESOURCE_RULE),
        msgs(2, "nonResourceRules", &NON_RESOURCE_RULE),
        b_r(3, "incomplete"),
        s(4, "evaluationError"),
    ],
};

static RESOURCE_RULE: Msg = Msg {
    name: "ResourceRule",
    fields: &[
        strs(1, "verbs"),
        strs(2, "apiGroups"),
        strs(3, "resources"),
        strs(4, "resourceNames"),
    ],
};

static NON_RESOURCE_RULE: Msg = Msg {
    name: "NonResourceRule",
    fields: &[strs(1, "verbs"), strs(2, "nonResourceURLs")],
};

// --- authentication.k8s.io/v1 ---

static TOKEN_REQUEST: Msg = Msg {
    name: "TokenRequest",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &TOKEN_REQUEST_SPEC),
        msg(3, "status", &TOKEN_REQUEST_STATUS),
    ],
};

static TOKEN_REQUEST_SPEC: Msg = Msg {
    name: "TokenRequestSpec",
    fields: &[
        strs(1, "audiences"),
        i64_p(4, "expirationSeconds"),
        msg_p(3, "boundObjectRef", &BOUND_OBJECT_REFERENCE),
    ],
};

static BOUND_OBJECT_REFERENCE: Msg = Msg {
    name: "BoundObjectReference",
    fields: &[s(1, "kind"), s(2, "apiVersion"), s(3, "name"), s(4, "uid")],
};

static TOKEN_REQUEST_STATUS: Msg = Msg {
    name: "TokenRequestStatus",
    fields: &[s_req(1, "token"), time(2, "expirationTimestamp")],
};

// --- scheduling.k8s.io/v1, coordination.k8s.io/v1, policy/v1 ---

static PRIORITY_CLASS: Msg = Msg {
    name: "PriorityClass",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        i32_r(2, "value"),
        b_o(3, "globalDefault"),
        s(4, "description"),
        s_ptr(5, "preemptionPolicy"),
    ],
};

static LEASE: Msg = Msg {
    name: "Lease",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &LEASE_SPEC),
    ],
};

static LEASE_SPEC: Msg = Msg {
    name: "LeaseSpec",
    fields: &[
        s_ptr(1, "holderIdentity"),
        i32_p(2, "leaseDurationSeconds"),
        micro_time(3, "acquireTime"),
        micro_time(4, "renewTime"),
        i32_p(5, "leaseTransitions"),
        s_ptr(6, "strategy"),
        s_ptr(7, "preferredHolder"),
    ],
};

static EVICTION: Msg = Msg {
    name: "Eviction",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg_p(2, "deleteOptions", &DELETE_OPTIONS),
    ],
};

/// The schema of a top-level kind.
fn schema_for(group: &str, version: &str, kind: &str) -> Option<&'static Msg> {
    let msg = match (group, version, kind) {
        ("", "v1", "Namespace") => &NAMESPACE,
        ("", "v1", "ConfigMap") => &CONFIG_MAP,
        ("", "v1", "Secret") => &SECRET,
        ("", "v1", "ServiceAccount") => &SERVICE_ACCOUNT,
        ("", "v1", "Service") => &SERVICE,
        ("", "v1", "Pod") => &POD,
        ("", "v1", "ResourceQuota") => &RESOURCE_QUOTA,
        ("", "v1", "Binding") => &BINDING,
        ("apps", "v1", "Deployment") => &DEPLOYMENT,
        ("apps", "v1", "ReplicaSet") => &REPLICA_SET,
        ("batch", "v1", "Job") => &JOB,
        ("batch", "v1", "CronJob") => &CRON_JOB,
        ("rbac.authorization.k8s.io", "v1", "Role") => &ROLE,
        ("rbac.authorization.k8s.io", "v1", "ClusterRole") => &CLUSTER_ROLE,
        ("rbac.authorization.k8s.io", "v1", "RoleBinding" | "ClusterRoleBinding") => &ROLE_BINDING,
        ("authorization.k8s.io", "v1", "SelfSubjectAccessReview") => &SELF_SUBJECT_ACCESS_REVIEW,
        ("authorization.k8s.io", "v1", "SelfSubjectRulesReview") => &SELF_SUBJECT_RULES_REVIEW,
        ("authentication.k8s.io", "v1", "TokenRequest") => &TOKEN_REQUEST,
        ("authentication.k8s.io", "v1", "SelfSubjectReview") => &SELF_SUBJECT_REVIEW,
        ("scheduling.k8s.io", "v1", "PriorityClass") => &PRIORITY_CLASS,
        ("coordination.k8s.io", "v1", "Lease") => &LEASE,
        ("policy", "v1", "Eviction") => &EVICTION,
        _ => return None,
    };
    Some(msg)
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
mod tests {
    use super::*;
    use serde_json::json;

    fn resource(kind: &str) -> &'static ResourceInfo {
        api::RESOURCES
            .iter()
            .find(|r| r.kind == kind)
            .expect("a served kind")
    }

    fn unhex(hex: &str) -> Vec<u8> {
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect()
    }

    /// Bodies kubectl 1.37 sent (captured from a stub server), with the JSON that
    /// `kubectl … --dry-run=client -o json` prints for the same command.
    const KUBECTL_BODIES: &[(&str, &str)] = &[
        // kubectl create namespace foo
        (
            "6b3873000a0f0a02763112094e616d657370616365121b0a130a03666f6f12001a0022002a0032003800420012001a020a001a002200",
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"foo"},"spec":{},"status":{}}"#,
        ),
        // kubectl create configmap x --from-literal=a=b
        (
            "6b3873000a0f0a0276311209436f6e6669674d617012220a180a017812001a0764656661756c7422002a0032003800420012060a01611201621a002200",
            r#"{"apiVersion":"v1","data":{"a":"b"},"kind":"ConfigMap","metadata":{"name":"x","namespace":"default"}}"#,
        ),
        // kubectl create secret generic s --from-literal=k=v
        (
            "6b3873000a0c0a027631120653656372657412240a180a017312001a0764656661756c7422002a0032003800420012060a016b1201761a001a002200",
            r#"{"apiVersion":"v1","data":{"k":"dg=="},"kind":"Secret","metadata":{"name":"s","namespace":"default"}}"#,
        ),
        // kubectl create serviceaccount sa1
        (
            "6b3873000a140a027631120e536572766963654163636f756e74121c0a1a0a0373613112001a0764656661756c7422002a003200380042001a002200",
            r#"{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"sa1","namespace":"default"}}"#,
        ),
        // kubectl create service clusterip svc1 --tcp=80:8080
        (
            "6b3873000a0d0a02763112075365727669636512730a280a047376633112001a0764656661756c7422002a003200380042005a0b0a0361707012047376633112430a1b0a0738302d38303830120354435018502207080010903f1a002800120b0a036170701204737663311a002209436c757374657249503a00420052005a00600068001a020a001a002200",
            r#"{"apiVersion":"v1","kind":"Service","metadata":{"labels":{"app":"svc1"},"name":"svc1","namespace":"default"},"spec":{"ports":[{"name":"80-8080","port":80,"protocol":"TCP","targetPort":8080}],"selector":{"app":"svc1"},"type":"ClusterIP"},"status":{"loadBalancer":{}}}"#,
        ),
        // kubectl create deployment web --image=nginx:1.27 --replicas=3 --port=80
        (
            "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412c4010a260a0377656212001a0764656661756c7422002a003200380042005a0a0a036170701203776562128b010803120c0a0a0a0361707012037765621a710a1c0a0012001a0022002a003200380042005a0a0a036170701203776562125112330a056e67696e78120a6e67696e783a312e32372a00320a0a001000185022002a0042006a007200800100880100900100a201001a00320042004a0052005800600068008201008a01009a0100c2010022020a00280038001a0c0800100018002000280038001a002200",
            r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"app":"web"},"name":"web","namespace":"default"},"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"strategy":{},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"image":"nginx:1.27","name":"nginx","ports":[{"containerPort":80}],"resources":{}}]}}},"status":{}}"#,
        ),
        // kubectl create job j --image=busybox -- echo hi
        (
            "6b3873000a0f0a0862617463682f763112034a6f621289010a180a016a12001a0764656661756c7422002a00320038004200126332610a100a0012001a0022002a00320038004200124d122a0a016a120762757379626f781a046563686f1a0268692a0042006a007200800100880100900100a201001a054e65766572320042004a0052005800600068008201008a01009a0100c201001a082000280030003a001a002200",
            r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j","namespace":"default"},"spec":{"template":{"metadata":{},"spec":{"containers":[{"command":["echo","hi"],"image":"busybox","name":"j","resources":{}}],"restartPolicy":"Never"}}},"status":{}}"#,
        ),
        // kubectl create cronjob cj --image=busybox --schedule='*/1 * * * *' -- date
        (
            "6b3873000a130a0862617463682f7631120743726f6e4a6f6212ab010a190a02636a12001a0764656661756c7422002a00320038004200128b010a0b2a2f31202a202a202a202a1a002a7a0a120a02636a12001a0022002a00320038004200126432620a100a0012001a0022002a00320038004200124e12270a02636a120762757379626f781a04646174652a0042006a007200800100880100900100a201001a094f6e4661696c757265320042004a0052005800600068008201008a01009a0100c201001a001a002200",
            r#"{"apiVersion":"batch/v1","kind":"CronJob","metadata":{"name":"cj","namespace":"default"},"spec":{"jobTemplate":{"metadata":{"name":"cj"},"spec":{"template":{"metadata":{},"spec":{"containers":[{"command":["date"],"image":"busybox","name":"cj","resources":{}}],"restartPolicy":"OnFailure"}}}},"schedule":"*/1 * * * *"},"status":{}}"#,
        ),
        // kubectl create quota q --hard=pods=2,cpu=1
        (
            "6b3873000a130a027631120d5265736f7572636551756f746112370a180a017112001a0764656661756c7422002a0032003800420012190a0a0a0363707512030a01310a0b0a04706f647312030a01321a001a002200",
            r#"{"apiVersion":"v1","kind":"ResourceQuota","metadata":{"name":"q","namespace":"default"},"spec":{"hard":{"cpu":"1","pods":"2"}},"status":{}}"#,
        ),
        // kubectl create rolebinding rb --role=r --user=bob
        (
            "6b3873000a2b0a1c726261632e617574686f72697a6174696f6e2e6b38732e696f2f7631120b526f6c6542696e64696e67126b0a190a02726212001a0764656661756c7422002a0032003800420012280a04557365721219726261632e617574686f72697a6174696f6e2e6b38732e696f1a03626f6222001a240a19726261632e617574686f72697a6174696f6e2e6b38732e696f1204526f6c651a01721a002200",
            r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"rb","namespace":"default"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"r"},"subjects":[{"apiGroup":"rbac.authorization.k8s.io","kind":"User","name":"bob"}]}"#,
        ),
        // kubectl create clusterrolebinding crb --clusterrole=cr --serviceaccount=default:sa1
        (
            "6b3873000a320a1c726261632e617574686f72697a6174696f6e2e6b38732e696f2f76311212436c7573746572526f6c6542696e64696e6712650a130a0363726212001a0022002a0032003800420012200a0e536572766963654163636f756e7412001a03736131220764656661756c741a2c0a19726261632e617574686f72697a6174696f6e2e6b38732e696f120b436c7573746572526f6c651a0263721a002200",
            r#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding","metadata":{"name":"crb"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"cr"},"subjects":[{"kind":"ServiceAccount","name":"sa1","namespace":"default"}]}"#,
        ),
        // kubectl create priorityclass pc --value=1000 --description=hi
        (
            "6b3873000a250a147363686564756c696e672e6b38732e696f2f7631120d5072696f72697479436c61737312330a120a02706312001a0022002a0032003800420010e8071800220268692a14507265656d70744c6f7765725072696f726974791a002200",
            r#"{"apiVersion":"scheduling.k8s.io/v1","description":"hi","kind":"PriorityClass","metadata":{"name":"pc"},"preemptionPolicy":"PreemptLowerPriority","value":1000}"#,
        ),
        // kubectl auth can-i get pods
        (
            "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a656374416363657373526576696577123c0a100a0012001a0022002a00320038004200121e0a1c0a0764656661756c7412036765741a0022002a04706f647332003a001a08080012001a0020001a002200",
            r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","metadata":{},"spec":{"resourceAttributes":{"namespace":"default","resource":"pods","verb":"get"}},"status":{"allowed":false}}"#,
        ),
    ];

    #[test]
    fn kubectl_bodies_decode_to_kubectls_json() {
        for (hex, expected) in KUBECTL_BODIES {
            let body = unhex(hex);
            let got = decode_request(resource("Namespace"), &body).expect("decodes");
            let expected: Value = serde_json::from_str(expected).expect("json");
            assert_eq!(got, expected, "{hex}");
        }
    }

    /// A tiny protobuf encoder for hand-made fixtures.
    #[derive(Default, Clone)]
    struct Enc(Vec<u8>);

    impl Enc {
        fn raw_varint(&mut self, mut v: u64) {
            while v >= 0x80 {
                self.0.push((v as u8) | 0x80);
                v >>= 7;
            }
            self.0.push(v as u8);
        }
        fn key(&mut self, num: u32, wire: u8) {
            self.raw_varint((u64::from(num) << 3) | u64::from(wire));
        }
        fn int(mut self, num: u32, v: i64) -> Enc {
            self.key(num, 0);
            self.raw_varint(v as u64);
            self
        }
        fn bytes(mut self, num: u32, b: &[u8]) -> Enc {
            self.key(num, 2);
            self.raw_varint(b.len() as u64);
            self.0.extend_from_slice(b);
            self
        }
        fn str(self, num: u32, s: &str) -> Enc {
            self.bytes(num, s.as_bytes())
        }
        fn msg(self, num: u32, m: Enc) -> Enc {
            self.bytes(num, &m.0)
        }
        /// A `map<string, string|bytes>` entry.
        fn entry(self, num: u32, k: &str, v: &[u8]) -> Enc {
            self.msg(num, Enc::default().str(1, k).bytes(2, v))
        }
        /// A `map<string, Quantity>` entry.
        fn quantity(self, num: u32, k: &str, q: &str) -> Enc {
            self.msg(
                num,
                Enc::default().str(1, k).msg(2, Enc::default().str(1, q)),
            )
        }
        fn fixed64(mut self, num: u32) -> Enc {
            self.key(num, 1);
            self.0.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
            self
        }
        fn fixed32(mut self, num: u32) -> Enc {
            self.key(num, 5);
            self.0.extend_from_slice(&[1, 2, 3, 4]);
            self
        }
    }

    fn envelope(api_version: &str, kind: &str, raw: Enc) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        let unknown = Enc::default()
            .msg(1, Enc::default().str(1, api_version).str(2, kind))
            .msg(2, raw)
            .str(3, "")
            .str(4, "");
        out.extend_from_slice(&unknown.0);
        out
    }

    /// ObjectMeta as gogo-protobuf writes it: every non-pointer field, zero or not.
    fn meta(name: &str, namespace: &str) -> Enc {
        Enc::default()
            .str(1, name)
            .str(2, "")
            .str(3, namespace)
            .str(4, "")
            .str(5, "")
            .str(6, "")
            .int(7, 0)
            .msg(8, Enc::default())
    }

    #[test]
    fn namespace() {
        let ns = Enc::default()
            .msg(
                1,
                meta("foo", "")
                    .entry(11, "team", b"a")
                    .entry(12, "note", b""),
            )
            .msg(2, Enc::default().str(1, "kubernetes"))
            .msg(3, Enc::default().str(1, ""));
        let got = decode_request(resource("Namespace"), &envelope("v1", "Namespace", ns)).unwrap();
        assert_eq!(
            got,
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "foo", "labels": {"team": "a"}, "annotations": {"note": ""}},
                "spec": {"finalizers": ["kubernetes"]},
                "status": {}
            })
        );
    }

    #[test]
    fn deployment() {
        let container = Enc::default()
            .str(1, "web")
            .str(2, "nginx:1.27")
            .str(3, "nginx")
            .str(3, "-g")
            .str(4, "daemon off;")
            .str(5, "")
            .msg(
                6,
                Enc::default()
                    .str(1, "http")
                    .int(2, 0)
                    .int(3, 80)
                    .str(4, "TCP")
                    .str(5, ""),
            )
            .msg(
                6,
                Enc::default()
                    .str(1, "")
                    .int(2, 0)
                    .int(3, 443)
                    .str(4, "")
                    .str(5, ""),
            )
            .msg(7, Enc::default().str(1, "MODE").str(2, "prod"))
            .msg(7, Enc::default().str(1, "EMPTY").str(2, ""))
            .msg(
                8,
                Enc::default()
                    .quantity(1, "cpu", "500m")
                    .quantity(1, "memory", "128Mi")
                    .quantity(2, "cpu", "250m"),
            )
            .msg(
                9,
                Enc::default()
                    .str(1, "data")
                    .int(2, 1)
                    .str(3, "/data")
                    .str(4, ""),
            )
            .str(13, "")
            .str(20, "")
            .str(14, "IfNotPresent")
            .int(16, 0)
            .int(17, 0)
            .int(18, 0);
        let pod_spec = Enc::default()
            .msg(2, container)
            .str(3, "Always")
            .int(4, 30)
            .str(6, "ClusterFirst")
            .entry(7, "disk", b"ssd")
            .str(8, "builder")
            .msg(14, Enc::default())
            .str(19, "default-scheduler")
            .int(11, 0);
        let selector = Enc::default().entry(1, "app", b"web").msg(
            2,
            Enc::default()
                .str(1, "tier")
                .str(2, "In")
                .str(3, "front")
                .str(3, "edge"),
        );
        let strategy = Enc::default().str(1, "RollingUpdate").msg(
            2,
            Enc::default()
                .msg(1, Enc::default().int(1, 0).int(2, 1).str(3, ""))
                .msg(2, Enc::default().int(1, 1).int(2, 0).str(3, "25%")),
        );
        let spec = Enc::default()
            .int(1, 0)
            .msg(2, selector)
            .msg(
                3,
                Enc::default()
                    .msg(1, meta("", "").entry(11, "app", b"web"))
                    .msg(2, pod_spec),
            )
            .msg(4, strategy)
            .int(5, 0)
            .int(6, 10)
            .int(7, 0)
            .int(9, 600);
        let deployment = Enc::default()
            .msg(1, meta("web", "default"))
            .msg(2, spec)
            .msg(3, Enc::default().int(1, 0).int(2, 0));
        let got = decode_request(
            resource("Deployment"),
            &envelope("apps/v1", "Deployment", deployment),
        )
        .unwrap();
        assert_eq!(
            got,
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {
                    "replicas": 0,
                    "selector": {
                        "matchLabels": {"app": "web"},
                        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front", "edge"]}]
                    },
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {
                            "containers": [{
                                "name": "web",
                                "image": "nginx:1.27",
                                "command": ["nginx", "-g"],
                                "args": ["daemon off;"],
                                "ports": [
                                    {"name": "http", "containerPort": 80, "protocol": "TCP"},
                                    {"containerPort": 443}
                                ],
                                "env": [{"name": "MODE", "value": "prod"}, {"name": "EMPTY"}],
                                "resources": {
                                    "limits": {"cpu": "500m", "memory": "128Mi"},
                                    "requests": {"cpu": "250m"}
                                },
                                "volumeMounts": [{"name": "data", "readOnly": true, "mountPath": "/data"}],
                                "imagePullPolicy": "IfNotPresent"
                            }],
                            "restartPolicy": "Always",
                            "terminationGracePeriodSeconds": 30,
                            "dnsPolicy": "ClusterFirst",
                            "nodeSelector": {"disk": "ssd"},
                            "serviceAccountName": "builder",
                            "securityContext": {},
                            "schedulerName": "default-scheduler"
                        }
                    },
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}
                    },
                    "revisionHistoryLimit": 10,
                    "progressDeadlineSeconds": 600
                },
                "status": {}
            })
        );
    }

    #[test]
    fn secret_bytes_are_base64() {
        let secret = Enc::default()
            .msg(1, meta("s", "default"))
            .int(5, 0)
            .entry(2, "bin", &[0, 1, 2, 0xff, 0xfe])
            .entry(2, "one", b"a")
            .entry(2, "two", b"ab")
            .entry(2, "empty", b"")
            .entry(4, "plain", b"text")
            .str(3, "Opaque");
        let got = decode_request(resource("Secret"), &envelope("v1", "Secret", secret)).unwrap();
        assert_eq!(
            got,
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "s", "namespace": "default"},
                "immutable": false,
                "data": {"bin": "AAEC//4=", "one": "YQ==", "two": "YWI=", "empty": ""},
                "stringData": {"plain": "text"},
                "type": "Opaque"
            })
        );
    }

    #[test]
    fn scalars_times_and_negative_ints() {
        // A Lease: pointer fields, MicroTime, negative int32.
        let lease = Enc::default().msg(1, meta("l", "kube-system")).msg(
            2,
            Enc::default()
                .str(1, "node-a")
                .int(2, -5)
                .msg(3, Enc::default().int(1, 1_700_000_000).int(2, 123_456_789))
                .msg(4, Enc::default())
                .int(5, 0),
        );
        let got = decode_request(
            resource("Lease"),
            &envelope("coordination.k8s.io/v1", "Lease", lease),
        )
        .unwrap();
        assert_eq!(
            got["spec"],
            json!({
                "holderIdentity": "node-a",
                "leaseDurationSeconds": -5,
                "acquireTime": "2023-11-14T22:13:20.123456Z",
                "leaseTransitions": 0
            })
        );
        // metav1.Time keeps whole seconds.
        let meta = Enc::default()
            .str(1, "x")
            .msg(8, Enc::default().int(1, 1_700_000_000).int(2, 5));
        let got = decode_request(
            resource("ConfigMap"),
            &envelope("v1", "ConfigMap", Enc::default().msg(1, meta)),
        )
        .unwrap();
        assert_eq!(got["metadata"]["creationTimestamp"], "2023-11-14T22:13:20Z");
    }

    #[test]
    fn unknown_fields_of_every_wire_type_are_skipped() {
        let ns = Enc::default()
            .int(99, 7)
            .fixed64(98)
            .fixed32(97)
            .str(96, "later")
            .msg(
                1,
                meta("foo", "").int(1000, 1).fixed32(17).str(17, "managed"),
            );
        let got = decode_request(resource("Namespace"), &envelope("v1", "Namespace", ns)).unwrap();
        assert_eq!(got["metadata"], json!({"name": "foo"}));
        assert_eq!(got["spec"], json!({}));
    }

    #[test]
    fn envelope_without_type_meta_uses_the_resource() {
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(
            &Enc::default()
                .msg(2, Enc::default().msg(1, meta("c", "d")))
                .0,
        );
        let got = decode_request(resource("ConfigMap"), &body).unwrap();
        assert_eq!(
            got,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "d"}})
        );
    }

    #[test]
    fn errors_name_the_message_and_field() {
        let ns = resource("Namespace");
        let err = decode_request(ns, b"{\"kind\":\"Namespace\"}").unwrap_err();
        assert!(
            matches!(err, ProtobufError::Malformed(ref m) if m.contains("magic")),
            "{err}"
        );

        let err = decode_request(ns, &envelope("v1", "Widget", Enc::default())).unwrap_err();
        assert!(
            matches!(err, ProtobufError::Unsupported(ref m) if m.contains("Widget")),
            "{err}"
        );

        // A container image given as a varint.
        let pod = Enc::default().msg(
            2,
            Enc::default().msg(2, Enc::default().str(1, "c").int(2, 5)),
        );
        let err = decode_request(ns, &envelope("v1", "Pod", pod)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "malformed protobuf in Container.image: expected a string"
        );

        // A length far past the end of the body: an error, no allocation.
        let mut meta = Enc::default();
        meta.key(1, 2);
        meta.raw_varint(u64::MAX >> 2);
        let err = decode_request(
            ns,
            &envelope("v1", "Namespace", Enc::default().bytes(1, &meta.0)),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "malformed protobuf in ObjectMeta.name: length runs past the end of the message"
        );

        // Field number zero, groups, an overlong varint.
        for raw in [
            vec![0x02, 0x00],
            vec![0x0b],
            vec![
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
            ],
        ] {
            let err = decode_request(ns, &envelope("v1", "Namespace", Enc(raw))).unwrap_err();
            assert!(
                matches!(err, ProtobufError::Malformed(ref m) if m.contains("Namespace")),
                "{err}"
            );
        }

        let mut gzip = MAGIC.to_vec();
        gzip.extend_from_slice(&Enc::default().str(3, "gzip").0);
        assert!(matches!(
            decode_request(ns, &gzip),
            Err(ProtobufError::Unsupported(_))
        ));
    }

    #[test]
    fn truncated_and_corrupted_bodies_never_panic() {
        let ns = resource("Namespace");
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for (hex, _) in KUBECTL_BODIES {
            let body = unhex(hex);
            for end in 0..body.len() {
                let _ = decode_request(ns, &body[..end]);
            }
            for _ in 0..500 {
                let mut corrupt = body.clone();
                for _ in 0..3 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    let i = 4 + (seed as usize) % (corrupt.len() - 4);
                    corrupt[i] = (seed >> 32) as u8;
                }
                let _ = decode_request(ns, &corrupt);
            }
        }
    }

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"foob"), "Zm9vYg==");
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }
}
