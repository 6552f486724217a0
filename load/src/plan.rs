//! The `[load]` plan: what to create, how fast, and what counts as passing.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How the pods are created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadMode {
    /// Bare pods, created one request each.
    #[default]
    Pods,
    /// Through Deployments (not generated yet: the plan refuses it).
    Deployments,
    /// Through ReplicaSets (not generated yet: the plan refuses it).
    ReplicaSets,
}

/// The kind of a workload object the plan creates beside its bare pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Serialize)]
pub enum WorkloadKind {
    Deployment,
    StatefulSet,
    DaemonSet,
    Job,
}

impl WorkloadKind {
    pub const ALL: [WorkloadKind; 4] = [
        WorkloadKind::Deployment,
        WorkloadKind::StatefulSet,
        WorkloadKind::DaemonSet,
        WorkloadKind::Job,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Deployment => "Deployment",
            WorkloadKind::StatefulSet => "StatefulSet",
            WorkloadKind::DaemonSet => "DaemonSet",
            WorkloadKind::Job => "Job",
        }
    }
}

/// One `[[load.workloads]]` entry: `count` objects of `kind`, spread round-robin over the
/// plan's namespaces, created at `rate` objects per second alongside the bare pods.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadPlan {
    pub kind: WorkloadKind,
    /// Objects of this kind in all.
    #[serde(default = "one")]
    pub count: u32,
    /// Pods per object (a Job's parallelism and completions); a DaemonSet has one per node and
    /// takes none.
    #[serde(default)]
    pub replicas: Option<u32>,
    /// Objects created per second.
    #[serde(default = "one_per_second")]
    pub rate: f64,
    /// A StatefulSet's `podManagementPolicy` (`OrderedReady` or `Parallel`; Kubernetes'
    /// default, OrderedReady, without it).
    #[serde(default)]
    pub pod_management_policy: Option<String>,
    /// A StatefulSet's claims: a `volumeClaimTemplate` (`data`, mounted at `/data`), so each
    /// pod gets a PersistentVolumeClaim `data-POD` of its own from the StatefulSet controller,
    /// deleted with the set (`persistentVolumeClaimRetentionPolicy.whenDeleted: Delete`).
    #[serde(default)]
    pub claims: bool,
    /// With `claims`: each claim's `resources.requests.storage`; the plan's `claim_size`
    /// without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_size: Option<String>,
    /// With `claims`: the claims' `storageClassName`; the plan's `storage_class` (else the
    /// cluster's default class) without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
}

fn one() -> u32 {
    1
}

fn one_per_second() -> f64 {
    1.0
}

impl WorkloadPlan {
    /// Pods per object (1 for a DaemonSet, which has one per node).
    pub fn pods_per_object(&self) -> u32 {
        self.replicas.unwrap_or(1)
    }
}

/// A load plan, as the `[load]` table of a cluster config or a file given to `kemu load`.
/// Unknown keys are errors. Every default is in [`LoadPlan::default`].
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoadPlan {
    /// Pods to create in all (before churn).
    pub pods: u64,
    /// Creates per second, kept open-loop: create `i` is sent at `start + i / rate`.
    pub rate: f64,
    /// Deletes per second; `None` means the same as `rate`.
    pub delete_rate: Option<f64>,
    /// Namespaces the pods are spread over, round-robin: `kemu-load-0` … `kemu-load-{n-1}`.
    pub namespaces: u32,
    pub mode: LoadMode,
    /// A built-in pod template (`pause`), used unless `template_file` is set.
    pub template: String,
    /// A pod manifest (YAML or JSON) to use as the template; its name and namespace are replaced.
    pub template_file: Option<PathBuf>,
    /// Init containers added to the built-in template.
    pub init_containers: u32,
    /// Give the built-in template's container readiness and liveness probes.
    pub probes: bool,
    /// How long to wait for every pod to be Running, per create phase.
    pub running_timeout_seconds: f64,
    /// How long to keep the pods Running before deleting them.
    pub hold_seconds: f64,
    /// Delete the pods at the end (false leaves them Running, e.g. for a scale test).
    pub delete: bool,
    /// `gracePeriodSeconds` of the deletes; `None` leaves the pod's own (the node host finishes
    /// the deletion, as a kubelet does).
    pub delete_grace_seconds: Option<i64>,
    /// How long to wait for every deleted pod to be gone, per delete phase.
    pub gone_timeout_seconds: f64,
    /// Churn cycles after the first create: each deletes `churn_percent` of the pods and
    /// re-creates as many, then waits until they are Running.
    pub churn_cycles: u32,
    pub churn_percent: f64,
    /// The SLO: p99 of pod_startup (create sent → Running observed on the watch), milliseconds.
    pub slo_pod_startup_p99_ms: f64,
    /// Requests in flight at most; beyond it the pacer waits (and reports the lag).
    pub max_in_flight: u32,
    /// Speak HTTP/2 (prior knowledge) instead of HTTP/1.1 over a connection pool.
    pub http2: bool,
    /// Give bare pods a PersistentVolumeClaim each (named as the pod, created just before it,
    /// deleted after it), mounted at `/data`.
    pub claims: bool,
    /// With `claims`: the share of the bare pods that get one, in percent, spread evenly over
    /// the creates (the others run without, so pod startup is compared side by side).
    pub claims_percent: f64,
    /// With `claims`: each claim's `resources.requests.storage`.
    pub claim_size: String,
    /// With `claims`: the claims' `storageClassName`; the cluster's default class without it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_class: Option<String>,
    /// How long to wait for every deleted claim to be gone and its volume reclaimed.
    pub claims_gone_timeout_seconds: f64,
    /// Workload objects created beside the bare pods (`[[load.workloads]]`), measured per kind.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workloads: Vec<WorkloadPlan>,
    /// Run a clusterloader2 test config instead of the pod load above (whose keys are then
    /// unused): `cl2 = { config = "...", overrides = [...], params = ["K=V"] }`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cl2: Option<crate::cl2::Cl2Options>,
}

impl Default for LoadPlan {
    fn default() -> Self {
        LoadPlan {
            pods: 500,
            rate: 100.0,
            delete_rate: None,
            namespaces: 1,
            mode: LoadMode::Pods,
            template: "pause".into(),
            template_file: None,
            init_containers: 0,
            probes: false,
            running_timeout_seconds: 300.0,
            hold_seconds: 0.0,
            delete: true,
            delete_grace_seconds: None,
            gone_timeout_seconds: 300.0,
            churn_cycles: 0,
            churn_percent: 10.0,
            slo_pod_startup_p99_ms: 5000.0,
            max_in_flight: 512,
            http2: false,
            claims: false,
            claims_percent: 100.0,
            claim_size: "1Gi".into(),
            storage_class: None,
            claims_gone_timeout_seconds: 300.0,
            workloads: Vec::new(),
            cl2: None,
        }
    }
}

/// A plan field with a value it cannot have.
#[derive(Debug, thiserror::Error)]
#[error("load.{field}: {reason}")]
pub struct PlanError {
    pub field: &'static str,
    pub reason: String,
}

fn bad(field: &'static str, reason: impl Into<String>) -> PlanError {
    PlanError {
        field,
        reason: reason.into(),
    }
}

/// Built-in pod templates.
pub const BUILT_IN_TEMPLATES: &[&str] = &["pause"];

impl LoadPlan {
    /// Reads a plan file: TOML, either the `[load]` table's keys at the top or a whole cluster
    /// config with a `[load]` table.
    pub fn from_toml(text: &str) -> anyhow::Result<LoadPlan> {
        let value: toml::Table = toml::from_str(text)?;
        let table = match value.get("load") {
            Some(toml::Value::Table(t)) => t.clone(),
            _ => value,
        };
        Ok(LoadPlan::deserialize(toml::Value::Table(table))?)
    }

    /// Whether the run has claims: the bare pods' or a workload's.
    pub fn any_claims(&self) -> bool {
        self.claims || self.workloads.iter().any(|w| w.claims)
    }

    /// The size of workload `w`'s claims: its own `claim_size`, else the plan's.
    pub fn workload_claim_size<'a>(&'a self, w: &'a WorkloadPlan) -> &'a str {
        w.claim_size.as_deref().unwrap_or(&self.claim_size)
    }

    /// The class of workload `w`'s claims: its own `storage_class`, else the plan's.
    pub fn workload_storage_class<'a>(&'a self, w: &'a WorkloadPlan) -> Option<&'a str> {
        w.storage_class.as_deref().or(self.storage_class.as_deref())
    }

    pub fn effective_delete_rate(&self) -> f64 {
        self.delete_rate.unwrap_or(self.rate)
    }

    /// Pods each churn cycle deletes and re-creates.
    pub fn churn_pods(&self) -> u64 {
        ((self.pods as f64) * self.churn_percent / 100.0).round() as u64
    }

    /// Whether bare pod `i` gets a claim: `claims_percent` of the pods, spread evenly (with
    /// 50, every second pod).
    pub fn pod_has_claim(&self, i: u64) -> bool {
        if !self.claims {
            return false;
        }
        let share = |n: u64| ((n as f64) * self.claims_percent / 100.0).floor() as u64;
        share(i + 1) > share(i)
    }

    fn validate_claims(&self) -> Result<(), PlanError> {
        if !(self.claims_percent > 0.0 && self.claims_percent <= 100.0) {
            return Err(bad("claims_percent", "must be in (0, 100]"));
        }
        check_claim_size("claim_size", &self.claim_size)?;
        if let Some(class) = &self.storage_class {
            check_storage_class("storage_class", class)?;
        }
        if !(self.claims_gone_timeout_seconds.is_finite() && self.claims_gone_timeout_seconds > 0.0)
        {
            return Err(bad(
                "claims_gone_timeout_seconds",
                "must be a positive number of seconds",
            ));
        }
        if !self.claims {
            return Ok(());
        }
        if self.pods == 0 {
            return Err(bad(
                "claims",
                "gives bare pods claims, and the plan has none",
            ));
        }
        if self.template_file.is_some() {
            return Err(bad(
                "claims",
                "only the built-in templates mount a claim (not template_file)",
            ));
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), PlanError> {
        self.validate_claims()?;
        if self.pods == 0 && self.workloads.is_empty() {
            return Err(bad(
                "pods",
                "must be at least 1 (or give [[load.workloads]])",
            ));
        }
        for w in &self.workloads {
            if w.count == 0 {
                return Err(bad("workloads.count", "must be at least 1"));
            }
            if !(w.rate.is_finite() && w.rate > 0.0) {
                return Err(bad(
                    "workloads.rate",
                    "must be a positive number of objects per second",
                ));
            }
            match (w.kind, w.replicas) {
                (WorkloadKind::DaemonSet, Some(_)) => {
                    return Err(bad(
                        "workloads.replicas",
                        "a DaemonSet has one pod per node and takes no replicas",
                    ))
                }
                (_, Some(0)) => return Err(bad("workloads.replicas", "must be at least 1")),
                _ => {}
            }
            validate_workload_claims(w)?;
            if let Some(policy) = &w.pod_management_policy {
                if w.kind != WorkloadKind::StatefulSet {
                    return Err(bad(
                        "workloads.pod_management_policy",
                        "only a StatefulSet has one",
                    ));
                }
                if !["OrderedReady", "Parallel"].contains(&policy.as_str()) {
                    return Err(bad(
                        "workloads.pod_management_policy",
                        format!("{policy:?}: supported values: \"OrderedReady\", \"Parallel\""),
                    ));
                }
            }
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(bad(
                "rate",
                "must be a positive number of creates per second",
            ));
        }
        if let Some(r) = self.delete_rate {
            if !(r.is_finite() && r > 0.0) {
                return Err(bad(
                    "delete_rate",
                    "must be a positive number of deletes per second",
                ));
            }
        }
        if self.namespaces == 0 {
            return Err(bad("namespaces", "must be at least 1"));
        }
        if self.mode != LoadMode::Pods {
            return Err(bad(
                "mode",
                "only \"pods\" is supported: the load generator does not create deployments or \
                 replicasets yet",
            ));
        }
        if self.template_file.is_none() && !BUILT_IN_TEMPLATES.contains(&self.template.as_str()) {
            return Err(bad(
                "template",
                format!(
                    "unknown built-in template {:?} (known: {})",
                    self.template,
                    BUILT_IN_TEMPLATES.join(", ")
                ),
            ));
        }
        for (field, v) in [
            ("running_timeout_seconds", self.running_timeout_seconds),
            ("gone_timeout_seconds", self.gone_timeout_seconds),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(bad(field, "must be a positive number of seconds"));
            }
        }
        if !(self.hold_seconds.is_finite() && self.hold_seconds >= 0.0) {
            return Err(bad("hold_seconds", "must be zero or more seconds"));
        }
        if let Some(g) = self.delete_grace_seconds {
            if g < 0 {
                return Err(bad("delete_grace_seconds", "must be zero or more"));
            }
        }
        if !(self.churn_percent > 0.0 && self.churn_percent <= 100.0) {
            return Err(bad("churn_percent", "must be in (0, 100]"));
        }
        if self.churn_cycles > 0 && self.churn_pods() == 0 {
            return Err(bad(
                "churn_percent",
                "churns no pod: raise it or the pod count",
            ));
        }
        if !(self.slo_pod_startup_p99_ms.is_finite() && self.slo_pod_startup_p99_ms > 0.0) {
            return Err(bad("slo_pod_startup_p99_ms", "must be positive"));
        }
        if self.max_in_flight == 0 {
            return Err(bad("max_in_flight", "must be at least 1"));
        }
        Ok(())
    }
}

/// A claim size: a positive quantity.
fn check_claim_size(field: &'static str, size: &str) -> Result<(), PlanError> {
    match api::quantity::parse(size) {
        Ok(q) if !q.is_negative() && !q.is_zero() => Ok(()),
        _ => Err(bad(
            field,
            format!("{size:?}: must be a positive quantity, e.g. \"1Gi\""),
        )),
    }
}

/// A StorageClass name.
fn check_storage_class(field: &'static str, class: &str) -> Result<(), PlanError> {
    if is_dns_subdomain(class) {
        Ok(())
    } else {
        Err(bad(
            field,
            format!("{class:?}: must be a lowercase RFC 1123 subdomain"),
        ))
    }
}

/// A workload entry's `claims`, `claim_size` and `storage_class`.
fn validate_workload_claims(w: &WorkloadPlan) -> Result<(), PlanError> {
    if w.claims && w.kind != WorkloadKind::StatefulSet {
        return Err(bad(
            "workloads.claims",
            format!(
                "only a StatefulSet has volumeClaimTemplates (this entry is a {})",
                w.kind.as_str()
            ),
        ));
    }
    if let Some(size) = &w.claim_size {
        if !w.claims {
            return Err(bad("workloads.claim_size", "needs claims = true"));
        }
        check_claim_size("workloads.claim_size", size)?;
    }
    if let Some(class) = &w.storage_class {
        if !w.claims {
            return Err(bad("workloads.storage_class", "needs claims = true"));
        }
        check_storage_class("workloads.storage_class", class)?;
    }
    Ok(())
}

/// A lowercase RFC 1123 subdomain, as Kubernetes names a StorageClass.
fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        LoadPlan::default().validate().unwrap();
    }

    #[test]
    fn reads_a_load_table_or_bare_keys() {
        let plan = LoadPlan::from_toml("[load]\npods = 10\nrate = 5.5\n").unwrap();
        assert_eq!((plan.pods, plan.rate), (10, 5.5));
        assert_eq!(plan.namespaces, 1);
        let plan = LoadPlan::from_toml("pods = 3\nchurn_cycles = 2\n").unwrap();
        assert_eq!((plan.pods, plan.churn_cycles), (3, 2));
    }

    #[test]
    fn workloads_are_read_and_checked() {
        let plan = LoadPlan::from_toml(
            "pods = 0\n[[workloads]]\nkind = \"StatefulSet\"\ncount = 2\nreplicas = 3\nrate = 0.5\npod_management_policy = \"Parallel\"\n[[workloads]]\nkind = \"DaemonSet\"\n",
        )
        .unwrap();
        plan.validate().unwrap();
        assert_eq!(plan.workloads.len(), 2);
        assert_eq!(plan.workloads[0].kind, WorkloadKind::StatefulSet);
        assert_eq!(plan.workloads[0].pods_per_object(), 3);
        assert_eq!((plan.workloads[1].count, plan.workloads[1].rate), (1, 1.0));
        let bad = LoadPlan::from_toml("[[workloads]]\nkind = \"DaemonSet\"\nreplicas = 2\n")
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(
            bad.to_string().starts_with("load.workloads.replicas:"),
            "{bad}"
        );
        assert!(LoadPlan::from_toml("[[workloads]]\nkind = \"CronJob\"\n").is_err());
        let e = LoadPlan::from_toml("pods = 0\n")
            .unwrap()
            .validate()
            .unwrap_err();
        assert!(e.to_string().starts_with("load.pods:"), "{e}");
    }

    #[test]
    fn the_example_workload_clusters_are_valid_plans() {
        let clusters = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../clusters");
        for name in ["daemonset-5k", "statefulset-1k", "mixed-500", "claims-5k"] {
            let text = std::fs::read_to_string(clusters.join(format!("{name}.toml"))).unwrap();
            let plan = LoadPlan::from_toml(&text).unwrap();
            plan.validate().unwrap();
            assert!(!plan.workloads.is_empty() || plan.claims, "{name}");
        }
    }

    #[test]
    fn claims_are_read_and_checked() {
        let plan = LoadPlan::from_toml(
            "pods = 10\nclaims = true\nclaims_percent = 50\nclaim_size = \"2Gi\"\nstorage_class = \"fast\"\n",
        )
        .unwrap();
        plan.validate().unwrap();
        let with: Vec<u64> = (0..6).filter(|&i| plan.pod_has_claim(i)).collect();
        assert_eq!(with, [1, 3, 5]);
        let all = LoadPlan {
            claims: true,
            ..Default::default()
        };
        assert!((0..10).all(|i| all.pod_has_claim(i)));
        assert!(!LoadPlan::default().pod_has_claim(0));
        for (text, field) in [
            ("claims = true\nclaim_size = \"lots\"\n", "claim_size"),
            ("claims = true\nclaim_size = \"0\"\n", "claim_size"),
            ("claims = true\nclaims_percent = 0\n", "claims_percent"),
            (
                "claims = true\nstorage_class = \"Fast_1\"\n",
                "storage_class",
            ),
            (
                "claims = true\npods = 0\n[[workloads]]\nkind = \"Job\"\n",
                "claims",
            ),
            ("claims = true\ntemplate_file = \"pod.yaml\"\n", "claims"),
        ] {
            let e = LoadPlan::from_toml(text).unwrap().validate().unwrap_err();
            assert!(
                e.to_string().starts_with(&format!("load.{field}:")),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn statefulset_claims_are_read_and_checked() {
        let plan = LoadPlan::from_toml(
            "pods = 0\nclaim_size = \"3Gi\"\n[[workloads]]\nkind = \"StatefulSet\"\nclaims = true\n[[workloads]]\nkind = \"StatefulSet\"\nclaims = true\nclaim_size = \"5Gi\"\nstorage_class = \"fast\"\n",
        )
        .unwrap();
        plan.validate().unwrap();
        assert!(plan.any_claims() && !plan.claims);
        let (a, b) = (&plan.workloads[0], &plan.workloads[1]);
        assert_eq!(plan.workload_claim_size(a), "3Gi");
        assert_eq!(plan.workload_storage_class(a), None);
        assert_eq!(plan.workload_claim_size(b), "5Gi");
        assert_eq!(plan.workload_storage_class(b), Some("fast"));
        assert!(!LoadPlan::default().any_claims());
        for (entry, field) in [
            ("kind = \"Deployment\"\nclaims = true\n", "workloads.claims"),
            (
                "kind = \"StatefulSet\"\nclaims = true\nclaim_size = \"-1Gi\"\n",
                "workloads.claim_size",
            ),
            (
                "kind = \"StatefulSet\"\nclaim_size = \"1Gi\"\n",
                "workloads.claim_size",
            ),
            (
                "kind = \"StatefulSet\"\nclaims = true\nstorage_class = \"A\"\n",
                "workloads.storage_class",
            ),
            (
                "kind = \"StatefulSet\"\nstorage_class = \"fast\"\n",
                "workloads.storage_class",
            ),
        ] {
            let text = format!("pods = 0\n[[workloads]]\n{entry}");
            let e = LoadPlan::from_toml(&text).unwrap().validate().unwrap_err();
            assert!(
                e.to_string().starts_with(&format!("load.{field}:")),
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn unknown_keys_are_errors() {
        let e = LoadPlan::from_toml("pods = 3\npodz = 4\n").unwrap_err();
        assert!(e.to_string().contains("podz"), "{e}");
    }

    #[test]
    fn errors_name_the_field() {
        let e = LoadPlan {
            rate: 0.0,
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "load.rate: must be a positive number of creates per second"
        );
        let plan = LoadPlan::from_toml("mode = \"deployments\"\n").unwrap();
        let e = plan.validate().unwrap_err();
        assert!(e.to_string().starts_with("load.mode:"), "{e}");
        let e = LoadPlan {
            template: "nginx".into(),
            ..Default::default()
        }
        .validate()
        .unwrap_err();
        assert!(e.to_string().starts_with("load.template:"), "{e}");
    }
}
