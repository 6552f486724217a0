//! The Endpoints and EndpointSlice controllers (one reconciler): for every Service with a
//! selector, the IPs of the pods it selects — ready ones as addresses, the others as
//! notReadyAddresses — with the Service's ports resolved against each pod (named target
//! ports). A pod leaves as soon as its deletion starts.
//!
//! The decision is the pure [`desired`]; [`EndpointsController`] writes what differs from
//! the cached objects.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use api::client::{Client, DeleteParams};
use api::informer::{Informer, InformerEvent, Store};
use api::resources::{self, ResourceInfo};
use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service,
};
use k8s_openapi::api::discovery::v1::{
    Endpoint, EndpointConditions, EndpointPort as SlicePort, EndpointSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::sync::mpsc;

use crate::owners::{controller_ref, key_of, split_key};
use crate::pods;
use crate::queue::WorkQueue;
use crate::worker::{Outcome, ReconcileError, Reconciler};

pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
pub const MANAGED_BY: &str = "endpointslice-controller.k8s.io";

fn selects(selector: &BTreeMap<String, String>, pod: &Pod) -> bool {
    let labels = pod.metadata.labels.as_ref();
    !selector.is_empty()
        && selector
            .iter()
            .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

fn selector_of(service: &Service) -> Option<&BTreeMap<String, String>> {
    service
        .spec
        .as_ref()?
        .selector
        .as_ref()
        .filter(|s| !s.is_empty())
}

/// The service ports as this pod serves them; `None` if a named target port is missing.
fn resolve_ports(service: &Service, pod: &Pod) -> Option<Vec<EndpointPort>> {
    let ports = service.spec.as_ref()?.ports.clone().unwrap_or_default();
    let mut out = Vec::new();
    for port in ports {
        let number = match &port.target_port {
            None => port.port,
            Some(IntOrString::Int(n)) => *n,
            Some(IntOrString::String(name)) => match name.parse::<i32>() {
                Ok(n) => n,
                Err(_) => {
                    pod.spec
                        .as_ref()?
                        .containers
                        .iter()
                        .flat_map(|c| c.ports.as_deref().unwrap_or_default())
                        .find(|p| p.name.as_deref() == Some(name.as_str()))?
                        .container_port
                }
            },
        };
        out.push(EndpointPort {
            name: port.name.clone(),
            port: number,
            protocol: Some(port.protocol.clone().unwrap_or_else(|| "TCP".into())),
            app_protocol: port.app_protocol.clone(),
        });
    }
    Some(out)
}

/// Pods serving one set of resolved ports: (ports, ready addresses, not-ready addresses).
type PortGroup = (
    Vec<EndpointPort>,
    Vec<EndpointAddress>,
    Vec<EndpointAddress>,
);

/// What Endpoints and EndpointSlice should say for `service` given every pod of its
/// namespace. `None` for a Service without a selector (its endpoints are managed by hand).
pub fn desired(service: &Service, candidates: &[&Pod]) -> Option<(Endpoints, EndpointSlice)> {
    let selector = selector_of(service)?;
    let name = service.metadata.name.clone().unwrap_or_default();
    let namespace = service.metadata.namespace.clone();
    // Pods grouped by their resolved ports: (ports) → (ready, not ready).
    let mut groups: BTreeMap<String, PortGroup> = BTreeMap::new();
    let mut slice_endpoints = Vec::new();
    let mut selected: Vec<&Pod> = candidates
        .iter()
        .copied()
        .filter(|p| selects(selector, p))
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !pods::is_terminal(p))
        .collect();
    selected.sort_by_key(|p| p.metadata.name.clone());
    for pod in selected {
        let Some(ip) = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.clone())
            .filter(|ip| !ip.is_empty())
        else {
            continue;
        };
        let Some(ports) = resolve_ports(service, pod) else {
            continue;
        };
        let node_name = pod.spec.as_ref().and_then(|s| s.node_name.clone());
        let target = ObjectReference {
            kind: Some("Pod".into()),
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        };
        let address = EndpointAddress {
            ip: ip.clone(),
            node_name: node_name.clone(),
            target_ref: Some(target.clone()),
            hostname: None,
        };
        let ready = pods::is_ready(pod);
        let group_key = serde_json::to_string(&ports).unwrap_or_default();
        let group = groups
            .entry(group_key)
            .or_insert_with(|| (ports, Vec::new(), Vec::new()));
        if ready {
            group.1.push(address);
        } else {
            group.2.push(address);
        }
        slice_endpoints.push(Endpoint {
            addresses: vec![ip],
            conditions: Some(EndpointConditions {
                ready: Some(ready),
                serving: Some(ready),
                terminating: Some(false),
            }),
            node_name,
            target_ref: Some(target),
            ..Default::default()
        });
    }
    let mut slice_ports = None;
    let subsets: Vec<EndpointSubset> = groups
        .into_values()
        .map(|(ports, ready, not_ready)| {
            if slice_ports.is_none() {
                slice_ports = Some(
                    ports
                        .iter()
                        .map(|p| SlicePort {
                            name: p.name.clone(),
                            port: Some(p.port),
                            protocol: p.protocol.clone(),
                            app_protocol: p.app_protocol.clone(),
                        })
                        .collect::<Vec<_>>(),
                );
            }
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: (!ports.is_empty()).then_some(ports),
            }
        })
        .collect();
    let endpoints = Endpoints {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: namespace.clone(),
            labels: service.metadata.labels.clone(),
            ..Default::default()
        },
        subsets: (!subsets.is_empty()).then_some(subsets),
    };
    let mut labels = service.metadata.labels.clone().unwrap_or_default();
    labels.insert(SERVICE_NAME_LABEL.into(), name.clone());
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY.into());
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name),
            namespace,
            labels: Some(labels),
            owner_references: Some(vec![controller_ref("v1", "Service", &service.metadata)]),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: Some(slice_endpoints),
        ports: slice_ports.or_else(|| {
            let ports = service.spec.as_ref()?.ports.as_ref()?;
            Some(
                ports
                    .iter()
                    .map(|p| SlicePort {
                        name: p.name.clone(),
                        port: match &p.target_port {
                            Some(IntOrString::Int(n)) => Some(*n),
                            _ => Some(p.port),
                        },
                        protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".into())),
                        app_protocol: p.app_protocol.clone(),
                    })
                    .collect(),
            )
        }),
    };
    Some((endpoints, slice))
}

fn endpoints_resource() -> &'static ResourceInfo {
    resources::find("", "v1", "endpoints").expect("endpoints")
}

fn slices_resource() -> &'static ResourceInfo {
    resources::find("discovery.k8s.io", "v1", "endpointslices").expect("endpointslices")
}

/// The Endpoints/EndpointSlice reconciler (keys are Services).
pub struct EndpointsController {
    client: Client,
    services: Store<Service>,
    pods: Store<Pod>,
    endpoints: Store<Endpoints>,
    slices: Store<EndpointSlice>,
}

impl EndpointsController {
    pub fn new(
        client: Client,
        services: &mut Informer<Service>,
        pods: &mut Informer<Pod>,
        endpoints: &mut Informer<Endpoints>,
        slices: &mut Informer<EndpointSlice>,
    ) -> (Arc<EndpointsController>, WorkQueue) {
        let queue = WorkQueue::new(Duration::from_millis(5), Duration::from_secs(30));
        let controller = Arc::new(EndpointsController {
            client,
            services: services.store(),
            pods: pods.store(),
            endpoints: endpoints.store(),
            slices: slices.store(),
        });
        tokio::spawn(feed(
            services.subscribe(),
            pods.subscribe(),
            endpoints.subscribe(),
            slices.subscribe(),
            services.store(),
            queue.clone(),
        ));
        (controller, queue)
    }
}

async fn feed(
    mut services: mpsc::Receiver<InformerEvent<Service>>,
    mut pods: mpsc::Receiver<InformerEvent<Pod>>,
    mut endpoints: mpsc::Receiver<InformerEvent<Endpoints>>,
    mut slices: mpsc::Receiver<InformerEvent<EndpointSlice>>,
    service_store: Store<Service>,
    queue: WorkQueue,
) {
    // Services of the pod's namespace selecting it.
    let enqueue_for = |pod: &Pod| {
        for service in service_store.list() {
            if service.metadata.namespace == pod.metadata.namespace
                && selector_of(&service).is_some_and(|s| selects(s, pod))
            {
                queue.add(&key_of(&service.metadata));
            }
        }
    };
    loop {
        tokio::select! {
            event = services.recv() => match event {
                Some(InformerEvent::Added(s)) | Some(InformerEvent::Updated { new: s, .. }) | Some(InformerEvent::Deleted(s)) => {
                    queue.add(&key_of(&s.metadata))
                }
                None => return,
            },
            event = pods.recv() => match event {
                Some(InformerEvent::Added(p)) | Some(InformerEvent::Deleted(p)) => enqueue_for(&p),
                Some(InformerEvent::Updated { old, new }) => {
                    if old.metadata.labels != new.metadata.labels {
                        enqueue_for(&old);
                    }
                    enqueue_for(&new);
                }
                None => return,
            },
            event = endpoints.recv() => match event {
                Some(InformerEvent::Added(e)) | Some(InformerEvent::Updated { new: e, .. }) | Some(InformerEvent::Deleted(e)) => {
                    queue.add(&key_of(&e.metadata))
                }
                None => return,
            },
            event = slices.recv() => match event {
                Some(InformerEvent::Added(e)) | Some(InformerEvent::Updated { new: e, .. }) | Some(InformerEvent::Deleted(e)) => {
                    if let Some(service) = e.metadata.labels.as_ref().and_then(|l| l.get(SERVICE_NAME_LABEL)) {
                        queue.add(&api::informer::key(e.metadata.namespace.as_deref(), service));
                    }
                }
                None => return,
            },
        }
    }
}

impl crate::manager::HasCaches for EndpointsController {
    fn caches_synced(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = bool> + Send>> {
        let (a, b, c, d) = (
            self.services.clone(),
            self.pods.clone(),
            self.endpoints.clone(),
            self.slices.clone(),
        );
        Box::pin(async move {
            a.wait_synced().await
                && b.wait_synced().await
                && c.wait_synced().await
                && d.wait_synced().await
        })
    }
}

impl Reconciler for EndpointsController {
    async fn reconcile(&self, key: &str) -> Result<Outcome, ReconcileError> {
        let (namespace, name) = split_key(key);
        let cached_endpoints = self.endpoints.get(key);
        let cached_slice = self.slices.get(key);
        let wanted = self.services.get(key).and_then(|service| {
            let all = self.pods.list();
            let candidates: Vec<&Pod> = all
                .iter()
                .map(|p| p.as_ref())
                .filter(|p| p.metadata.namespace.as_deref() == namespace)
                .collect();
            desired(&service, &candidates)
        });
        let Some((endpoints, slice)) = wanted else {
            // The Service is gone (or has no selector): remove what we manage.
            if self.services.get(key).is_none() {
                if cached_endpoints.is_some() {
                    delete(&self.client, endpoints_resource(), namespace, name).await?;
                }
                if cached_slice.is_some() {
                    delete(&self.client, slices_resource(), namespace, name).await?;
                }
            }
            return Ok(Outcome::Done);
        };
        match cached_endpoints {
            Some(current)
                if current.subsets == endpoints.subsets
                    && current.metadata.labels == endpoints.metadata.labels => {}
            Some(current) => {
                let mut next = endpoints;
                next.metadata.resource_version = current.metadata.resource_version.clone();
                self.client
                    .update::<Endpoints, Endpoints>(endpoints_resource(), namespace, name, &next)
                    .await
                    .map_err(ReconcileError::api("update endpoints"))?;
            }
            None => {
                create_or_replace(
                    &self.client,
                    endpoints_resource(),
                    namespace,
                    name,
                    &endpoints,
                )
                .await?
            }
        }
        match cached_slice {
            Some(current)
                if current.endpoints == slice.endpoints
                    && current.ports == slice.ports
                    && current.metadata.labels == slice.metadata.labels => {}
            Some(current) => {
                let mut next = slice;
                next.metadata.resource_version = current.metadata.resource_version.clone();
                self.client
                    .update::<EndpointSlice, EndpointSlice>(
                        slices_resource(),
                        namespace,
                        name,
                        &next,
                    )
                    .await
                    .map_err(ReconcileError::api("update endpoint slice"))?;
            }
            None => {
                create_or_replace(&self.client, slices_resource(), namespace, name, &slice).await?
            }
        }
        Ok(Outcome::Done)
    }
}

async fn delete(
    client: &Client,
    resource: &ResourceInfo,
    namespace: Option<&str>,
    name: &str,
) -> Result<(), ReconcileError> {
    match client
        .delete::<serde_json::Value>(resource, namespace, name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if e.is_not_found() => Ok(()),
        Err(e) => Err(ReconcileError::api(format!("delete {}", resource.plural))(
            e,
        )),
    }
}

/// Creates the object; if it exists already (the cache is behind), replaces it.
async fn create_or_replace<
    T: serde::Serialize + serde::de::DeserializeOwned + k8s_openapi::Metadata<Ty = ObjectMeta> + Clone,
>(
    client: &Client,
    resource: &ResourceInfo,
    namespace: Option<&str>,
    name: &str,
    object: &T,
) -> Result<(), ReconcileError> {
    match client.create::<T, T>(resource, namespace, object).await {
        Ok(_) => Ok(()),
        Err(e) if e.is_already_exists() => {
            let current: T = client
                .get(resource, namespace, name)
                .await
                .map_err(ReconcileError::api(format!("get {}", resource.plural)))?;
            let mut next = object.clone();
            next.metadata_mut().resource_version = current.metadata().resource_version.clone();
            client
                .update::<T, T>(resource, namespace, name, &next)
                .await
                .map_err(ReconcileError::api(format!("replace {}", resource.plural)))?;
            Ok(())
        }
        Err(e) => Err(ReconcileError::api(format!("create {}", resource.plural))(
            e,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_objects::{labels, meta, pod};
    use k8s_openapi::api::core::v1::{ContainerPort, ServicePort, ServiceSpec};

    fn service() -> Service {
        Service {
            metadata: meta("web", "uid-svc"),
            spec: Some(ServiceSpec {
                selector: Some(labels(&[("app", "web")])),
                ports: Some(vec![ServicePort {
                    name: Some("http".into()),
                    port: 80,
                    target_port: Some(IntOrString::String("http".into())),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            status: None,
        }
    }

    #[test]
    fn ready_and_not_ready_pods_are_separated_and_terminating_ones_leave() {
        let owner = meta("rs", "uid-rs");
        let mut ready = pod("ready", &owner, "ReplicaSet", "Running", true);
        ready.spec.as_mut().expect("spec").containers =
            vec![k8s_openapi::api::core::v1::Container {
                name: "c".into(),
                ports: Some(vec![ContainerPort {
                    name: Some("http".into()),
                    container_port: 8080,
                    ..Default::default()
                }]),
                ..Default::default()
            }];
        let mut starting = ready.clone();
        starting.metadata.name = Some("starting".into());
        starting.status.as_mut().expect("status").pod_ip = Some("10.0.0.2".into());
        starting.status.as_mut().expect("status").conditions = None;
        let mut leaving = ready.clone();
        leaving.metadata.name = Some("leaving".into());
        leaving.metadata.deletion_timestamp = Some(crate::owners::time_at(5));
        let mut other = ready.clone();
        other.metadata.labels = Some(labels(&[("app", "db")]));
        let (endpoints, slice) =
            desired(&service(), &[&ready, &starting, &leaving, &other]).expect("selector");
        let subsets = endpoints.subsets.expect("subsets");
        assert_eq!(subsets.len(), 1);
        let ips = |a: &Option<Vec<EndpointAddress>>| -> Vec<String> {
            a.iter().flatten().map(|a| a.ip.clone()).collect()
        };
        assert_eq!(ips(&subsets[0].addresses), ["10.0.0.5"]);
        assert_eq!(ips(&subsets[0].not_ready_addresses), ["10.0.0.2"]);
        assert_eq!(subsets[0].ports.as_ref().expect("ports")[0].port, 8080);
        assert_eq!(slice.endpoints.as_ref().map(|e| e.len()), Some(2));
        assert_eq!(
            slice
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                .map(String::as_str),
            Some("web")
        );
        // No selector: not ours.
        let mut manual = service();
        manual.spec.as_mut().expect("spec").selector = None;
        assert!(desired(&manual, &[&ready]).is_none());
    }
}
