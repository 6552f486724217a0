//! Services, Endpoints, Ingresses and IngressClasses.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{age, array_at, first_str, int_at, name, none_if_empty, str_at, Column, AGE, NAME};

pub(super) fn service_cells(svc: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let svc_type = match str_at(svc, "/spec/type") {
        "" => "ClusterIP",
        t => t,
    };
    let mut cluster_ip = array_at(svc, "/spec/clusterIPs")
        .first()
        .and_then(Value::as_str)
        .unwrap_or("");
    if cluster_ip.is_empty() {
        cluster_ip = str_at(svc, "/spec/clusterIP");
    }
    let ports: Vec<String> = array_at(svc, "/spec/ports")
        .iter()
        .map(|p| {
            let protocol = match str_at(p, "/protocol") {
                "" => "TCP",
                proto => proto,
            };
            match int_at(p, "/nodePort") {
                node_port if node_port > 0 => {
                    format!("{}:{node_port}/{protocol}", int_at(p, "/port"))
                }
                _ => format!("{}/{protocol}", int_at(p, "/port")),
            }
        })
        .collect();
    let selector = svc
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .map_or(String::new(), |labels| {
            // serde_json maps iterate in key order, which is the order labels.FormatLabels uses.
            labels
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        });
    vec![
        name(svc),
        svc_type.into(),
        none_if_empty(cluster_ip).into(),
        service_external_ip(svc, svc_type).into(),
        none_if_empty(&ports.join(",")).into(),
        age(svc, now),
        none_if_empty(&selector).into(),
    ]
}

fn service_external_ip(svc: &Value, svc_type: &str) -> String {
    let external_ips: Vec<&str> = array_at(svc, "/spec/externalIPs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match svc_type {
        "ClusterIP" | "NodePort" => none_if_empty(&external_ips.join(",")),
        "LoadBalancer" => {
            let ingress: BTreeSet<&str> = array_at(svc, "/status/loadBalancer/ingress")
                .iter()
                .map(|i| first_str(i, &["/ip", "/hostname"]))
                .filter(|s| !s.is_empty())
                .collect();
            let mut all: Vec<&str> = ingress.into_iter().collect();
            all.extend(external_ips);
            if all.is_empty() {
                "<pending>".into()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => str_at(svc, "/spec/externalName").into(),
        _ => "<unknown>".into(),
    }
}

/// Up to three `ip:port` endpoints, then "+ N more...".
pub(super) fn endpoints_cells(ep: &Value, now: DateTime<Utc>) -> Vec<Value> {
    const MAX: usize = 3;
    let subsets = array_at(ep, "/subsets");
    let text = if subsets.is_empty() {
        "<none>".to_string()
    } else {
        let mut list: Vec<String> = Vec::new();
        let mut count = 0;
        for subset in subsets {
            let addresses: Vec<&str> = array_at(subset, "/addresses")
                .iter()
                .map(|a| str_at(a, "/ip"))
                .collect();
            let ports = array_at(subset, "/ports");
            if ports.is_empty() {
                // Headless services may have no ports.
                count += addresses.len();
                list.extend(
                    addresses
                        .iter()
                        .take(MAX.saturating_sub(list.len()))
                        .map(|ip| ip.to_string()),
                );
                continue;
            }
            for port in ports {
                count += addresses.len();
                for ip in &addresses {
                    if list.len() == MAX {
                        break;
                    }
                    let port = int_at(port, "/port");
                    list.push(if ip.contains(':') {
                        format!("[{ip}]:{port}")
                    } else {
                        format!("{ip}:{port}")
                    });
                }
            }
        }
        let joined = list.join(",");
        if count > MAX {
            format!("{joined} + {} more...", count - MAX)
        } else {
            joined
        }
    };
    vec![name(ep), text.into(), age(ep, now)]
}

pub(super) const INGRESS_COLUMNS: &[Column] = &[
    NAME,
    Column::string(
        "Class",
        "The name of the IngressClass resource this Ingress uses.",
    ),
    Column::string(
        "Hosts",
        "Hosts that incoming requests are matched against before the ingress rule",
    ),
    Column::string(
        "Address",
        "Address is a list containing ingress points for the load-balancer",
    ),
    Column::string("Ports", "Ports of TLS configurations that open"),
    AGE,
];

pub(super) const INGRESS_CLASS_COLUMNS: &[Column] = &[
    NAME,
    Column::string(
        "Controller",
        "Controller that is responsible for handling this class",
    ),
    Column::string(
        "Parameters",
        "A reference to a resource with additional parameters",
    ),
    AGE,
];

/// NAME CLASS HOSTS ADDRESS PORTS AGE: the first three hosts (`*` for none), the load
/// balancer's addresses, `80` or `80, 443` with TLS.
pub(super) fn ingress_cells(ingress: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let class = match ingress
        .pointer("/spec/ingressClassName")
        .and_then(Value::as_str)
    {
        Some(c) => c.to_string(),
        None => "<none>".to_string(),
    };
    let hosts: Vec<&str> = array_at(ingress, "/spec/rules")
        .iter()
        .map(|r| str_at(r, "/host"))
        .filter(|h| !h.is_empty())
        .collect();
    let shown = match hosts.len() {
        0 => "*".to_string(),
        n if n > 3 => format!("{} + {} more...", hosts[..3].join(","), n - 3),
        _ => hosts.join(","),
    };
    let addresses: Vec<&str> = array_at(ingress, "/status/loadBalancer/ingress")
        .iter()
        .map(|i| first_str(i, &["/ip", "/hostname"]))
        .filter(|a| !a.is_empty())
        .collect();
    let ports = if array_at(ingress, "/spec/tls").is_empty() {
        "80"
    } else {
        "80, 443"
    };
    vec![
        name(ingress),
        class.into(),
        shown.into(),
        addresses.join(",").into(),
        ports.into(),
        age(ingress, now),
    ]
}

pub(super) fn ingress_class_cells(class: &Value, now: DateTime<Utc>) -> Vec<Value> {
    let parameters = match class.pointer("/spec/parameters") {
        Some(p) if p.is_object() => {
            let group = str_at(p, "/apiGroup");
            let kind = if group.is_empty() {
                str_at(p, "/kind").to_string()
            } else {
                format!("{}.{group}", str_at(p, "/kind"))
            };
            format!("{kind}/{}", str_at(p, "/name"))
        }
        _ => "<none>".to_string(),
    };
    vec![
        name(class),
        str_at(class, "/spec/controller").into(),
        parameters.into(),
        age(class, now),
    ]
}
