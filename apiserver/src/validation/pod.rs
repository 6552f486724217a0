//! Pod specs: containers, ports, volumes, resources, tolerations, and what an update may change.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde_json::Value;

use api::names::{is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_port_name};
use api::quantity::Quantity;

use super::{
    field_of, int_of, join, list_of, map_of, non_negative, semantic_eq, str_of, validate_labels,
    Bad, Cause, NON_NEGATIVE_MSG, PORT_RANGE_MSG, PROTOCOLS, TAINT_EFFECTS,
};

const RESTART_POLICIES: &[&str] = &["Always", "OnFailure", "Never"];
const DNS_POLICIES: &[&str] = &["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"];
const PULL_POLICIES: &[&str] = &["Always", "IfNotPresent", "Never"];
const PROBES: &[&str] = &["livenessProbe", "readinessProbe", "startupProbe"];
const PROBE_HANDLERS: &[&str] = &["exec", "httpGet", "tcpSocket", "grpc"];

/// A pod spec at `path` (`spec`, or `spec.template.spec` in workloads).
pub(super) fn validate_pod_spec(spec: &Value, path: &str, out: &mut Vec<Cause>) {
    let volumes = validate_volumes(list_of(spec, "volumes"), &join(path, "volumes"), out);

    let containers = list_of(spec, "containers");
    if containers.is_empty() {
        out.push(Cause::required(&join(path, "containers"), ""));
    }
    let host_network = field_of(spec, "hostNetwork")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let mut names = HashSet::new();
    let mut host_ports = HashSet::new();
    for (list, key) in [
        (list_of(spec, "initContainers"), "initContainers"),
        (containers, "containers"),
    ] {
        for (i, container) in list.iter().enumerate() {
            let cpath = format!("{path}.{key}[{i}]");
            validate_container(container, &cpath, &volumes, &mut names, host_network, out);
            validate_host_ports(container, &cpath, &mut host_ports, out);
        }
    }

    if let Some(policy) = str_of(spec, "restartPolicy") {
        if !RESTART_POLICIES.contains(&policy) {
            out.push(Cause::not_supported(
                &join(path, "restartPolicy"),
                policy,
                RESTART_POLICIES,
            ));
        }
    }
    if let Some(policy) = str_of(spec, "dnsPolicy") {
        if !DNS_POLICIES.contains(&policy) {
            out.push(Cause::not_supported(
                &join(path, "dnsPolicy"),
                policy,
                DNS_POLICIES,
            ));
        } else if policy == "None" && field_of(spec, "dnsConfig").is_none_or(Value::is_null) {
            out.push(Cause::required(
                &join(path, "dnsConfig"),
                "must provide `dnsConfig` when `dnsPolicy` is None",
            ));
        }
    }
    non_negative(spec, "terminationGracePeriodSeconds", path, out);
    if let Some(d) = int_of(spec, "activeDeadlineSeconds") {
        if !(1..=i64::from(i32::MAX)).contains(&d) {
            out.push(Cause::invalid(
                &join(path, "activeDeadlineSeconds"),
                d,
                "must be between 1 and 2147483647, inclusive",
            ));
        }
    }
    validate_labels(
        map_of(spec, "nodeSelector"),
        &join(path, "nodeSelector"),
        out,
    );
    for (key, checker) in [
        ("nodeName", is_dns1123_subdomain as fn(&str) -> Vec<String>),
        ("serviceAccountName", is_dns1123_subdomain),
        ("hostname", is_dns1123_label),
        ("subdomain", is_dns1123_label),
    ] {
        if let Some(value) = str_of(spec, key).filter(|v| !v.is_empty()) {
            for msg in checker(value) {
                out.push(Cause::invalid(&join(path, key), value, &msg));
            }
        }
    }
    for (i, toleration) in list_of(spec, "tolerations").iter().enumerate() {
        validate_toleration(toleration, &format!("{path}.tolerations[{i}]"), out);
    }
}

/// Volume names: required, DNS labels, unique; each volume has exactly one source. Returns the
/// names for the mounts to refer to.
fn validate_volumes(volumes: &[Value], path: &str, out: &mut Vec<Cause>) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (i, volume) in volumes.iter().enumerate() {
        let vpath = format!("{path}[{i}]");
        match str_of(volume, "name").unwrap_or_default() {
            "" => out.push(Cause::required(&format!("{vpath}.name"), "")),
            name => {
                for msg in is_dns1123_label(name) {
                    out.push(Cause::invalid(&format!("{vpath}.name"), name, &msg));
                }
                if !names.insert(name.to_string()) {
                    out.push(Cause::duplicate(&format!("{vpath}.name"), name));
                }
            }
        }
        let sources: Vec<&String> = volume
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, v)| k.as_str() != "name" && !v.is_null())
            .map(|(k, _)| k)
            .collect();
        match sources.as_slice() {
            [] => out.push(Cause::required(&vpath, "must specify a volume type")),
            [_] => {}
            [_, extra, ..] => out.push(Cause::forbidden(
                &format!("{vpath}.{extra}"),
                "may not specify more than 1 volume type",
            )),
        }
    }
    names
}

fn validate_container(
    container: &Value,
    cpath: &str,
    volumes: &BTreeSet<String>,
    names: &mut HashSet<String>,
    host_network: bool,
    out: &mut Vec<Cause>,
) {
    let name_path = format!("{cpath}.name");
    match str_of(container, "name").unwrap_or_default() {
        "" => out.push(Cause::required(&name_path, "")),
        name => {
            let errs = is_dns1123_label(name);
            for msg in &errs {
                out.push(Cause::invalid(&name_path, name, msg));
            }
            if errs.is_empty() && !names.insert(name.to_string()) {
                out.push(Cause::duplicate(&name_path, name));
            }
        }
    }
    let image_path = format!("{cpath}.image");
    match str_of(container, "image").unwrap_or_default() {
        "" => out.push(Cause::required(&image_path, "")),
        image if image.trim() != image => {
            out.push(Cause::invalid(
                &image_path,
                image,
                "must not have leading or trailing whitespace",
            ));
        }
        _ => {}
    }
    if let Some(policy) = str_of(container, "imagePullPolicy") {
        if !PULL_POLICIES.contains(&policy) {
            out.push(Cause::not_supported(
                &format!("{cpath}.imagePullPolicy"),
                policy,
                PULL_POLICIES,
            ));
        }
    }
    validate_container_ports(container, cpath, host_network, out);
    for (i, env) in list_of(container, "env").iter().enumerate() {
        if str_of(env, "name").unwrap_or_default().is_empty() {
            out.push(Cause::required(&format!("{cpath}.env[{i}].name"), ""));
        }
    }
    if let Some(resources) = field_of(container, "resources") {
        validate_resources(resources, &format!("{cpath}.resources"), out);
    }
    let mut mount_paths = HashSet::new();
    for (i, mount) in list_of(container, "volumeMounts").iter().enumerate() {
        let mpath = format!("{cpath}.volumeMounts[{i}]");
        match str_of(mount, "name").unwrap_or_default() {
            "" => out.push(Cause::required(&format!("{mpath}.name"), "")),
            name if !volumes.contains(name) => {
                out.push(Cause::not_found(&format!("{mpath}.name"), name))
            }
            _ => {}
        }
        match str_of(mount, "mountPath").unwrap_or_default() {
            "" => out.push(Cause::required(&format!("{mpath}.mountPath"), "")),
            path if !mount_paths.insert(path.to_string()) => {
                out.push(Cause::invalid(
                    &format!("{mpath}.mountPath"),
                    path,
                    "must be unique",
                ));
            }
            _ => {}
        }
    }
    for probe_key in PROBES {
        let Some(probe) = field_of(container, probe_key).filter(|p| !p.is_null()) else {
            continue;
        };
        let ppath = format!("{cpath}.{probe_key}");
        let handlers: Vec<&&str> = PROBE_HANDLERS
            .iter()
            .filter(|h| field_of(probe, h).is_some_and(|v| !v.is_null()))
            .collect();
        match handlers.as_slice() {
            [] => out.push(Cause::required(&ppath, "must specify a handler type")),
            [_] => {}
            [_, extra, ..] => out.push(Cause::forbidden(
                &format!("{ppath}.{extra}"),
                "may not specify more than 1 handler type",
            )),
        }
        for key in [
            "initialDelaySeconds",
            "timeoutSeconds",
            "periodSeconds",
            "successThreshold",
            "failureThreshold",
        ] {
            non_negative(probe, key, &ppath, out);
        }
    }
}

fn validate_container_ports(
    container: &Value,
    cpath: &str,
    host_network: bool,
    out: &mut Vec<Cause>,
) {
    let mut port_names = HashSet::new();
    let mut seen = HashSet::new();
    for (i, port) in list_of(container, "ports").iter().enumerate() {
        let ppath = format!("{cpath}.ports[{i}]");
        if let Some(name) = str_of(port, "name").filter(|n| !n.is_empty()) {
            for msg in is_valid_port_name(name) {
                out.push(Cause::invalid(&format!("{ppath}.name"), name, &msg));
            }
            if !port_names.insert(name.to_string()) {
                out.push(Cause::duplicate(&format!("{ppath}.name"), name));
            }
        }
        let container_port = int_of(port, "containerPort").unwrap_or(0);
        if container_port == 0 {
            out.push(Cause::required(&format!("{ppath}.containerPort"), ""));
        } else if !(1..=65535).contains(&container_port) {
            out.push(Cause::invalid(
                &format!("{ppath}.containerPort"),
                container_port,
                PORT_RANGE_MSG,
            ));
        }
        let host_port = int_of(port, "hostPort").unwrap_or(0);
        if host_port != 0 && !(1..=65535).contains(&host_port) {
            out.push(Cause::invalid(
                &format!("{ppath}.hostPort"),
                host_port,
                PORT_RANGE_MSG,
            ));
        }
        if host_network && host_port != 0 && host_port != container_port {
            out.push(Cause::invalid(
                &format!("{ppath}.hostPort"),
                host_port,
                "must match `containerPort` when `hostNetwork` is true",
            ));
        }
        let protocol = str_of(port, "protocol").unwrap_or("TCP");
        if !PROTOCOLS.contains(&protocol) {
            out.push(Cause::not_supported(
                &format!("{ppath}.protocol"),
                protocol,
                PROTOCOLS,
            ));
        }
        if container_port != 0 && !seen.insert((container_port, protocol.to_string())) {
            out.push(Cause::duplicate(
                &format!("{ppath}.containerPort"),
                format!("{container_port}/{protocol}").as_str(),
            ));
        }
    }
}

/// Host ports are unique per (hostIP, protocol, port) across the pod.
fn validate_host_ports(
    container: &Value,
    cpath: &str,
    seen: &mut HashSet<String>,
    out: &mut Vec<Cause>,
) {
    for (i, port) in list_of(container, "ports").iter().enumerate() {
        let host_port = int_of(port, "hostPort").unwrap_or(0);
        if host_port == 0 {
            continue;
        }
        let key = format!(
            "{}/{}/{host_port}",
            str_of(port, "hostIP").unwrap_or_default(),
            str_of(port, "protocol").unwrap_or("TCP")
        );
        if !seen.insert(key.clone()) {
            out.push(Cause::duplicate(
                &format!("{cpath}.ports[{i}].hostPort"),
                key.as_str(),
            ));
        }
    }
}

/// Quantities parse and are non-negative; each request is at most its limit.
fn validate_resources(resources: &Value, path: &str, out: &mut Vec<Cause>) {
    let mut parsed: [BTreeMap<&str, Quantity>; 2] = Default::default();
    for (slot, key) in ["limits", "requests"].iter().enumerate() {
        for (name, raw) in map_of(resources, key).into_iter().flatten() {
            let field = format!("{path}.{key}[{name}]");
            let text = raw.as_str().map_or_else(|| raw.to_string(), str::to_string);
            match Quantity::from_value(raw) {
                Err(e) => out.push(Cause::invalid(&field, &text, &e.detail())),
                Ok(q) if q.is_negative() => {
                    out.push(Cause::invalid(&field, &text, NON_NEGATIVE_MSG))
                }
                Ok(q) => {
                    parsed[slot].insert(name.as_str(), q);
                }
            }
        }
    }
    let [limits, requests] = &parsed;
    for (name, request) in requests {
        if let Some(limit) = limits.get(name) {
            if request > limit {
                out.push(Cause::invalid(
                    &format!("{path}.requests[{name}]"),
                    request.as_str(),
                    &format!("must be less than or equal to {name} limit of {limit}"),
                ));
            }
        }
    }
}

fn validate_toleration(toleration: &Value, path: &str, out: &mut Vec<Cause>) {
    let key = str_of(toleration, "key").unwrap_or_default();
    if !key.is_empty() {
        for msg in is_qualified_name(key) {
            out.push(Cause::invalid(&format!("{path}.key"), key, &msg));
        }
    }
    let operator = str_of(toleration, "operator").unwrap_or_default();
    match operator {
        "" | "Equal" if key.is_empty() => out.push(Cause::invalid(
            &format!("{path}.operator"),
            operator,
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
        )),
        "" | "Equal" => {}
        "Exists" => {
            if let Some(value) = str_of(toleration, "value").filter(|v| !v.is_empty()) {
                out.push(Cause::invalid(&format!("{path}.value"), value, "value must be empty when `operator` is 'Exists'"));
            }
        }
        other => out.push(Cause::not_supported(&format!("{path}.operator"), other, &["Equal", "Exists"])),
    }
    let effect = str_of(toleration, "effect").unwrap_or_default();
    if !effect.is_empty() && !TAINT_EFFECTS.contains(&effect) {
        out.push(Cause::not_supported(
            &format!("{path}.effect"),
            effect,
            TAINT_EFFECTS,
        ));
    }
    if field_of(toleration, "tolerationSeconds").is_some_and(|v| !v.is_null())
        && effect != "NoExecute"
    {
        out.push(Cause::invalid(
            &format!("{path}.effect"),
            effect,
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        ));
    }
}

const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";

/// Pod specs are immutable but for images, a shrinking activeDeadlineSeconds, added
/// tolerations, and a negative grace period being fixed to 1. As Kubernetes does, the new spec
/// gets the old values of the mutable fields and must then equal the old spec.
pub(super) fn validate_pod_spec_update(
    old: Option<&Value>,
    new: Option<&Value>,
    out: &mut Vec<Cause>,
) {
    let (Some(old), Some(new)) = (old, new) else {
        return;
    };
    let mut munged = new.clone();

    for key in ["containers", "initContainers"] {
        let old_list = list_of(old, key);
        if let Some(list) = munged.get_mut(key).and_then(Value::as_array_mut) {
            for (c, o) in list.iter_mut().zip(old_list) {
                if let (Some(c), Some(image)) = (c.as_object_mut(), field_of(o, "image")) {
                    c.insert("image".into(), image.clone());
                }
            }
        }
    }

    let (old_deadline, new_deadline) = (
        int_of(old, "activeDeadlineSeconds"),
        int_of(new, "activeDeadlineSeconds"),
    );
    match (old_deadline, new_deadline) {
        (Some(_), None) => out.push(Cause::invalid(
            "spec.activeDeadlineSeconds",
            Bad::Raw("nil".into()),
            "must not update from a positive integer to nil value",
        )),
        (Some(o), Some(n)) if n > o => {
            out.push(Cause::invalid(
                "spec.activeDeadlineSeconds",
                n,
                "must be less than or equal to previous value",
            ));
        }
        _ => {}
    }
    set_or_remove(
        &mut munged,
        "activeDeadlineSeconds",
        field_of(old, "activeDeadlineSeconds"),
    );

    let new_tolerations = list_of(new, "tolerations");
    for old_toleration in list_of(old, "tolerations") {
        let kept = new_tolerations.iter().any(|t| {
            let strip = |v: &Value| {
                let mut v = v.clone();
                if let Some(m) = v.as_object_mut() {
                    m.remove("tolerationSeconds");
                }
                v
            };
            semantic_eq(Some(&strip(t)), Some(&strip(old_toleration)))
        });
        if !kept {
            out.push(Cause::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            break;
        }
    }
    set_or_remove(&mut munged, "tolerations", field_of(old, "tolerations"));

    let old_grace = int_of(old, "terminationGracePeriodSeconds");
    if old_grace.is_some_and(|g| g < 0) && int_of(new, "terminationGracePeriodSeconds") == Some(1) {
        set_or_remove(
            &mut munged,
            "terminationGracePeriodSeconds",
            field_of(old, "terminationGracePeriodSeconds"),
        );
    }

    if !semantic_eq(Some(old), Some(&munged)) {
        out.push(Cause::forbidden("spec", POD_UPDATE_FORBIDDEN));
    }
}

fn set_or_remove(object: &mut Value, key: &str, value: Option<&Value>) {
    if let Some(map) = object.as_object_mut() {
        match value {
            Some(v) => {
                map.insert(key.to_string(), v.clone());
            }
            None => {
                map.remove(key);
            }
        }
    }
}
