//! A controller written with kube-rs's runtime against kemu, as an operator author writes one:
//! a `Greeting` custom resource derived with `#[derive(CustomResource, KubeSchema)]`, its CRD
//! installed from `Greeting::crd()` (with a CEL rule kube-derive put in the schema), and a
//! `kube::runtime::Controller` whose reconciler keeps a ConfigMap owned by each Greeting,
//! writes the Greeting's status, and cleans up through a finalizer. The controller manager
//! runs beside it, so its garbage collector sees ConfigMaps owned by a custom object.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::control_plane::start_controllers;
use common::{wait_until, Cluster};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{finalizer, Event as Finalizer};
use kube::runtime::watcher;
use kube::{Client, CustomResource, CustomResourceExt, KubeSchema, Resource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::json;

const NS: &str = "default";
const FINALIZER: &str = "greetings.kemu.example.com/cleanup";
const MANAGER: &str = "greeting-controller";
const WAIT: Duration = Duration::from_secs(30);

/// What a Greeting asks for: a ConfigMap holding its message, `copies` times.
#[derive(CustomResource, KubeSchema, Deserialize, Serialize, Clone, Debug)]
#[kube(
    group = "kemu.example.com",
    version = "v1",
    kind = "Greeting",
    namespaced,
    status = "GreetingStatus",
    shortname = "gr",
    printcolumn = r#"{"name":"Message","type":"string","jsonPath":".spec.message"}"#
)]
#[x_kube(validation = Rule::new("self.copies <= 5").message("at most 5 copies"))]
#[serde(rename_all = "camelCase")]
pub struct GreetingSpec {
    message: String,
    #[serde(default)]
    copies: i32,
}

/// What the controller reports.
#[derive(Deserialize, Serialize, Clone, Debug, Default, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GreetingStatus {
    config_map: String,
    observed_generation: i64,
}

struct Context {
    client: Client,
    cleanups: AtomicUsize,
}

#[derive(Debug, thiserror::Error)]
enum ReconcileError {
    #[error("kube: {0}")]
    Kube(#[from] kube::Error),
    #[error("the greeting has no namespace")]
    NoNamespace,
}

async fn reconcile(
    greeting: Arc<Greeting>,
    ctx: Arc<Context>,
) -> Result<Action, kube::runtime::finalizer::Error<ReconcileError>> {
    let ns = greeting.namespace().unwrap_or_else(|| NS.to_string());
    let greetings: Api<Greeting> = Api::namespaced(ctx.client.clone(), &ns);
    finalizer(&greetings, FINALIZER, greeting, |event| async {
        match event {
            Finalizer::Apply(greeting) => apply(&greeting, &ctx).await,
            Finalizer::Cleanup(greeting) => cleanup(&greeting, &ctx).await,
        }
    })
    .await
}

/// Server-side applies the owned ConfigMap, then the status.
async fn apply(greeting: &Greeting, ctx: &Context) -> Result<Action, ReconcileError> {
    let ns = greeting.namespace().ok_or(ReconcileError::NoNamespace)?;
    let name = greeting.name_any();
    let owner = greeting
        .controller_owner_ref(&())
        .ok_or(ReconcileError::NoNamespace)?;
    let text = vec![greeting.spec.message.as_str(); greeting.spec.copies.max(1) as usize].join(" ");
    let config_map = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "ownerReferences": [owner]},
        "data": {"greeting": text},
    });
    let params = PatchParams::apply(MANAGER).force();
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    config_maps
        .patch(&name, &params, &Patch::Apply(&config_map))
        .await?;
    let status = json!({
        "apiVersion": "kemu.example.com/v1",
        "kind": "Greeting",
        "status": {
            "configMap": name,
            "observedGeneration": greeting.metadata.generation.unwrap_or(0),
        },
    });
    let greetings: Api<Greeting> = Api::namespaced(ctx.client.clone(), &ns);
    greetings
        .patch_status(&name, &params, &Patch::Apply(&status))
        .await?;
    Ok(Action::requeue(Duration::from_secs(300)))
}

/// Deletes the ConfigMap before the Greeting goes.
async fn cleanup(greeting: &Greeting, ctx: &Context) -> Result<Action, ReconcileError> {
    let ns = greeting.namespace().ok_or(ReconcileError::NoNamespace)?;
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    match config_maps
        .delete(&greeting.name_any(), &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    ctx.cleanups.fetch_add(1, Ordering::SeqCst);
    Ok(Action::await_change())
}

fn error_policy(
    _greeting: Arc<Greeting>,
    error: &kube::runtime::finalizer::Error<ReconcileError>,
    _ctx: Arc<Context>,
) -> Action {
    eprintln!("reconcile failed: {error}");
    Action::requeue(Duration::from_millis(500))
}

fn greeting(name: &str, message: &str, copies: i32) -> Greeting {
    let mut g = Greeting::new(
        name,
        GreetingSpec {
            message: message.into(),
            copies,
        },
    );
    g.meta_mut().namespace = Some(NS.into());
    g
}

async fn config_map_text(api: &Api<ConfigMap>, name: &str) -> Option<String> {
    let cm = api.get_opt(name).await.ok()??;
    cm.data?.get("greeting").cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kube_rs_controller_reconciles_custom_resources() -> anyhow::Result<()> {
    let cluster = Cluster::start(1).await?;
    let _controllers = start_controllers(&cluster, 40)?;
    let client = cluster.kube_client().await?;

    // The CRD kube-derive generates, CEL rule included, is accepted and established.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = Greeting::crd();
    assert!(serde_json::to_string(&crd)?.contains("self.copies <= 5"));
    crds.create(&PostParams::default(), &crd).await?;
    let crd_name = crd.name_any();
    wait_until("the Greeting CRD is established", WAIT, || {
        let crds = crds.clone();
        let crd_name = crd_name.clone();
        async move {
            crds.get(&crd_name).await.ok().is_some_and(|c| {
                c.status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            })
        }
    })
    .await?;

    let greetings: Api<Greeting> = Api::namespaced(client.clone(), NS);
    let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    // The rule kube-derive wrote into the schema holds.
    let refused = greetings
        .create(&PostParams::default(), &greeting("too-many", "hi", 9))
        .await;
    match refused {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422);
            assert!(
                status
                    .message
                    .contains("spec: Invalid value: \"object\": at most 5 copies"),
                "{}",
                status.message
            );
        }
        other => panic!("a greeting with 9 copies was not refused: {other:?}"),
    }

    let ctx = Arc::new(Context {
        client: client.clone(),
        cleanups: AtomicUsize::new(0),
    });
    let controller = Controller::new(greetings.clone(), watcher::Config::default())
        .owns(config_maps.clone(), watcher::Config::default())
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|_| async {});
    let controller = tokio::spawn(controller);

    // Reconciled: an owned ConfigMap, the status, the finalizer.
    greetings
        .create(&PostParams::default(), &greeting("hello", "hi", 2))
        .await?;
    wait_until(
        "the controller writes the ConfigMap and the status",
        WAIT,
        || {
            let greetings = greetings.clone();
            let config_maps = config_maps.clone();
            async move {
                let status_done = greetings.get_status("hello").await.ok().is_some_and(|g| {
                    g.status
                        .is_some_and(|s| s.config_map == "hello" && s.observed_generation == 1)
                });
                status_done
                    && config_map_text(&config_maps, "hello").await.as_deref() == Some("hi hi")
            }
        },
    )
    .await?;
    let hello = greetings.get("hello").await?;
    assert_eq!(hello.finalizers(), [FINALIZER.to_string()]);
    let cm = config_maps.get("hello").await?;
    let owner = &cm.owner_references()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        (
            "Greeting",
            "hello",
            hello.uid().unwrap_or_default().as_str()
        )
    );
    assert_eq!(owner.controller, Some(true));

    // A spec change is reconciled; a deleted ConfigMap comes back (the controller owns them).
    greetings
        .patch(
            "hello",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"message": "hey", "copies": 3}})),
        )
        .await?;
    wait_until("the ConfigMap follows the spec", WAIT, || {
        let config_maps = config_maps.clone();
        async move { config_map_text(&config_maps, "hello").await.as_deref() == Some("hey hey hey") }
    })
    .await?;
    let generation_two = |g: Greeting| g.status.is_some_and(|s| s.observed_generation == 2);
    wait_until("the status records generation 2", WAIT, || {
        let greetings = greetings.clone();
        async move {
            greetings
                .get_status("hello")
                .await
                .ok()
                .is_some_and(generation_two)
        }
    })
    .await?;
    config_maps
        .delete("hello", &DeleteParams::default())
        .await?;
    wait_until("the controller recreates its ConfigMap", WAIT, || {
        let config_maps = config_maps.clone();
        async move { config_map_text(&config_maps, "hello").await.is_some() }
    })
    .await?;
    // The garbage collector keeps a ConfigMap whose owner is a live custom object.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(config_maps.get_opt("hello").await?.is_some());

    // Deletion runs the finalizer's cleanup, which removes the ConfigMap, then the Greeting
    // goes.
    greetings.delete("hello", &DeleteParams::default()).await?;
    wait_until("the greeting and its ConfigMap are gone", WAIT, || {
        let greetings = greetings.clone();
        let config_maps = config_maps.clone();
        async move {
            greetings
                .get_opt("hello")
                .await
                .ok()
                .is_some_and(|g| g.is_none())
                && config_maps
                    .get_opt("hello")
                    .await
                    .ok()
                    .is_some_and(|c| c.is_none())
        }
    })
    .await?;
    // At least once: an owned ConfigMap's deletion can queue the Greeting again before the
    // controller's cache has seen it go, and cleanups are idempotent, as on any cluster.
    assert!(ctx.cleanups.load(Ordering::SeqCst) >= 1);

    controller.abort();
    cluster.api.stop().await;
    cluster.store.stop().await;
    Ok(())
}
