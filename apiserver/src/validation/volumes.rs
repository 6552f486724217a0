//! PersistentVolumes, PersistentVolumeClaims and the storage.k8s.io kinds (StorageClass,
//! CSIDriver, CSINode, VolumeAttachment, CSIStorageCapacity), with the paths and messages of
//! Kubernetes' `ValidatePersistentVolume*` and `storage/validation`.

use serde_json::Value;

use api::names::{is_dns1123_subdomain, is_qualified_name};
use api::quantity::Quantity;

use super::policy::validate_label_selector;
use super::{
    field_of, list_of, map_of, semantic_eq, str_of, Bad, Cause, IMMUTABLE_MSG, NON_NEGATIVE_MSG,
};

const ACCESS_MODES: &[&str] = &[
    "ReadOnlyMany",
    "ReadWriteMany",
    "ReadWriteOnce",
    "ReadWriteOncePod",
];
const VOLUME_MODES: &[&str] = &["Block", "Filesystem"];
const POSITIVE_MSG: &str = "must be greater than zero";

/// The volume sources a PersistentVolume may name, in the order Kubernetes checks them.
const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "glusterfs",
    "flocker",
    "nfs",
    "rbd",
    "quobyte",
    "cinder",
    "cephfs",
    "iscsi",
    "fc",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "scaleIO",
    "local",
    "storageos",
    "csi",
];

/// Access modes: at least one, each known, ReadWriteOncePod alone.
fn validate_access_modes(spec: &Value, required_detail: &str, out: &mut Vec<Cause>) {
    let modes = list_of(spec, "accessModes");
    if modes.is_empty() {
        out.push(Cause::required("spec.accessModes", required_detail));
    }
    let mut pod_only = false;
    for mode in modes.iter().filter_map(Value::as_str) {
        if !ACCESS_MODES.contains(&mode) {
            out.push(Cause::not_supported("spec.accessModes", mode, ACCESS_MODES));
        }
        pod_only |= mode == "ReadWriteOncePod";
    }
    if pod_only && modes.len() > 1 {
        out.push(Cause::forbidden(
            "spec.accessModes",
            "may not use ReadWriteOncePod with other access modes",
        ));
    }
}

/// A storage class name, where one is given: a DNS subdomain.
fn validate_class_name(spec: &Value, field: &str, out: &mut Vec<Cause>) {
    if let Some(class) = str_of(spec, "storageClassName").filter(|c| !c.is_empty()) {
        for msg in is_dns1123_subdomain(class) {
            out.push(Cause::invalid(field, class, &msg));
        }
    }
}

fn validate_volume_mode(spec: &Value, out: &mut Vec<Cause>) {
    if let Some(mode) = str_of(spec, "volumeMode") {
        if !VOLUME_MODES.contains(&mode) {
            out.push(Cause::not_supported("spec.volumeMode", mode, VOLUME_MODES));
        }
    }
}

/// A quantity that must parse and be above zero.
fn validate_positive(value: &Value, field: &str, out: &mut Vec<Cause>) {
    let text = value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string);
    match Quantity::from_value(value) {
        Err(e) => out.push(Cause::invalid(field, &text, &e.detail())),
        Ok(q) if q.is_negative() || q.is_zero() => {
            out.push(Cause::invalid(field, q.canonical().as_str(), POSITIVE_MSG))
        }
        Ok(_) => {}
    }
}

/// `ValidatePersistentVolumeClaimSpec`.
pub(super) fn validate_claim(object: &Value, out: &mut Vec<Cause>) {
    let spec = field_of(object, "spec").unwrap_or(&Value::Null);
    validate_access_modes(spec, "at least 1 access mode is required", out);
    if let Some(selector) = field_of(spec, "selector").filter(|s| s.is_object()) {
        validate_label_selector(selector, "spec.selector", out);
    }
    match field_of(spec, "resources")
        .and_then(|r| map_of(r, "requests"))
        .and_then(|r| r.get("storage"))
    {
        None => out.push(Cause::required("spec.resources[storage]", "")),
        Some(storage) => validate_positive(storage, "spec.resources[storage]", out),
    }
    validate_class_name(spec, "spec.storageClassName", out);
    validate_volume_mode(spec, out);
}

/// The storage a claim requests (`spec.resources.requests.storage`).
fn requested_storage(claim: &Value) -> Option<Quantity> {
    claim
        .pointer("/spec/resources/requests/storage")
        .and_then(|q| Quantity::from_value(q).ok())
}

/// `ValidatePersistentVolumeClaimUpdate`: the spec is fixed but for the volume name (set once, by
/// the binder), a class set where there was none, and, for bound claims, the storage request —
/// which may not drop to the capacity it already has.
pub(super) fn validate_claim_update(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    let empty = Value::Null;
    let (old_spec, new_spec) = (
        field_of(old, "spec").unwrap_or(&empty),
        field_of(new, "spec").unwrap_or(&empty),
    );
    let mut old_cmp = old_spec.clone();
    let mut new_cmp = new_spec.clone();
    if str_of(old_spec, "volumeName")
        .unwrap_or_default()
        .is_empty()
    {
        old_cmp["volumeName"] = new_spec.get("volumeName").cloned().unwrap_or(Value::Null);
    }
    let beta_annotation = old
        .pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class")
        .is_some();
    if old_spec.get("storageClassName").is_none_or(Value::is_null) && !beta_annotation {
        old_cmp["storageClassName"] = new_spec
            .get("storageClassName")
            .cloned()
            .unwrap_or(Value::Null);
    }
    let bound = new.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
    if bound {
        let old_storage = old_spec.pointer("/resources/requests/storage").cloned();
        if let Some(requests) = new_cmp
            .pointer_mut("/resources/requests")
            .and_then(Value::as_object_mut)
        {
            match old_storage {
                Some(q) => requests.insert("storage".into(), q),
                None => requests.remove("storage"),
            };
        }
    }
    // VolumeAttributesClass changes are the modify controller's business.
    old_cmp["volumeAttributesClassName"] = Value::Null;
    new_cmp["volumeAttributesClassName"] = Value::Null;
    if !semantic_eq(Some(&old_cmp), Some(&new_cmp)) {
        out.push(Cause::forbidden(
            "spec",
            &format!(
                "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n{}",
                spec_diff("core.PersistentVolumeClaimSpec", &old_cmp, &new_cmp)
            ),
        ));
    }
    let (old_size, new_size) = (requested_storage(old), requested_storage(new));
    let capacity = old
        .pointer("/status/capacity/storage")
        .and_then(|q| Quantity::from_value(q).ok())
        .unwrap_or_else(Quantity::zero);
    if let (Some(old_size), Some(new_size)) = (old_size, new_size) {
        if new_size < old_size && new_size <= capacity {
            out.push(Cause::forbidden(
                "spec.resources.requests.storage",
                "field can not be less than status.capacity",
            ));
        }
    }
    immutable_mode(old_spec, new_spec, out);
}

/// `volumeMode` never changes (reported, as upstream does, without the `spec.` prefix).
fn immutable_mode(old_spec: &Value, new_spec: &Value, out: &mut Vec<Cause>) {
    let (a, b) = (
        field_of(old_spec, "volumeMode"),
        field_of(new_spec, "volumeMode"),
    );
    if a != b {
        let shown = b
            .and_then(Value::as_str)
            .map_or(Bad::Raw("null".into()), Bad::from);
        out.push(Cause::invalid("volumeMode", shown, IMMUTABLE_MSG));
    }
}

/// A compact rendering of what differs between two specs, one `-`/`+` pair per field, framed
/// as go-cmp frames a struct diff.
fn spec_diff(type_name: &str, old: &Value, new: &Value) -> String {
    let mut lines = vec![format!("  {type_name}{{")];
    let keys: std::collections::BTreeSet<&String> = old
        .as_object()
        .into_iter()
        .chain(new.as_object())
        .flat_map(|m| m.keys())
        .collect();
    for key in keys {
        let (a, b) = (old.get(key), new.get(key));
        if semantic_eq(a, b) {
            continue;
        }
        let render = |v: Option<&Value>| v.map_or_else(|| "nil".to_string(), Value::to_string);
        let field = go_field_name(key);
        lines.push(format!("- \t{field}: {},", render(a)));
        lines.push(format!("+ \t{field}: {},", render(b)));
    }
    lines.push("  }".into());
    lines.join("\n")
}

/// `accessModes` → `AccessModes`.
fn go_field_name(json_name: &str) -> String {
    let mut chars = json_name.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// `ValidatePersistentVolumeSpec`.
pub(super) fn validate_volume(object: &Value, out: &mut Vec<Cause>) {
    let spec = field_of(object, "spec").unwrap_or(&Value::Null);
    validate_access_modes(spec, "must specify at least 1 access mode", out);
    let capacity = map_of(spec, "capacity");
    if capacity.is_none_or(|c| c.is_empty()) {
        out.push(Cause::required("spec.capacity", ""));
    }
    if capacity.is_none_or(|c| !c.contains_key("storage") || c.len() > 1) {
        let shown = match capacity.filter(|c| !c.is_empty()) {
            None => "core.ResourceList(nil)".to_string(),
            Some(c) => {
                let entries: Vec<String> = c
                    .iter()
                    .map(|(k, v)| format!("{k:?}:{}", v.as_str().unwrap_or_default()))
                    .collect();
                format!("core.ResourceList{{{}}}", entries.join(", "))
            }
        };
        out.push(Cause::new(
            "FieldValueNotSupported",
            "spec.capacity",
            format!("Unsupported value: {shown}: supported values: \"storage\""),
        ));
    }
    for (name, quantity) in capacity.into_iter().flatten() {
        validate_positive(quantity, &format!("spec.capacity[{name}]"), out);
    }
    validate_class_name(spec, "spec.storageClassName", out);
    validate_volume_mode(spec, out);
    let policy = str_of(spec, "persistentVolumeReclaimPolicy").unwrap_or_default();
    if !policy.is_empty() && !["Delete", "Recycle", "Retain"].contains(&policy) {
        out.push(Cause::not_supported(
            "spec.persistentVolumeReclaimPolicy",
            policy,
            &["Delete", "Recycle", "Retain"],
        ));
    }
    let mut sources = 0;
    for source in VOLUME_SOURCES {
        let Some(value) = field_of(spec, source).filter(|v| !v.is_null()) else {
            continue;
        };
        let path = format!("spec.{source}");
        if sources > 0 {
            out.push(Cause::forbidden(
                &path,
                "may not specify more than 1 volume type",
            ));
            continue;
        }
        sources += 1;
        validate_source(source, value, &path, spec, out);
    }
    if sources == 0 {
        out.push(Cause::required("spec", "must specify a volume type"));
    }
    let root_host_path = spec
        .pointer("/hostPath/path")
        .and_then(Value::as_str)
        .is_some_and(|p| p.trim_end_matches('/').is_empty() && !p.is_empty());
    if root_host_path && policy == "Recycle" {
        out.push(Cause::forbidden(
            "spec.persistentVolumeReclaimPolicy",
            "may not be 'recycle' for a hostPath mount of '/'",
        ));
    }
}

/// The checks of the volume sources kemu's users name (host paths, local disks, NFS, CSI).
fn validate_source(source: &str, value: &Value, path: &str, spec: &Value, out: &mut Vec<Cause>) {
    let required = |key: &str, out: &mut Vec<Cause>| {
        if str_of(value, key).unwrap_or_default().is_empty() {
            out.push(Cause::required(&format!("{path}.{key}"), ""));
        }
    };
    match source {
        "hostPath" | "local" => {
            required("path", out);
            let p = str_of(value, "path").unwrap_or_default();
            if p.split('/').any(|part| part == "..") {
                out.push(Cause::invalid(
                    &format!("{path}.path"),
                    p,
                    "must not contain '..'",
                ));
            }
            let affinity = field_of(spec, "nodeAffinity").is_some_and(|a| !a.is_null());
            if source == "local" && !affinity {
                out.push(Cause::required(
                    "spec.nodeAffinity",
                    "Local volume requires node affinity",
                ));
            }
        }
        "nfs" => {
            required("server", out);
            required("path", out);
            let p = str_of(value, "path").unwrap_or_default();
            if !p.is_empty() && !p.starts_with('/') {
                out.push(Cause::invalid(
                    &format!("{path}.path"),
                    p,
                    "must be an absolute path",
                ));
            }
        }
        "csi" => {
            validate_driver_name(str_of(value, "driver"), &format!("{path}.driver"), out);
            required("volumeHandle", out);
        }
        _ => {}
    }
}

/// `ValidatePersistentVolumeUpdate`: the volume source and mode are fixed; node affinity, once
/// set, too.
pub(super) fn validate_volume_update(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    let empty = Value::Null;
    let (old_spec, new_spec) = (
        field_of(old, "spec").unwrap_or(&empty),
        field_of(new, "spec").unwrap_or(&empty),
    );
    let source = |spec: &Value| {
        let mut m = serde_json::Map::new();
        for key in VOLUME_SOURCES {
            if let Some(v) = field_of(spec, key) {
                m.insert((*key).to_string(), v.clone());
            }
        }
        Value::Object(m)
    };
    let (a, b) = (source(old_spec), source(new_spec));
    if !semantic_eq(Some(&a), Some(&b)) {
        out.push(Cause::forbidden(
            "spec.persistentvolumesource",
            &format!(
                "spec.persistentvolumesource is immutable after creation\n{}",
                spec_diff("core.PersistentVolumeSource", &a, &b)
            ),
        ));
    }
    immutable_mode(old_spec, new_spec, out);
    let old_affinity = field_of(old_spec, "nodeAffinity").filter(|a| !a.is_null());
    if let Some(old_affinity) = old_affinity {
        let new_affinity = field_of(new_spec, "nodeAffinity");
        if !semantic_eq(Some(old_affinity), new_affinity) {
            out.push(Cause::invalid(
                "nodeAffinity",
                Bad::Raw(new_affinity.map_or_else(|| "null".into(), Value::to_string)),
                IMMUTABLE_MSG,
            ));
        }
    }
}

/// `ValidateStorageClass`.
pub(super) fn validate_storage_class(class: &Value, out: &mut Vec<Cause>) {
    let provisioner = str_of(class, "provisioner").unwrap_or_default();
    if provisioner.is_empty() {
        out.push(Cause::required("provisioner", ""));
    } else {
        for msg in is_qualified_name(&provisioner.to_lowercase()) {
            out.push(Cause::invalid("provisioner", provisioner, &msg));
        }
    }
    let parameters = map_of(class, "parameters");
    if parameters.is_some_and(|p| p.len() > 512) {
        out.push(Cause::new(
            "FieldValueTooMany",
            "parameters",
            "Too many: must have at most 512 items".into(),
        ));
    }
    let size: usize = parameters
        .into_iter()
        .flatten()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    if size > 256 * 1024 {
        out.push(Cause::too_long("parameters", 256 * 1024));
    }
    if let Some(policy) = str_of(class, "reclaimPolicy").filter(|p| !p.is_empty()) {
        if !["Delete", "Retain"].contains(&policy) {
            out.push(Cause::not_supported(
                "reclaimPolicy",
                policy,
                &["Delete", "Retain"],
            ));
        }
    }
    let modes = &["Immediate", "WaitForFirstConsumer"];
    match str_of(class, "volumeBindingMode") {
        None => out.push(Cause::required("volumeBindingMode", "")),
        Some(mode) if !modes.contains(&mode) => {
            out.push(Cause::not_supported("volumeBindingMode", mode, modes))
        }
        Some(_) => {}
    }
    for (i, term) in list_of(class, "allowedTopologies").iter().enumerate() {
        let expressions = list_of(term, "matchLabelExpressions");
        let at = format!("allowedTopologies[{i}].matchLabelExpressions");
        if expressions.is_empty() {
            out.push(Cause::required(
                &at,
                "must have at least one label selector",
            ));
        }
        for (j, expr) in expressions.iter().enumerate() {
            let key = str_of(expr, "key").unwrap_or_default();
            for msg in is_qualified_name(key) {
                out.push(Cause::invalid(&format!("{at}[{j}].key"), key, &msg));
            }
            if list_of(expr, "values").is_empty() {
                out.push(Cause::required(
                    &format!("{at}[{j}].values"),
                    "must specify as least one value",
                ));
            }
        }
    }
}

/// `ValidateStorageClassUpdate`: parameters, provisioner, reclaim policy and binding mode are
/// fixed.
pub(super) fn validate_storage_class_update(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    if !semantic_eq(field_of(old, "parameters"), field_of(new, "parameters")) {
        out.push(Cause::forbidden(
            "parameters",
            "updates to parameters are forbidden.",
        ));
    }
    for key in ["provisioner", "reclaimPolicy"] {
        if str_of(old, key) != str_of(new, key) {
            out.push(Cause::forbidden(
                key,
                &format!("updates to {key} are forbidden."),
            ));
        }
    }
    let (a, b) = (
        str_of(old, "volumeBindingMode"),
        str_of(new, "volumeBindingMode"),
    );
    if a != b {
        out.push(Cause::invalid(
            "volumeBindingMode",
            b.unwrap_or_default(),
            IMMUTABLE_MSG,
        ));
    }
}

/// A CSI driver name: at most 63 characters, a DNS subdomain once lower-cased.
fn validate_driver_name(name: Option<&str>, field: &str, out: &mut Vec<Cause>) {
    let name = name.unwrap_or_default();
    if name.is_empty() {
        out.push(Cause::required(field, ""));
        return;
    }
    if name.len() > 63 {
        out.push(Cause::too_long(field, 63));
    }
    for msg in is_dns1123_subdomain(&name.to_lowercase()) {
        out.push(Cause::invalid(field, name, &msg));
    }
}

/// `ValidateCSIDriver`: the name is at most 63 characters; attachRequired, podInfoOnMount,
/// requiresRepublish and storageCapacity are set (defaulting sets them), modes are known.
pub(super) fn validate_csi_driver(driver: &Value, out: &mut Vec<Cause>) {
    if let Some(name) = driver.pointer("/metadata/name").and_then(Value::as_str) {
        if name.len() > 63 {
            out.push(Cause::too_long("metadata.name", 63));
        }
    }
    let spec = field_of(driver, "spec").unwrap_or(&Value::Null);
    for key in [
        "attachRequired",
        "podInfoOnMount",
        "requiresRepublish",
        "storageCapacity",
    ] {
        if field_of(spec, key).is_none_or(Value::is_null) {
            out.push(Cause::required(&format!("spec.{key}"), ""));
        }
    }
    let modes = &["Ephemeral", "Persistent"];
    for mode in list_of(spec, "volumeLifecycleModes")
        .iter()
        .filter_map(Value::as_str)
    {
        if !modes.contains(&mode) {
            out.push(Cause::not_supported(
                "spec.volumeLifecycleModes",
                mode,
                modes,
            ));
        }
    }
}

/// `ValidateCSIDriverUpdate`: what a node has already acted on does not change.
pub(super) fn validate_csi_driver_update(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    for key in [
        "attachRequired",
        "fsGroupPolicy",
        "podInfoOnMount",
        "volumeLifecycleModes",
    ] {
        let (a, b) = (
            old.pointer(&format!("/spec/{key}")),
            new.pointer(&format!("/spec/{key}")),
        );
        if !semantic_eq(a, b) {
            let shown = b.map_or_else(|| "null".to_string(), Value::to_string);
            out.push(Cause::invalid(
                &format!("spec.{key}"),
                Bad::Raw(shown),
                IMMUTABLE_MSG,
            ));
        }
    }
}

/// `ValidateCSINode`: each driver has a driver name and a node ID, once.
pub(super) fn validate_csi_node(node: &Value, out: &mut Vec<Cause>) {
    let mut seen = std::collections::BTreeSet::new();
    let drivers = node.pointer("/spec/drivers").and_then(Value::as_array);
    for (i, driver) in drivers.into_iter().flatten().enumerate() {
        let at = format!("spec.drivers[{i}]");
        let name = str_of(driver, "name");
        validate_driver_name(name, &format!("{at}.name"), out);
        if let Some(name) = name.filter(|n| !n.is_empty()) {
            if !seen.insert(name) {
                out.push(Cause::duplicate(&format!("{at}.name"), name));
            }
        }
        if str_of(driver, "nodeID").unwrap_or_default().is_empty() {
            out.push(Cause::required(&format!("{at}.nodeID"), ""));
        }
    }
}

/// `ValidateVolumeAttachment`: an attacher, exactly one source, a node.
pub(super) fn validate_volume_attachment(attachment: &Value, out: &mut Vec<Cause>) {
    let spec = field_of(attachment, "spec").unwrap_or(&Value::Null);
    if str_of(spec, "attacher").unwrap_or_default().is_empty() {
        out.push(Cause::required("spec.attacher", ""));
    }
    let source = field_of(spec, "source").unwrap_or(&Value::Null);
    let named = field_of(source, "persistentVolumeName").filter(|v| !v.is_null());
    let inline = field_of(source, "inlineVolumeSpec").filter(|v| !v.is_null());
    match (named, inline) {
        (Some(_), Some(_)) | (None, None) => out.push(Cause::required(
            "spec.source",
            "must specify exactly one of inlineVolumeSpec and persistentVolumeName",
        )),
        (Some(name), None) if name.as_str().is_some_and(str::is_empty) => {
            out.push(Cause::required(
                "spec.source.persistentVolumeName",
                "must specify non empty persistentVolumeName",
            ))
        }
        _ => {}
    }
    match str_of(spec, "nodeName").unwrap_or_default() {
        "" => out.push(Cause::required("spec.nodeName", "")),
        node => {
            for msg in is_dns1123_subdomain(node) {
                out.push(Cause::invalid("spec.nodeName", node, &msg));
            }
        }
    }
}

/// `ValidateVolumeAttachmentUpdate`: the spec never changes.
pub(super) fn validate_volume_attachment_update(old: &Value, new: &Value, out: &mut Vec<Cause>) {
    let (a, b) = (field_of(old, "spec"), field_of(new, "spec"));
    if !semantic_eq(a, b) {
        let shown = b.map_or_else(|| "null".to_string(), Value::to_string);
        out.push(Cause::invalid("spec", Bad::Raw(shown), IMMUTABLE_MSG));
    }
}

/// `ValidateCSIStorageCapacity`: a class name and non-negative sizes.
pub(super) fn validate_capacity(capacity: &Value, out: &mut Vec<Cause>) {
    match str_of(capacity, "storageClassName").unwrap_or_default() {
        "" => out.push(Cause::required("storageClassName", "")),
        _ => validate_class_name(capacity, "storageClassName", out),
    }
    for key in ["capacity", "maximumVolumeSize"] {
        if let Some(value) = field_of(capacity, key).filter(|v| !v.is_null()) {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_string);
            match Quantity::from_value(value) {
                Err(e) => out.push(Cause::invalid(key, &text, &e.detail())),
                Ok(q) if q.is_negative() => out.push(Cause::invalid(key, &text, NON_NEGATIVE_MSG)),
                Ok(_) => {}
            }
        }
    }
}
