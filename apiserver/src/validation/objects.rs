//! Services, ConfigMaps, Secrets, Nodes and Endpoints.

use std::collections::HashSet;

use serde_json::Value;

use api::names::{
    is_config_map_key, is_dns1123_label, is_dns1123_subdomain, is_qualified_name,
    is_valid_label_value, is_valid_port_name,
};

use super::{
    field_of, int_of, list_of, map_of, str_of, validate_labels, Cause, DATA_MAX_BYTES,
    PORT_RANGE_MSG, PROTOCOLS, TAINT_EFFECTS,
};

const SERVICE_TYPES: &[&str] = &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];

pub(super) fn validate_service(spec: &Value, out: &mut Vec<Cause>) {
    let service_type = str_of(spec, "type").unwrap_or("ClusterIP");
    if !SERVICE_TYPES.contains(&service_type) {
        out.push(Cause::not_supported(
            "spec.type",
            service_type,
            SERVICE_TYPES,
        ));
    }
    let headless = str_of(spec, "clusterIP") == Some("None");
    let ports = list_of(spec, "ports");
    if service_type == "ExternalName" {
        match str_of(spec, "externalName").unwrap_or_default() {
            "" => out.push(Cause::required("spec.externalName", "")),
            name => {
                for msg in is_dns1123_subdomain(name.trim_end_matches('.')) {
                    out.push(Cause::invalid("spec.externalName", name, &msg));
                }
            }
        }
    } else if ports.is_empty() && !headless {
        out.push(Cause::required("spec.ports", ""));
    }
    let mut names = HashSet::new();
    let mut seen = HashSet::new();
    for (i, port) in ports.iter().enumerate() {
        let ppath = format!("spec.ports[{i}]");
        match str_of(port, "name").unwrap_or_default() {
            "" if ports.len() > 1 => out.push(Cause::required(&format!("{ppath}.name"), "")),
            "" => {}
            name => {
                for msg in is_dns1123_label(name) {
                    out.push(Cause::invalid(&format!("{ppath}.name"), name, &msg));
                }
                if !names.insert(name.to_string()) {
                    out.push(Cause::duplicate(&format!("{ppath}.name"), name));
                }
            }
        }
        let number = int_of(port, "port").unwrap_or(0);
        if !(1..=65535).contains(&number) {
            out.push(Cause::invalid(
                &format!("{ppath}.port"),
                number,
                PORT_RANGE_MSG,
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
        if !seen.insert((number, protocol.to_string())) {
            out.push(Cause::duplicate(
                &ppath,
                format!("{number}/{protocol}").as_str(),
            ));
        }
        match field_of(port, "targetPort") {
            Some(Value::Number(n)) => {
                let n = n.as_i64().unwrap_or(0);
                if !(1..=65535).contains(&n) {
                    out.push(Cause::invalid(
                        &format!("{ppath}.targetPort"),
                        n,
                        PORT_RANGE_MSG,
                    ));
                }
            }
            Some(Value::String(name)) => {
                for msg in is_valid_port_name(name) {
                    out.push(Cause::invalid(&format!("{ppath}.targetPort"), name, &msg));
                }
            }
            _ => {}
        }
    }
    validate_labels(map_of(spec, "selector"), "spec.selector", out);
}

/// ConfigMap and Secret data: valid keys, no key in both maps, at most 1 MiB in total.
pub(super) fn validate_data(object: &Value, secret: bool, out: &mut Vec<Cause>) {
    let data = map_of(object, "data");
    let binary = if secret {
        None
    } else {
        map_of(object, "binaryData")
    };
    let mut total = 0;
    for (map, field) in [(data, "data"), (binary, "binaryData")] {
        for (key, value) in map.into_iter().flatten() {
            for msg in is_config_map_key(key) {
                out.push(Cause::invalid(&format!("{field}[{key}]"), key, &msg));
            }
            total += value.as_str().map_or(0, str::len);
        }
    }
    for key in binary.into_iter().flatten().map(|(k, _)| k) {
        if data.is_some_and(|d| d.contains_key(key)) {
            out.push(Cause::invalid(
                &format!("data[{key}]"),
                key,
                "duplicate of key present in binaryData",
            ));
        }
    }
    if total > DATA_MAX_BYTES {
        out.push(Cause::too_long(
            if secret { "data" } else { "" },
            DATA_MAX_BYTES,
        ));
    }
}

pub(super) fn validate_secret(object: &Value, out: &mut Vec<Cause>) {
    validate_data(object, true, out);
    for key in map_of(object, "stringData")
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        for msg in is_config_map_key(key) {
            out.push(Cause::invalid(&format!("stringData[{key}]"), key, &msg));
        }
    }
    let has = |key: &str| {
        map_of(object, "data").is_some_and(|d| d.contains_key(key))
            || map_of(object, "stringData").is_some_and(|d| d.contains_key(key))
    };
    let required: &[&str] = match str_of(object, "type").unwrap_or("Opaque") {
        "kubernetes.io/tls" => &["tls.crt", "tls.key"],
        "kubernetes.io/dockerconfigjson" => &[".dockerconfigjson"],
        "kubernetes.io/dockercfg" => &[".dockercfg"],
        _ => &[],
    };
    for key in required {
        if !has(key) {
            out.push(Cause::required(&format!("data[{key}]"), ""));
        }
    }
}

pub(super) fn validate_node(spec: Option<&Value>, out: &mut Vec<Cause>) {
    let Some(spec) = spec else { return };
    for (i, taint) in list_of(spec, "taints").iter().enumerate() {
        let tpath = format!("spec.taints[{i}]");
        let key = str_of(taint, "key").unwrap_or_default();
        for msg in is_qualified_name(key) {
            out.push(Cause::invalid(&format!("{tpath}.key"), key, &msg));
        }
        match str_of(taint, "effect").unwrap_or_default() {
            "" => out.push(Cause::required(&format!("{tpath}.effect"), "")),
            effect if !TAINT_EFFECTS.contains(&effect) => {
                out.push(Cause::not_supported(
                    &format!("{tpath}.effect"),
                    effect,
                    TAINT_EFFECTS,
                ));
            }
            _ => {}
        }
        if let Some(value) = str_of(taint, "value") {
            for msg in is_valid_label_value(value) {
                out.push(Cause::invalid(&format!("{tpath}.value"), value, &msg));
            }
        }
    }
}

pub(super) fn validate_endpoints(object: &Value, out: &mut Vec<Cause>) {
    for (i, subset) in list_of(object, "subsets").iter().enumerate() {
        for key in ["addresses", "notReadyAddresses"] {
            for (j, address) in list_of(subset, key).iter().enumerate() {
                if str_of(address, "ip").unwrap_or_default().is_empty() {
                    out.push(Cause::required(&format!("subsets[{i}].{key}[{j}].ip"), ""));
                }
            }
        }
        for (j, port) in list_of(subset, "ports").iter().enumerate() {
            let number = int_of(port, "port").unwrap_or(0);
            if !(1..=65535).contains(&number) {
                out.push(Cause::invalid(
                    &format!("subsets[{i}].ports[{j}].port"),
                    number,
                    PORT_RANGE_MSG,
                ));
            }
        }
    }
}
