//! The garbage collector and custom resources, with the real kubectl and `kemu controllers`:
//! a ConfigMap owned by a custom object goes with it (background and foreground propagation),
//! stays behind without its owner reference under `--cascade=orphan`, is collected when its
//! owner reference names a custom object that does not exist, and goes when the CRD that
//! defined its owner is deleted.

use crate::common;

use std::time::Duration;

use common::control_plane::start_controllers;
use common::{wait_until, Cluster};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(30);

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.gc.example.com
spec:
  group: gc.example.com
  scope: Namespaced
  names:
    plural: gadgets
    singular: gadget
    kind: Gadget
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
"#;

fn gadget(name: &str) -> String {
    format!("apiVersion: gc.example.com/v1\nkind: Gadget\nmetadata:\n  name: {name}\nspec:\n  size: 1\n")
}

/// A ConfigMap owned by the Gadget `owner` of this uid.
fn owned_config_map(name: &str, owner: &str, uid: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  ownerReferences:\n  - apiVersion: gc.example.com/v1\n    kind: Gadget\n    name: {owner}\n    uid: {uid}\n    blockOwnerDeletion: true\ndata:\n  k: v\n"
    )
}

/// Creates a Gadget and a ConfigMap it owns; returns the Gadget's uid.
fn gadget_with_config_map(c: &Cluster, name: &str) -> String {
    c.ok_stdin(&["create", "-f", "-"], &gadget(name));
    let uid = c.ok(&["get", "gadget", name, "-o", "jsonpath={.metadata.uid}"]);
    c.ok_stdin(
        &["create", "-f", "-"],
        &owned_config_map(&format!("{name}-data"), name, &uid),
    );
    uid
}

fn config_map(c: &Cluster, name: &str) -> Option<Value> {
    let out = c.kubectl(&["get", "configmap", name, "-o", "json"]);
    out.status
        .success()
        .then(|| serde_json::from_slice(&out.stdout).unwrap_or(Value::Null))
}

async fn wait_gone(c: &Cluster, name: &str, why: &str) -> anyhow::Result<()> {
    wait_until(why, WAIT, || async { config_map(c, name).is_none() }).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_owners_are_collected() -> anyhow::Result<()> {
    let c = Cluster::start(1).await?;
    let controllers = start_controllers(&c, 40)?;
    c.ok_stdin(&["apply", "-f", "-"], CRD);
    c.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/gadgets.gc.example.com",
        "--timeout=30s",
    ]);

    // Background (kubectl's default): the owner goes at once, its ConfigMap after it.
    gadget_with_config_map(&c, "background");
    c.ok(&["delete", "gadget", "background"]);
    wait_gone(
        &c,
        "background-data",
        "the background owner's ConfigMap is collected",
    )
    .await?;

    // Foreground: the owner waits for its ConfigMap, then goes.
    gadget_with_config_map(&c, "foreground");
    c.ok(&["delete", "gadget", "foreground", "--cascade=foreground"]);
    assert!(config_map(&c, "foreground-data").is_none());
    assert!(!c.kubectl(&["get", "gadget", "foreground"]).status.success());

    // Orphan: the owner goes, its ConfigMap stays without the reference.
    gadget_with_config_map(&c, "orphan");
    c.ok(&["delete", "gadget", "orphan", "--cascade=orphan"]);
    let kept = config_map(&c, "orphan-data").expect("the orphaned ConfigMap is kept");
    assert!(
        kept["metadata"]["ownerReferences"]
            .as_array()
            .is_none_or(|r| r.is_empty()),
        "{kept}"
    );

    // A reference to a Gadget that does not exist dangles; one to a live Gadget holds.
    let live_uid = gadget_with_config_map(&c, "live");
    c.ok_stdin(
        &["create", "-f", "-"],
        &owned_config_map(
            "dangling-data",
            "ghost",
            "6a4c2f5e-0000-4000-8000-000000000000",
        ),
    );
    wait_gone(
        &c,
        "dangling-data",
        "a ConfigMap owned by a missing Gadget is collected",
    )
    .await?;
    // Same for a live Gadget's name with another uid (a Gadget since replaced).
    c.ok_stdin(
        &["create", "-f", "-"],
        &owned_config_map("stale-data", "live", "6a4c2f5e-0000-4000-8000-000000000001"),
    );
    wait_gone(
        &c,
        "stale-data",
        "a ConfigMap owned by a replaced Gadget is collected",
    )
    .await?;
    let live = config_map(&c, "live-data").expect("the live Gadget's ConfigMap is kept");
    assert_eq!(
        live["metadata"]["ownerReferences"][0]["uid"],
        live_uid.as_str()
    );
    assert!(config_map(&c, "orphan-data").is_some());

    // Deleting the CRD deletes its objects, and so their dependents.
    c.ok(&["delete", "crd", "gadgets.gc.example.com"]);
    wait_gone(
        &c,
        "live-data",
        "the ConfigMap of a Gadget deleted with its CRD is collected",
    )
    .await?;
    assert!(config_map(&c, "orphan-data").is_some());

    let log = controllers.log();
    assert!(log.contains("following custom resource"), "{log}");
    drop(controllers);
    c.api.stop().await;
    c.store.stop().await;
    Ok(())
}
