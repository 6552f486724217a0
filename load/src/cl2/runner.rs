//! Runs a loaded config: its namespaces, then each step in turn — a step's phases in parallel,
//! each paced by its tuning set, and its measurements in parallel — with clusterloader2's
//! phase semantics: per namespace and object bundle, replicas above the wanted count are
//! deleted (the bundle in reverse order), missing ones created, and when the count is already
//! right every replica is updated with a merge patch of its re-rendered template.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use hyper::Method;
use parking_lot::Mutex;
use serde_json::json;
use tokio::time::Instant;

use super::config::{LoadedConfig, Object, Phase, Step};
use super::gotmpl::Template;
use super::measurements::{MeasurementContext, MeasurementResult, Measurements};
use super::objects::{type_of, Objects};
use super::report::StepReport;
use super::tuning::{run_actions, GlobalBucket, Pacing};
use cluster::shutdown::Interrupt;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operation {
    Create,
    Update,
    Delete,
}

/// What the run's phases share.
pub struct Runner {
    pub config: Arc<LoadedConfig>,
    pub objects: Objects,
    pub prefix: String,
    templates: Mutex<HashMap<PathBuf, Arc<Template>>>,
    /// Replicas that exist, per (namespace, basename, template path).
    replicas: Mutex<HashMap<(String, String, String), u32>>,
    tuning: BTreeMap<String, (Pacing, Duration, Option<Arc<GlobalBucket>>)>,
    pub measurements: Measurements,
    seed: AtomicU64,
}

impl Runner {
    pub fn new(
        config: LoadedConfig,
        objects: Objects,
        prefix: String,
        context: MeasurementContext,
    ) -> Runner {
        let tuning = config
            .test
            .tuningsets
            .iter()
            .filter_map(|set| {
                let pacing = Pacing::from_config(set).ok()?;
                let bucket = match pacing {
                    Pacing::GlobalQps { qps, burst } => Some(GlobalBucket::new(qps, burst)),
                    _ => None,
                };
                Some((set.name.clone(), (pacing, set.initialdelay.0, bucket)))
            })
            .collect();
        Runner {
            config: Arc::new(config),
            measurements: Measurements::new(objects.clone(), context),
            objects,
            prefix,
            templates: Mutex::new(HashMap::new()),
            replicas: Mutex::new(HashMap::new()),
            tuning,
            seed: AtomicU64::new(1),
        }
    }

    /// The automanaged namespace `i` (1-based, as clusterloader2 numbers them).
    pub fn namespace(&self, i: u32) -> String {
        format!("{}-{i}", self.prefix)
    }

    fn namespaces_of(&self, phase: &Phase) -> Vec<String> {
        if !phase.namespacelist.is_empty() {
            return phase.namespacelist.clone();
        }
        match &phase.namespacerange {
            Some(range) => (range.min..=range.max)
                .map(|i| match &range.basename {
                    Some(base) => format!("{base}-{i}"),
                    None => self.namespace(i),
                })
                .collect(),
            // Cluster-scoped objects.
            None => vec![String::new()],
        }
    }

    fn template(&self, path: &PathBuf) -> Result<Arc<Template>, String> {
        if let Some(t) = self.templates.lock().get(path) {
            return Ok(t.clone());
        }
        let t = Arc::new(Template::from_file(path).map_err(|e| e.to_string())?);
        self.templates.lock().insert(path.clone(), t.clone());
        Ok(t)
    }

    /// Replica `index` of `object` in `namespace` as its template renders it (null when it
    /// renders to nothing); `lenient` prints unset parameters as Go does, for deletes.
    fn render(
        &self,
        object: &Object,
        namespace: &str,
        index: u32,
        lenient: bool,
    ) -> Result<serde_json::Value, String> {
        let path = self.config.file(&object.objecttemplatepath);
        let template = self.template(&path)?;
        let data = self.config.object_data(object, namespace, index);
        let rendered = if lenient {
            template.render_lenient(&data)
        } else {
            template.render(&data)
        }
        .map_err(|e| e.to_string())?;
        super::config::yaml(&path.display().to_string(), &rendered).map_err(|e| e.to_string())
    }

    /// Creates, updates or deletes replica `index` of `object` in `namespace`.
    async fn object(
        &self,
        object: &Object,
        namespace: &str,
        index: u32,
        operation: Operation,
    ) -> Result<(), String> {
        let name = format!("{}-{index}", object.basename);
        let mut body = self.render(object, namespace, index, operation == Operation::Delete)?;
        if body.is_null() {
            // A template that renders to nothing: clusterloader2 skips the object.
            return Ok(());
        }
        body["metadata"]["name"] = json!(name);
        let (api_version, kind) = type_of(&body);
        let resource = self
            .objects
            .resource(&api_version, &kind)
            .await
            .ok_or_else(|| format!("the API does not serve {kind} of {api_version}"))?;
        if resource.namespaced && !namespace.is_empty() {
            body["metadata"]["namespace"] = json!(namespace);
        }
        let collection = resource.collection(namespace);
        let item = format!("{collection}/{name}");
        let plural = resource.plural.as_str();
        match operation {
            Operation::Create => {
                self.objects
                    .send("create", plural, Method::POST, &collection, &body)
                    .await
            }
            Operation::Update => {
                self.objects
                    .send("patch", plural, Method::PATCH, &item, &body)
                    .await
            }
            Operation::Delete => {
                let options = json!({"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"});
                self.objects
                    .send("delete", plural, Method::DELETE, &item, &options)
                    .await
            }
        }
    }

    /// How many objects `object`'s `listUnknownObjectOptions` finds in `namespace`: those of
    /// its template's kind matching the selector.
    async fn unknown_replicas(&self, object: &Object, namespace: &str) -> Result<u32, String> {
        let Some(options) = &object.listunknownobjectoptions else {
            return Ok(0);
        };
        let selector = options.selector()?;
        let body = self.render(object, namespace, 0, true)?;
        if body.is_null() {
            return Ok(0);
        }
        let (api_version, kind) = type_of(&body);
        let resource = self
            .objects
            .resource(&api_version, &kind)
            .await
            .ok_or_else(|| format!("the API does not serve {kind} of {api_version}"))?;
        let found = self
            .objects
            .list_in(&resource, namespace, &selector)
            .await
            .ok_or_else(|| {
                format!(
                    "listing {} matching {selector:?} in {namespace:?} failed",
                    resource.plural
                )
            })?;
        Ok(found.len() as u32)
    }

    /// The actions of one phase, as clusterloader2 derives them from the replica counts.
    async fn phase_actions(
        self: &Arc<Self>,
        phase: &Phase,
        ops: &Arc<AtomicU64>,
        errors: &Arc<Mutex<Vec<String>>>,
    ) -> Vec<BoxFuture<'static, ()>> {
        let mut actions: Vec<BoxFuture<'static, ()>> = Vec::new();
        let want = phase.replicaspernamespace;
        for namespace in self.namespaces_of(phase) {
            // `/x.yaml` and `x.yaml` are one template.
            let key = |o: &Object| {
                (
                    namespace.clone(),
                    o.basename.clone(),
                    o.objecttemplatepath.trim_start_matches('/').to_string(),
                )
            };
            // Objects the phase meets for the first time start from what exists, where the
            // config says how to find it.
            let mut unknown = HashMap::new();
            for (j, o) in phase.objectbundle.iter().enumerate() {
                if o.listunknownobjectoptions.is_none()
                    || self.replicas.lock().contains_key(&key(o))
                {
                    continue;
                }
                match self.unknown_replicas(o, &namespace).await {
                    Ok(n) => {
                        unknown.insert(j, n);
                    }
                    Err(e) => {
                        tracing::warn!("cl2: {e}");
                        errors.lock().push(e);
                    }
                }
            }
            let current: Vec<u32> = {
                let replicas = self.replicas.lock();
                phase
                    .objectbundle
                    .iter()
                    .enumerate()
                    .map(|(j, o)| {
                        replicas
                            .get(&key(o))
                            .copied()
                            .or_else(|| unknown.get(&j).copied())
                            .unwrap_or(0)
                    })
                    .collect()
            };
            // Every object of a bundle has as many replicas, or clusterloader2 refuses the
            // phase in that namespace.
            if let Some(j) = (1..current.len()).find(|&j| current[j] != current[j - 1]) {
                let e = format!(
                    "namespace {namespace:?}: bundle error: {} has {} replicas while {} has {}",
                    phase.objectbundle[j].basename,
                    current[j],
                    phase.objectbundle[j - 1].basename,
                    current[j - 1]
                );
                tracing::warn!("cl2: {e}");
                errors.lock().push(e);
                continue;
            }
            {
                let mut replicas = self.replicas.lock();
                for o in &phase.objectbundle {
                    replicas.insert(key(o), want);
                }
            }
            let first = current.first().copied().unwrap_or(0);
            let mut plan: Vec<(u32, Operation)> = Vec::new();
            plan.extend((want..first).map(|i| (i, Operation::Delete)));
            if first == want {
                plan.extend((0..want).map(|i| (i, Operation::Update)));
            }
            plan.extend((first..want).map(|i| (i, Operation::Create)));
            for (index, operation) in plan {
                let runner = self.clone();
                let bundle = phase.objectbundle.clone();
                let current = current.clone();
                let namespace = namespace.clone();
                let (ops, errors) = (ops.clone(), errors.clone());
                actions.push(Box::pin(async move {
                    let order: Vec<usize> = match operation {
                        Operation::Delete => (0..bundle.len()).rev().collect(),
                        _ => (0..bundle.len()).collect(),
                    };
                    for j in order {
                        if operation == Operation::Delete && index >= current[j] {
                            continue;
                        }
                        let outcome = runner
                            .object(&bundle[j], &namespace, index, operation)
                            .await;
                        ops.fetch_add(1, Ordering::Relaxed);
                        if let Err(e) = outcome {
                            tracing::warn!("cl2: {e}");
                            errors.lock().push(e);
                        }
                    }
                }));
            }
        }
        actions
    }

    /// Runs one step: its phases, or its measurements.
    pub async fn step(
        self: &Arc<Self>,
        index: usize,
        step: &Step,
        start: Instant,
    ) -> (StepReport, Vec<MeasurementResult>) {
        let name = if step.name.is_empty() {
            format!("step {}", index + 1)
        } else {
            step.name.clone()
        };
        tracing::info!("cl2: {name}");
        let start_s = start.elapsed().as_secs_f64();
        let ops = Arc::new(AtomicU64::new(0));
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut phases = Vec::new();
        for phase in &step.phases {
            let actions = self.phase_actions(phase, &ops, &errors).await;
            let Some((pacing, delay, bucket)) = self.tuning.get(&phase.tuningset).cloned() else {
                continue;
            };
            let seed = self.seed.fetch_add(1, Ordering::Relaxed);
            phases.push(async move { run_actions(&pacing, delay, bucket, actions, seed).await });
        }
        futures::future::join_all(phases).await;
        let mut calls = Vec::new();
        for (i, m) in step.measurements.iter().enumerate() {
            if m.instances.is_empty() {
                calls.push((i, m.method.clone(), m.identifier.clone(), m.params.clone()));
            }
            for instance in &m.instances {
                let mut params = m.params.clone();
                params.extend(instance.params.clone());
                calls.push((i, m.method.clone(), instance.identifier.clone(), params));
            }
        }
        let measured =
            futures::future::join_all(calls.iter().map(|(i, method, id, params)| async {
                let mut result = self.measurements.execute(method, id, params).await;
                result.step = Some(index);
                result.index = *i;
                result.duration_s = start.elapsed().as_secs_f64() - start_s;
                result
            }))
            .await;
        let errors = errors.lock().clone();
        let failed_measurements = measured
            .iter()
            .filter(|r| matches!(r.verdict, super::measurements::Verdict::Failed(_)))
            .count();
        let report = StepReport {
            name,
            named: !step.name.is_empty(),
            start_s,
            end_s: start.elapsed().as_secs_f64(),
            object_operations: ops.load(Ordering::Relaxed),
            errors: errors.len() as u64,
            first_errors: errors.into_iter().take(5).collect(),
            measurements: calls.len() as u64,
            failed_measurements: failed_measurements as u64,
        };
        (report, measured)
    }

    /// Creates the automanaged namespaces (deleting stale ones of the prefix first, when the
    /// config asks).
    pub async fn create_namespaces(&self) -> anyhow::Result<()> {
        let settings = &self.config.test.namespace;
        if settings.deletestalenamespaces {
            self.delete_namespaces().await;
        }
        for i in 1..=settings.number {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": self.namespace(i)}});
            match self
                .objects
                .send(
                    "create",
                    "namespaces",
                    Method::POST,
                    "/api/v1/namespaces",
                    &body,
                )
                .await
            {
                Ok(()) => {}
                Err(e) if e.contains(": 409 ") && settings.enableexistingnamespaces => {}
                Err(e) => anyhow::bail!("creating namespace {}: {e}", self.namespace(i)),
            }
        }
        Ok(())
    }

    /// Deletes every namespace named `PREFIX-…`.
    pub async fn delete_namespaces(&self) {
        let Some(list) = self
            .objects
            .get("list", "namespaces", "/api/v1/namespaces")
            .await
        else {
            return;
        };
        let mine = format!("{}-", self.prefix);
        for ns in list["items"].as_array().into_iter().flatten() {
            let Some(name) = ns["metadata"]["name"].as_str() else {
                continue;
            };
            if name.starts_with(&mine) {
                let path = format!("/api/v1/namespaces/{name}");
                if let Err(e) = self
                    .objects
                    .send("delete", "namespaces", Method::DELETE, &path, &json!({}))
                    .await
                {
                    tracing::warn!("cl2: deleting namespace {name}: {e}");
                }
            }
        }
    }
}

/// Runs every step; stops between steps after a stop signal. The step reports and results.
pub async fn run_steps(
    runner: &Arc<Runner>,
    interrupt: &Interrupt,
    start: Instant,
) -> (Vec<StepReport>, Vec<MeasurementResult>, bool) {
    let mut steps = Vec::new();
    let mut results = Vec::new();
    let config = runner.config.clone();
    for (i, step) in config.test.steps.iter().enumerate() {
        if interrupt.requested() {
            return (steps, results, true);
        }
        let (report, measured) = tokio::select! {
            done = runner.step(i, step, start) => done,
            _ = interrupt.first() => return (steps, results, true),
        };
        steps.push(report);
        results.extend(measured);
    }
    (steps, results, false)
}
