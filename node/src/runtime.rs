//! [`NodeRuntime`]: one emulated node's container runtime state, as plain data the pod lifecycle
//! core works on — the image cache, the pod IP pool of the node's podCIDR, the resources pods
//! have been admitted with, and the latency of each CRI call drawn from the runtime profile.
//! No I/O and no clock: the core asks it "how long does this take" and "which IP is free".

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};

use crate::addressing::{Cidr, PodIpPool};
use crate::config::RuntimeProfile;

/// A CRI call whose latency the profile gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CriCall {
    RunPodSandbox,
    PullImage,
    CreateContainer,
    StartContainer,
    StopContainer,
    StopPodSandbox,
    RemovePodSandbox,
}

/// Resources pods ask for, in milli-CPU, bytes and pod slots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resources {
    pub cpu_milli: i64,
    pub memory: i64,
    pub pods: i64,
}

impl Resources {
    fn plus(self, o: Resources) -> Resources {
        Resources {
            cpu_milli: self.cpu_milli + o.cpu_milli,
            memory: self.memory + o.memory,
            pods: self.pods + o.pods,
        }
    }

    fn minus(self, o: Resources) -> Resources {
        Resources {
            cpu_milli: self.cpu_milli - o.cpu_milli,
            memory: self.memory - o.memory,
            pods: self.pods - o.pods,
        }
    }
}

/// Why a pod does not fit: the pod's `status.reason` and `status.message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    pub reason: String,
    pub message: String,
}

/// Per-node runtime state.
#[derive(Debug)]
pub struct NodeRuntime {
    profile: Arc<RuntimeProfile>,
    failing_images: Arc<Vec<String>>,
    images: HashSet<String>,
    /// Pod IPs from the node's podCIDRs.
    pod_ips: PodIpPool,
    /// The node's InternalIPs, primary first: a host-network pod's IPs.
    pub host_ips: Vec<IpAddr>,
    pub allocatable: Resources,
    used: Resources,
    /// xorshift64* state: latency jitter, deterministic for a given seed.
    rng: u64,
}

impl NodeRuntime {
    pub fn new(
        profile: Arc<RuntimeProfile>,
        failing_images: Arc<Vec<String>>,
        images: &[String],
        pod_cidrs: Vec<Cidr>,
        host_ips: Vec<IpAddr>,
        allocatable: Resources,
        seed: u64,
    ) -> NodeRuntime {
        NodeRuntime {
            profile,
            failing_images,
            images: images.iter().cloned().collect(),
            pod_ips: PodIpPool::new(pod_cidrs),
            host_ips,
            allocatable,
            used: Resources::default(),
            rng: seed | 1,
        }
    }

    /// How long `call` takes this time: the profile's value ± its jitter.
    pub fn latency(&mut self, call: CriCall) -> Duration {
        let p = &self.profile;
        let ms = match call {
            CriCall::RunPodSandbox => p.run_sandbox_ms,
            CriCall::PullImage => p.pull_image_ms,
            CriCall::CreateContainer => p.create_container_ms,
            CriCall::StartContainer => p.start_container_ms,
            CriCall::StopContainer => p.stop_container_ms,
            CriCall::StopPodSandbox => p.stop_sandbox_ms,
            CriCall::RemovePodSandbox => p.remove_sandbox_ms,
        };
        if ms == 0 || p.jitter_percent == 0 {
            return Duration::from_millis(ms);
        }
        let spread = ms * p.jitter_percent as u64 / 100;
        let r = self.next_random() % (2 * spread + 1);
        Duration::from_millis(ms - spread + r)
    }

    fn next_random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Whether the node has the image already.
    pub fn has_image(&self, image: &str) -> bool {
        self.images.contains(image)
    }

    /// Whether a pull of `image` fails (its name matches a failing pattern).
    pub fn pull_fails(&self, image: &str) -> bool {
        self.failing_images
            .iter()
            .any(|p| !p.is_empty() && image.contains(p.as_str()))
    }

    pub fn store_image(&mut self, image: &str) {
        self.images.insert(image.to_string());
    }

    /// A pod's IPs, one per podCIDR (primary first), or `None` when the ranges are full.
    pub fn allocate_ips(&mut self) -> Option<Vec<IpAddr>> {
        self.pod_ips.allocate()
    }

    pub fn release_ips(&mut self, ips: &[IpAddr]) {
        self.pod_ips.release(ips);
    }

    /// Admits a pod asking for `request` if it fits; the kubelet's resource-fit admission.
    pub fn admit(&mut self, request: Resources) -> Result<(), Rejection> {
        let after = self.used.plus(request);
        let check = |name: &str, req: i64, used: i64, cap: i64, fits: bool| {
            if fits {
                Ok(())
            } else {
                Err(Rejection {
                    reason: format!("OutOf{name}"),
                    message: format!(
                        "Pod was rejected: Node didn't have enough resource: {name}, requested: {req}, used: {used}, capacity: {cap}"
                    ),
                })
            }
        };
        check(
            "pods",
            request.pods,
            self.used.pods,
            self.allocatable.pods,
            after.pods <= self.allocatable.pods,
        )?;
        check(
            "cpu",
            request.cpu_milli,
            self.used.cpu_milli,
            self.allocatable.cpu_milli,
            request.cpu_milli == 0 || after.cpu_milli <= self.allocatable.cpu_milli,
        )?;
        check(
            "memory",
            request.memory,
            self.used.memory,
            self.allocatable.memory,
            request.memory == 0 || after.memory <= self.allocatable.memory,
        )?;
        self.used = after;
        Ok(())
    }

    /// Gives back what an admitted pod held.
    pub fn release(&mut self, request: Resources) {
        self.used = self.used.minus(request);
    }

    pub fn used(&self) -> Resources {
        self.used
    }
}

/// What the pod asks of the node: the sum of its containers' requests, or the largest init
/// container's if more, and one pod slot.
pub fn pod_request(pod: &Pod) -> Resources {
    let Some(spec) = &pod.spec else {
        return Resources {
            pods: 1,
            ..Default::default()
        };
    };
    let of = |c: &Container| -> (i64, i64) {
        let requests = c
            .resources
            .as_ref()
            .and_then(|r| r.requests.as_ref().or(r.limits.as_ref()));
        let get = |k: &str, milli: bool| {
            requests
                .and_then(|r| r.get(k))
                .and_then(|q| api::quantity::parse(&q.0).ok())
                .map(|q| if milli { q.as_milli() } else { q.as_units() })
                .unwrap_or(0)
        };
        (get("cpu", true), get("memory", false))
    };
    let (mut cpu, mut mem) = (0, 0);
    for c in &spec.containers {
        let (a, b) = of(c);
        cpu += a;
        mem += b;
    }
    for c in spec.init_containers.iter().flatten() {
        let (a, b) = of(c);
        cpu = cpu.max(a);
        mem = mem.max(b);
    }
    Resources {
        cpu_milli: cpu,
        memory: mem,
        pods: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{NodeHostConfig, SANDBOX_IMAGE};

    fn runtime() -> NodeRuntime {
        NodeRuntime::new(
            Arc::new(RuntimeProfile::realistic()),
            Arc::new(vec!["fail".into()]),
            &[],
            vec![Cidr::parse("10.64.0.0/24").expect("a CIDR")],
            vec![IpAddr::from([100, 64, 0, 1])],
            Resources {
                cpu_milli: 1000,
                memory: 1 << 30,
                pods: 3,
            },
            7,
        )
    }

    #[test]
    fn a_node_starts_with_the_images_it_is_given() {
        let given = NodeHostConfig::default().images;
        assert!(given.iter().any(|i| i == SANDBOX_IMAGE), "{given:?}");
        let r = NodeRuntime::new(
            Arc::new(RuntimeProfile::instant()),
            Arc::new(Vec::new()),
            &given,
            vec![Cidr::parse("10.64.0.0/24").expect("a CIDR")],
            vec![IpAddr::from([100, 64, 0, 1])],
            Resources::default(),
            7,
        );
        assert!(r.has_image(SANDBOX_IMAGE));
        assert!(!r.has_image("nginx"));
    }

    #[test]
    fn ips_come_from_the_pod_cidr_and_are_reused() {
        let mut r = runtime();
        let a = r.allocate_ips().expect("ip");
        assert_eq!(a, [IpAddr::from([10, 64, 0, 2])]);
        r.release_ips(&a);
        assert_eq!(r.allocate_ips(), Some(a));
    }

    #[test]
    fn admission_checks_fit() {
        let mut r = runtime();
        let big = Resources {
            cpu_milli: 2000,
            memory: 0,
            pods: 1,
        };
        let e = r.admit(big).unwrap_err();
        assert_eq!(e.reason, "OutOfcpu");
        assert!(e.message.contains("requested: 2000"), "{}", e.message);
        let small = Resources {
            cpu_milli: 400,
            memory: 1 << 20,
            pods: 1,
        };
        r.admit(small).expect("fits");
        r.admit(small).expect("fits");
        assert_eq!(r.admit(small).unwrap_err().reason, "OutOfcpu");
        r.release(small);
        r.admit(small).expect("fits again");
    }

    #[test]
    fn latency_is_jittered_around_the_profile() {
        let mut r = runtime();
        for _ in 0..100 {
            let d = r.latency(CriCall::PullImage).as_millis();
            assert!((1200..=1800).contains(&d), "{d}");
        }
        assert!(r.pull_fails("registry/failing:1") && !r.pull_fails("nginx"));
    }
}
