//! The `kubernetes` Service in `default`, which every API server keeps as kube-apiserver does:
//! a ClusterIP Service (the first address of the service range, port 443 named `https`)
//! without a selector, whose Endpoints and EndpointSlice list the API servers.
//!
//! Each replica adds its own address at startup, checks again every
//! [`RECONCILE_INTERVAL`] (so a deleted Service, Endpoints or slice comes back), and takes
//! its address out when it shuts down cleanly. Replicas serving on different ports (several
//! on one host) each get their own Endpoints subset and EndpointSlice (`kubernetes` for the
//! first port, `kubernetes-PORT` for the others), since a slice has one port list.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::{json, Value};
use tracing::{debug, warn};

use crate::errors::ApiError;
use crate::registry::{DeleteOptions, Registry, WriteOptions};

pub const NAME: &str = "kubernetes";
pub const NAMESPACE: &str = "default";
/// The Service's address: the first of the service range (10.96.0.0/12).
pub const CLUSTER_IP: &str = "10.96.0.1";
/// kube-apiserver's endpoint reconciler interval.
pub const RECONCILE_INTERVAL: Duration = Duration::from_secs(10);

/// The Service, as kube-apiserver creates it; `port` is the API server's own.
pub fn service(port: u16) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": CLUSTER_IP,
            "sessionAffinity": "None",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
        },
    })
}

/// The members (ip, port) an Endpoints object lists.
pub fn members(endpoints: Option<&Value>) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    let subsets = endpoints
        .and_then(|e| e.get("subsets"))
        .and_then(Value::as_array);
    for subset in subsets.into_iter().flatten() {
        let port = subset
            .pointer("/ports/0/port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok());
        let Some(port) = port else { continue };
        let addresses = subset.get("addresses").and_then(Value::as_array);
        for address in addresses.into_iter().flatten() {
            if let Some(ip) = address.get("ip").and_then(Value::as_str) {
                out.push((ip.to_string(), port));
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The ports of `members`, in order, without repeats.
fn ports(members: &[(String, u16)]) -> Vec<u16> {
    let mut ports: Vec<u16> = members.iter().map(|(_, p)| *p).collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// The Endpoints object listing `members` (one subset per port).
pub fn endpoints(members: &[(String, u16)]) -> Value {
    let subsets: Vec<Value> = ports(members)
        .into_iter()
        .map(|port| {
            let addresses: Vec<Value> = members
                .iter()
                .filter(|(_, p)| *p == port)
                .map(|(ip, _)| json!({"ip": ip}))
                .collect();
            json!({"addresses": addresses,
                   "ports": [{"name": "https", "port": port, "protocol": "TCP"}]})
        })
        .collect();
    let mut object = json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
        },
    });
    if !subsets.is_empty() {
        object["subsets"] = json!(subsets);
    }
    object
}

/// The name of the EndpointSlice for the members serving on `port`, the first port being
/// `first`.
pub fn slice_name(port: u16, first: u16) -> String {
    if port == first {
        NAME.to_string()
    } else {
        format!("{NAME}-{port}")
    }
}

/// The EndpointSlices listing `members`: one per port, each with its members, ready.
pub fn slices(members: &[(String, u16)]) -> Vec<Value> {
    let all = ports(members);
    let Some(first) = all.first().copied() else {
        return Vec::new();
    };
    all.into_iter()
        .map(|port| {
            let ips: Vec<&str> = members
                .iter()
                .filter(|(_, p)| *p == port)
                .map(|(ip, _)| ip.as_str())
                .collect();
            let family = if ips.iter().all(|ip| ip.contains(':')) {
                "IPv6"
            } else {
                "IPv4"
            };
            let endpoints: Vec<Value> = ips
                .iter()
                .map(|ip| json!({"addresses": [ip], "conditions": {"ready": true}}))
                .collect();
            json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": slice_name(port, first),
                    "namespace": NAMESPACE,
                    "labels": {"kubernetes.io/service-name": NAME},
                },
                "addressType": family,
                "endpoints": endpoints,
                "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
            })
        })
        .collect()
}

fn resource(group: &str, plural: &str) -> Result<&'static api::ResourceInfo, ApiError> {
    api::resources::find(group, "v1", plural)
        .ok_or_else(|| ApiError::internal(format!("{plural} are not served")))
}

/// Gets an object, `None` when it does not exist.
async fn get(
    registry: &Registry,
    resource: &'static api::ResourceInfo,
    name: &str,
) -> Result<Option<Value>, ApiError> {
    match registry.get(resource, Some(NAMESPACE), name).await {
        Ok(v) => Ok(Some(v)),
        Err(ApiError::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Creates `desired`, or replaces what is there when the fields in `compare` differ.
async fn put(
    registry: &Registry,
    resource: &'static api::ResourceInfo,
    current: Option<Value>,
    desired: Value,
    compare: &[&str],
) -> Result<(), ApiError> {
    let name = desired["metadata"]["name"]
        .as_str()
        .unwrap_or(NAME)
        .to_string();
    let options = WriteOptions::default();
    let Some(current) = current else {
        return match registry
            .create(resource, Some(NAMESPACE), desired, &options)
            .await
        {
            Ok(_) | Err(ApiError::AlreadyExists { .. }) => Ok(()),
            Err(e) => Err(e),
        };
    };
    if compare.iter().all(|f| current.get(*f) == desired.get(*f))
        && current.pointer("/metadata/labels") == desired.pointer("/metadata/labels")
    {
        return Ok(());
    }
    let mut next = desired;
    next["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
    registry
        .update(resource, Some(NAMESPACE), &name, None, next, &options)
        .await
        .map(|_| ())
}

/// Makes the Service exist and the endpoint objects list `me` (or not, when `present` is
/// false), leaving the other members as they are.
pub async fn reconcile(registry: &Registry, me: SocketAddr, present: bool) -> Result<(), ApiError> {
    let services = resource("", "services")?;
    if present && get(registry, services, NAME).await?.is_none() {
        match registry
            .create(
                services,
                Some(NAMESPACE),
                service(me.port()),
                &WriteOptions::default(),
            )
            .await
        {
            Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    let endpoints_resource = resource("", "endpoints")?;
    let current = get(registry, endpoints_resource, NAME).await?;
    let before = members(current.as_ref());
    let mine = (me.ip().to_string(), me.port());
    let mut after: Vec<(String, u16)> = before.iter().filter(|m| **m != mine).cloned().collect();
    if present {
        after.push(mine);
        after.sort();
    }
    put(
        registry,
        endpoints_resource,
        current,
        endpoints(&after),
        &["subsets"],
    )
    .await?;
    let slices_resource = resource("discovery.k8s.io", "endpointslices")?;
    let wanted = slices(&after);
    for slice in &wanted {
        let name = slice["metadata"]["name"].as_str().unwrap_or(NAME);
        let current = get(registry, slices_resource, name).await?;
        put(
            registry,
            slices_resource,
            current,
            slice.clone(),
            &["endpoints", "ports", "addressType"],
        )
        .await?;
    }
    // Slices of ports nobody serves on any more.
    let first_before = ports(&before).first().copied().unwrap_or_default();
    for port in ports(&before) {
        let name = slice_name(port, first_before);
        if wanted
            .iter()
            .any(|s| s["metadata"]["name"] == name.as_str())
        {
            continue;
        }
        match registry
            .delete(
                slices_resource,
                Some(NAMESPACE),
                &name,
                &DeleteOptions::default(),
            )
            .await
        {
            Ok(_) | Err(ApiError::NotFound { .. }) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Keeps `me` listed until `stop`, then takes it out.
pub async fn run(
    registry: std::sync::Arc<Registry>,
    me: SocketAddr,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut ticks = tokio::time::interval(RECONCILE_INTERVAL);
    loop {
        let stopping = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => true,
            _ = ticks.tick() => false,
        };
        if stopping {
            break;
        }
        match reconcile(&registry, me, true).await {
            Ok(()) => debug!(%me, "kubernetes service reconciled"),
            Err(e) => warn!(error = %e, "cannot reconcile the kubernetes service"),
        }
    }
    if let Err(e) = reconcile(&registry, me, false).await {
        warn!(error = %e, "cannot remove this API server from the kubernetes endpoints");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(ip: &str, port: u16) -> (String, u16) {
        (ip.to_string(), port)
    }

    #[test]
    fn members_round_trip_through_endpoints() {
        let list = vec![
            m("10.0.0.1", 6443),
            m("10.0.0.2", 6443),
            m("127.0.0.1", 7000),
        ];
        let e = endpoints(&list);
        assert_eq!(members(Some(&e)), list);
        assert_eq!(e["subsets"].as_array().map(Vec::len), Some(2));
        assert_eq!(
            e["subsets"][0],
            json!({"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}],
                   "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]})
        );
        assert!(endpoints(&[]).get("subsets").is_none());
        assert!(members(None).is_empty());
    }

    #[test]
    fn one_slice_per_port_the_first_named_kubernetes() {
        let list = vec![
            m("10.0.0.1", 6443),
            m("10.0.0.2", 6443),
            m("127.0.0.1", 7000),
        ];
        let s = slices(&list);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0]["metadata"]["name"], "kubernetes");
        assert_eq!(
            s[0]["metadata"]["labels"]["kubernetes.io/service-name"],
            "kubernetes"
        );
        assert_eq!(s[0]["addressType"], "IPv4");
        assert_eq!(
            s[0]["endpoints"][1],
            json!({"addresses": ["10.0.0.2"], "conditions": {"ready": true}})
        );
        assert_eq!(s[1]["metadata"]["name"], "kubernetes-7000");
        assert_eq!(s[1]["ports"][0]["port"], 7000);
        assert!(slices(&[]).is_empty());
    }

    #[test]
    fn the_service_points_443_at_the_servers_port() {
        let s = service(6443);
        assert_eq!(s["spec"]["clusterIP"], CLUSTER_IP);
        assert_eq!(
            s["spec"]["ports"][0],
            json!({"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443})
        );
        assert!(s["spec"].get("selector").is_none());
    }
}
