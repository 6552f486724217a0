//! [`Resources`]: amounts of cpu, memory, ephemeral storage, pod slots and extended resources,
//! parsed once from quantities into integers so that filtering compares plain numbers.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The cpu a container without a cpu request counts for when scoring (kube-scheduler's
/// `DefaultMilliCPURequest`), so that request-less pods still spread.
pub const DEFAULT_MILLI_CPU_REQUEST: i64 = 100;
/// The memory a container without a memory request counts for when scoring (200 MiB).
pub const DEFAULT_MEMORY_REQUEST: i64 = 200 * 1024 * 1024;

/// A set of resource amounts. `pods` is a count of pod slots (allocatable) or of pods
/// (requested).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub milli_cpu: i64,
    /// Bytes.
    pub memory: i64,
    /// Bytes.
    pub ephemeral_storage: i64,
    pub pods: i64,
    /// Extended resources (`example.com/gpu`, `hugepages-2Mi`), sorted by name; usually empty.
    pub scalar: Vec<(Arc<str>, i64)>,
}

impl Resources {
    /// Reads a `ResourceList` (capacity, allocatable, requests); unparsable quantities count 0.
    pub fn from_list(list: &BTreeMap<String, Quantity>) -> Resources {
        let mut out = Resources::default();
        for (name, quantity) in list {
            out.set(name, quantity);
        }
        out
    }

    fn set(&mut self, name: &str, quantity: &Quantity) {
        let Ok(q) = api::quantity::parse(&quantity.0) else {
            return;
        };
        match name {
            "cpu" => self.milli_cpu = q.as_milli(),
            "memory" => self.memory = q.as_units(),
            "ephemeral-storage" => self.ephemeral_storage = q.as_units(),
            "pods" => self.pods = q.as_units(),
            other => self.set_scalar(other, q.as_units()),
        }
    }

    /// The amount of an extended resource (0 when absent).
    pub fn scalar(&self, name: &str) -> i64 {
        self.scalar
            .iter()
            .find(|(n, _)| &**n == name)
            .map_or(0, |(_, v)| *v)
    }

    fn set_scalar(&mut self, name: &str, value: i64) {
        match self.scalar.binary_search_by(|(n, _)| (**n).cmp(name)) {
            Ok(i) => self.scalar[i].1 = value,
            Err(i) => self.scalar.insert(i, (Arc::from(name), value)),
        }
    }

    /// Adds `other` to `self` (every field).
    pub fn add(&mut self, other: &Resources) {
        self.milli_cpu += other.milli_cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.pods += other.pods;
        for (name, value) in &other.scalar {
            let current = self.scalar(name);
            self.set_scalar(name, current + value);
        }
    }

    /// Subtracts `other` from `self` (every field).
    pub fn sub(&mut self, other: &Resources) {
        self.milli_cpu -= other.milli_cpu;
        self.memory -= other.memory;
        self.ephemeral_storage -= other.ephemeral_storage;
        self.pods -= other.pods;
        for (name, value) in &other.scalar {
            let current = self.scalar(name);
            self.set_scalar(name, current - value);
        }
    }

    /// Field-wise maximum.
    fn max_with(&mut self, other: &Resources) {
        self.milli_cpu = self.milli_cpu.max(other.milli_cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        for (name, value) in &other.scalar {
            let current = self.scalar(name);
            if *value > current {
                self.set_scalar(name, *value);
            }
        }
    }
}

/// A container's effective requests: its requests, with a limit standing in for a missing
/// request (what the API server's defaulting does).
fn container_requests(container: &Container) -> Resources {
    let Some(resources) = &container.resources else {
        return Resources::default();
    };
    let mut out = Resources::default();
    if let Some(limits) = &resources.limits {
        for (name, quantity) in limits {
            out.set(name, quantity);
        }
    }
    if let Some(requests) = &resources.requests {
        for (name, quantity) in requests {
            out.set(name, quantity);
        }
    }
    out.pods = 0;
    out
}

/// What a pod asks of a node, as `resource.PodRequests` computes it: the sum over containers,
/// at least the largest init container (plus the restartable "sidecar" init containers started
/// before it), plus the pod overhead; and one pod slot. The second value is the cpu and memory
/// counted for scoring, where a container without a request counts the defaults.
pub fn pod_requests(spec: &PodSpec) -> (Resources, (i64, i64)) {
    let mut sum = Resources::default();
    let mut non_zero = (0i64, 0i64);
    for container in &spec.containers {
        let r = container_requests(container);
        non_zero.0 += if r.milli_cpu == 0 {
            DEFAULT_MILLI_CPU_REQUEST
        } else {
            r.milli_cpu
        };
        non_zero.1 += if r.memory == 0 {
            DEFAULT_MEMORY_REQUEST
        } else {
            r.memory
        };
        sum.add(&r);
    }
    let mut sidecars = Resources::default();
    let mut init_max = Resources::default();
    for init in spec.init_containers.iter().flatten() {
        let r = container_requests(init);
        if init.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&r);
            sum.add(&r);
            init_max.max_with(&sidecars);
        } else {
            let mut during = sidecars.clone();
            during.add(&r);
            init_max.max_with(&during);
        }
    }
    sum.max_with(&init_max);
    if let Some(overhead) = &spec.overhead {
        let o = Resources::from_list(overhead);
        non_zero.0 += o.milli_cpu;
        non_zero.1 += o.memory;
        sum.add(&o);
    }
    sum.pods = 1;
    (sum, non_zero)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ResourceRequirements;

    fn container(requests: &[(&str, &str)], restart: Option<&str>) -> Container {
        Container {
            name: "c".into(),
            restart_policy: restart.map(str::to_string),
            resources: Some(ResourceRequirements {
                requests: Some(
                    requests
                        .iter()
                        .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn init_containers_count_by_their_maximum_and_overhead_adds() {
        let spec = PodSpec {
            containers: vec![
                container(&[("cpu", "100m"), ("memory", "64Mi")], None),
                container(&[("cpu", "200m"), ("example.com/gpu", "1")], None),
            ],
            init_containers: Some(vec![
                container(&[("cpu", "1"), ("memory", "10Mi")], None),
                container(&[("cpu", "500m")], None),
            ]),
            overhead: Some([("cpu".to_string(), Quantity("50m".into()))].into()),
            ..Default::default()
        };
        let (r, non_zero) = pod_requests(&spec);
        assert_eq!(r.milli_cpu, 1050);
        assert_eq!(r.memory, 64 * 1024 * 1024);
        assert_eq!(r.scalar("example.com/gpu"), 1);
        assert_eq!(r.pods, 1);
        // The second container has no memory request: the scoring default stands in.
        assert_eq!(non_zero, (350, 64 * 1024 * 1024 + DEFAULT_MEMORY_REQUEST));
    }

    #[test]
    fn sidecars_add_to_the_sum() {
        let spec = PodSpec {
            containers: vec![container(&[("cpu", "100m")], None)],
            init_containers: Some(vec![
                container(&[("cpu", "200m")], Some("Always")),
                container(&[("cpu", "250m")], None),
            ]),
            ..Default::default()
        };
        let (r, _) = pod_requests(&spec);
        // max(100 + 200, 200 + 250) = 450
        assert_eq!(r.milli_cpu, 450);
    }

    #[test]
    fn limits_stand_in_for_missing_requests() {
        let mut c = container(&[], None);
        c.resources.as_mut().unwrap().limits = Some(
            [("memory".to_string(), Quantity("1Gi".into()))]
                .into_iter()
                .collect(),
        );
        let (r, _) = pod_requests(&PodSpec {
            containers: vec![c],
            ..Default::default()
        });
        assert_eq!(r.memory, 1 << 30);
    }
}
