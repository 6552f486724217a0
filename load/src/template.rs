//! Pod templates: the built-in `pause` pod (with optional init containers and probes) or a pod
//! manifest from a file. Every pod of a run carries the run's label, which its watches select.

use anyhow::{bail, Context};
use node::config::SANDBOX_IMAGE;
use serde_json::{json, Value};

use super::plan::LoadPlan;

/// The label every pod of a run carries, valued with the run's id.
pub const RUN_LABEL: &str = "kemu.dev/load-run";

/// The volume through which a load pod mounts its claim.
pub const CLAIM_VOLUME: &str = "data";

/// A pod body without name and namespace, filled in per pod by [`PodTemplate::pod`].
#[derive(Clone, Debug)]
pub struct PodTemplate {
    base: Value,
}

impl PodTemplate {
    pub fn from_plan(plan: &LoadPlan, run_id: &str) -> anyhow::Result<PodTemplate> {
        let mut base = match &plan.template_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("load.template_file: reading {}", path.display()))?;
                let value: Value = serde_saphyr::from_str(&text).map_err(|e| {
                    anyhow::anyhow!(
                        "load.template_file: parsing {}: {}",
                        path.display(),
                        e.without_snippet()
                    )
                })?;
                if value["kind"] != "Pod" {
                    bail!(
                        "load.template_file: {} is not a Pod manifest (kind {})",
                        path.display(),
                        value["kind"]
                    );
                }
                value
            }
            None => pause(plan.init_containers, plan.probes),
        };
        let metadata = base["metadata"].as_object_mut();
        let mut meta = metadata.cloned().unwrap_or_default();
        for field in [
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generateName",
            "managedFields",
        ] {
            meta.remove(field);
        }
        let mut labels = meta
            .get("labels")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        labels.insert(RUN_LABEL.into(), json!(run_id));
        labels.entry("app").or_insert(json!("kemu-load"));
        meta.insert("labels".into(), Value::Object(labels));
        base["metadata"] = Value::Object(meta);
        if let Some(status) = base.as_object_mut() {
            status.remove("status");
        }
        Ok(PodTemplate { base })
    }

    /// The pod spec, for the workloads' pod templates.
    pub fn spec(&self) -> Value {
        self.base["spec"].clone()
    }

    /// The create body of pod `name` in `namespace`.
    pub fn pod(&self, namespace: &str, name: &str) -> Value {
        let mut pod = self.base.clone();
        pod["metadata"]["name"] = json!(name);
        pod["metadata"]["namespace"] = json!(namespace);
        pod
    }

    /// The create body of pod `name` mounting claim `claim` (volume `data`, at `/data` in
    /// every container).
    pub fn pod_with_claim(&self, namespace: &str, name: &str, claim: &str) -> Value {
        let mut pod = self.pod(namespace, name);
        let volume = json!({"name": CLAIM_VOLUME, "persistentVolumeClaim": {"claimName": claim}});
        match pod["spec"]["volumes"].as_array_mut() {
            Some(volumes) => volumes.push(volume),
            None => pod["spec"]["volumes"] = json!([volume]),
        }
        if let Some(containers) = pod["spec"]["containers"].as_array_mut() {
            for c in containers {
                let mount = json!({"name": CLAIM_VOLUME, "mountPath": "/data"});
                match c["volumeMounts"].as_array_mut() {
                    Some(mounts) => mounts.push(mount),
                    None => c["volumeMounts"] = json!([mount]),
                }
            }
        }
        pod
    }
}

/// The built-in pause pod: one container with small requests, as clusterloader2's density test.
fn pause(init_containers: u32, probes: bool) -> Value {
    let mut container = json!({
        "name": "pause",
        "image": SANDBOX_IMAGE,
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
    });
    if probes {
        container["readinessProbe"] =
            json!({"httpGet": {"path": "/healthz", "port": 8080}, "periodSeconds": 10});
        container["livenessProbe"] = json!({"tcpSocket": {"port": 8080}, "periodSeconds": 10});
    }
    let mut spec = json!({"containers": [container], "terminationGracePeriodSeconds": 30});
    if init_containers > 0 {
        spec["initContainers"] = (0..init_containers)
            .map(|i| {
                json!({
                    "name": format!("init-{i}"),
                    "image": "registry.k8s.io/busybox:1.36",
                    "command": ["sh", "-c", "true"],
                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                })
            })
            .collect();
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}, "spec": spec})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_pods_carry_the_run_label() {
        let plan = LoadPlan {
            init_containers: 2,
            probes: true,
            ..Default::default()
        };
        let pod = PodTemplate::from_plan(&plan, "r1").unwrap().pod("ns", "p");
        assert_eq!(pod["metadata"]["labels"][RUN_LABEL], "r1");
        assert_eq!(pod["metadata"]["name"], "p");
        assert_eq!(pod["spec"]["containers"][0]["image"], SANDBOX_IMAGE);
        assert_eq!(pod["spec"]["initContainers"].as_array().unwrap().len(), 2);
        assert!(pod["spec"]["containers"][0]["readinessProbe"].is_object());
    }

    #[test]
    fn a_file_template_keeps_its_spec_and_loses_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pod.yaml");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\n  namespace: y\n  labels: {tier: web}\nspec:\n  containers:\n  - name: web\n    image: nginx\n",
        )
        .unwrap();
        let plan = LoadPlan {
            template_file: Some(path),
            ..Default::default()
        };
        let pod = PodTemplate::from_plan(&plan, "r2").unwrap().pod("ns", "p");
        assert_eq!(pod["metadata"]["namespace"], "ns");
        assert_eq!(pod["metadata"]["labels"]["tier"], "web");
        assert_eq!(pod["metadata"]["labels"][RUN_LABEL], "r2");
        assert_eq!(pod["spec"]["containers"][0]["image"], "nginx");
    }

    #[test]
    fn a_broken_template_file_is_reported_with_its_position() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pod.yaml");
        std::fs::write(&path, "apiVersion: v1\nkind: Pod\nspec:\n  containers: [\n").unwrap();
        let plan = LoadPlan {
            template_file: Some(path),
            ..Default::default()
        };
        let Err(error) = PodTemplate::from_plan(&plan, "r3") else {
            panic!("a broken template file was accepted");
        };
        let message = error.to_string();
        assert!(
            message.starts_with("load.template_file: parsing "),
            "{message}"
        );
        assert!(message.contains("line 4"), "{message}");
    }
}
