//! One chaos run at the store level: the register workload, the prober and the watch recorder
//! run while the executor works through the schedule; then every check runs and the results
//! become a [`ChaosReport`].

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use store::client::Client;
use tokio::sync::watch;
use tracing::info;

use super::actions::ScheduledAction;
use super::availability;
use super::convergence;
use super::executor::Executor;
use super::history::{Operation, RegisterOutput};
use super::linearizability::{self, LinearizabilityConfig, Verdict};
use super::recorder;
use super::report::{AcknowledgedWrites, ChaosReport, HistorySummary};
use super::service;
use super::targets::ChaosCluster;
use super::watch_check::{self, value_hash, WatchedEvent};
use super::workload::{self, RegisterWorkload};
use super::RunClock;

/// Settings of a store-level chaos run. Defaults in [`ChaosRunConfig::default`].
#[derive(Clone, Debug)]
pub struct ChaosRunConfig {
    pub duration: Duration,
    pub register_clients: usize,
    pub register_keys: usize,
    /// Pause between one register client's operations.
    pub think: Duration,
    pub probe_interval: Duration,
    /// Pause between one API server's probe writes.
    pub api_probe_interval: Duration,
    /// How long members may take to agree after the run.
    pub convergence_timeout: Duration,
    /// Recoveries slower than this fail the availability check.
    pub recover_limit_s: Option<f64>,
    /// How long the probes may go on after the run's end while an action has not recovered.
    pub recovery_tail: Duration,
    pub step_budget: u64,
    pub seed: u64,
    /// Every key of the run lives under it; unique per run.
    pub prefix: String,
}

impl Default for ChaosRunConfig {
    fn default() -> Self {
        ChaosRunConfig {
            duration: Duration::from_secs(60),
            register_clients: 4,
            register_keys: 4,
            think: Duration::from_millis(2),
            probe_interval: Duration::from_millis(20),
            api_probe_interval: Duration::from_millis(100),
            convergence_timeout: Duration::from_secs(30),
            recover_limit_s: None,
            recovery_tail: Duration::from_secs(30),
            step_budget: LinearizabilityConfig::default().step_budget,
            seed: 1,
            prefix: format!("/kemu-chaos/{:08x}/", rand::random::<u32>()),
        }
    }
}

fn elapsed_ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// Runs `schedule` against `cluster` under the register workload for `config.duration`, then
/// checks everything.
pub async fn run(
    cluster: Arc<dyn ChaosCluster>,
    schedule: Vec<ScheduledAction>,
    config: &ChaosRunConfig,
) -> anyhow::Result<ChaosReport> {
    run_until(cluster, schedule, config, std::future::pending()).await
}

/// [`run`], ending early when `stop` resolves (`kemu run`: when the load is done).
pub async fn run_until(
    cluster: Arc<dyn ChaosCluster>,
    schedule: Vec<ScheduledAction>,
    config: &ChaosRunConfig,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<ChaosReport> {
    let admin = cluster.store_client(Duration::from_secs(2), Duration::from_secs(10))?;
    let prefix = config.prefix.clone();
    let start_revision = recorder::current_revision(&admin, &prefix).await? + 1;
    let clock = RunClock::start();
    // The wall-clock time of the run clock's zero: the load report places actions with it.
    let started_at = chrono::Utc::now();

    let (stop_tx, stop_rx) = watch::channel(false);
    let (until_tx, until_rx) = watch::channel(None);
    let recorder_task = tokio::spawn(recorder::record(
        cluster.store_client(Duration::from_secs(2), Duration::from_secs(10))?,
        prefix.clone(),
        start_revision,
        until_rx,
        Duration::from_secs(30),
    ));
    let workload = RegisterWorkload {
        prefix: prefix.clone(),
        clients: config.register_clients,
        keys: config.register_keys,
        think: config.think,
        seed: config.seed,
    };
    let factory_cluster = cluster.clone();
    let register_task = tokio::spawn(workload::run_register(
        workload,
        move |_| factory_cluster.store_client(Duration::from_secs(2), Duration::from_secs(5)),
        clock,
        stop_rx.clone(),
    ));
    let store_log = workload::ProbeLog::default();
    let prober_task = tokio::spawn(workload::run_prober(
        cluster.store_client(Duration::from_secs(1), Duration::from_secs(3))?,
        format!("{prefix}probe"),
        config.probe_interval,
        clock,
        stop_rx.clone(),
        store_log.clone(),
    ));
    let mut api_logs = Vec::new();
    let api_probers: Vec<_> = cluster
        .api_servers()?
        .into_iter()
        .map(|(server, api)| {
            let log = workload::ProbeLog::default();
            api_logs.push((server.clone(), log.clone()));
            let task = tokio::spawn(workload::run_api_prober(
                api,
                format!("kemu-chaos-probe-{server}"),
                config.api_probe_interval,
                clock,
                stop_rx.clone(),
                log,
            ));
            (server, task)
        })
        .collect();

    let executor = Executor::new(cluster.clone(), admin.clone(), clock, config.seed);
    let deadline = tokio::time::Instant::now() + config.duration;
    let (end_tx, end_rx) = watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => {}
            _ = stop => {}
        }
        let _ = end_tx.send(true);
    });
    let ended = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|e| *e).await;
    };
    let actions = executor
        .run(schedule.clone(), 0.0, ended(end_rx.clone()))
        .await;
    ended(end_rx).await;
    // An action just before the end is measured too: the probes go on until every disruptive
    // action has a successful write sent after it, for at most `recovery_tail`.
    let tail = Instant::now();
    let recovered = wait_for_recovery(&actions, &store_log, &api_logs, config.recovery_tail).await;
    info!(
        recovered,
        waited_ms = elapsed_ms(tail) as u64,
        "chaos: actions done; probes stopped"
    );
    let _ = stop_tx.send(true);
    let history = register_task.await??;
    let probes = prober_task.await?;
    let mut api_probes = Vec::new();
    for (server, task) in api_probers {
        let (probes, errors) = task.await?;
        api_probes.push(service::ServerProbes {
            server,
            probes,
            errors,
        });
    }
    let run_s = clock.secs();
    info!(
        operations = history.len(),
        probes = probes.len(),
        "chaos: load stopped; checking"
    );

    let final_revision = final_revision(&admin, &prefix).await?;
    let _ = until_tx.send(Some(final_revision));
    let recorded = recorder_task.await?;

    let mut checker_ms = BTreeMap::new();
    let t = Instant::now();
    let endpoints: Vec<_> = cluster
        .store_members()
        .into_iter()
        .map(|(_, e)| e)
        .collect();
    let convergence =
        convergence::wait_for_convergence(&admin, &endpoints, config.convergence_timeout).await;
    checker_ms.insert("convergence".to_string(), elapsed_ms(t));

    let reference = recorder::reference_history(
        &admin,
        &prefix,
        start_revision,
        final_revision,
        Duration::from_secs(60),
    )
    .await?;

    let t = Instant::now();
    let mut watch =
        watch_check::check(&recorded.events, &reference, start_revision, final_revision);
    if let Some(e) = &recorded.error {
        watch.passed = false;
        watch.examples.insert(0, format!("recorder: {e}"));
    }
    checker_ms.insert("watch".to_string(), elapsed_ms(t));

    let t = Instant::now();
    let acknowledged = acknowledged_writes(&history, &reference);
    checker_ms.insert("acknowledged_writes".to_string(), elapsed_ms(t));

    let t = Instant::now();
    let lin_config = LinearizabilityConfig {
        step_budget: config.step_budget,
    };
    let as_recorded = linearizability::check(&history, &HashMap::new(), &lin_config);
    checker_ms.insert("linearizability".to_string(), elapsed_ms(t));
    let t = Instant::now();
    let applied: HashSet<(&str, u64)> = reference
        .iter()
        .filter(|e| !e.deleted)
        .map(|e| (e.key.as_str(), e.value_hash))
        .collect();
    let resolved = linearizability::resolve_ambiguous(&history, |key, value| {
        applied.contains(&(key, value_hash(value.as_bytes())))
    });
    let narrowed = linearizability::check(&resolved, &HashMap::new(), &lin_config);
    checker_ms.insert("linearizability_narrowed".to_string(), elapsed_ms(t));

    let t = Instant::now();
    let availability = availability::analyse(&probes, &actions, 1.0, config.recover_limit_s);
    checker_ms.insert("availability".to_string(), elapsed_ms(t));
    // Pod measures join under `kemu run`, where the load's pods are known.
    let service = (!api_probes.is_empty()).then(|| service::analyse(&api_probes, None, &actions));

    let violation = |r: &linearizability::LinearizabilityReport| {
        r.keys
            .iter()
            .any(|k| matches!(k.verdict, Verdict::Violation { .. }))
    };
    let linearizable = !violation(&as_recorded)
        && narrowed.passed
        && (as_recorded.passed || !violation(&narrowed));
    let summary = HistorySummary::of(&history, resolved.len());
    let passed = linearizable
        && watch.passed
        && acknowledged.passed
        && convergence.passed
        && availability.passed
        && service.as_ref().is_none_or(|s| s.passed);
    Ok(ChaosReport {
        schema: super::report::SCHEMA_ID.into(),
        started_at: started_at.to_rfc3339(),
        duration_s: run_s,
        passed,
        interrupted: false,
        prefix,
        schedule,
        actions,
        history: summary,
        linearizability: as_recorded,
        linearizability_narrowed: narrowed,
        watch,
        acknowledged_writes: acknowledged,
        convergence,
        availability,
        service,
        accounting: None,
        load_watch: None,
        checker_ms,
        register_history: history,
        api_probes,
    })
}

/// Runs `plan` for `config.duration` against the cluster `kemu up` made in `dir` (what `kemu
/// chaos --dir` and `kemu run` call). In netns mode the clients live in the cluster's bridge
/// namespace. The report is returned, not written.
/// `stop` ends the run before `config.duration` (`kemu run`: when the load is done).
pub async fn run_on_cluster_dir(
    dir: &std::path::Path,
    plan: &crate::plan::ChaosPlan,
    config: &ChaosRunConfig,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<ChaosReport> {
    let schedule = super::actions::schedule(plan, config.duration.as_secs_f64())?;
    let target = super::targets::ClusterDirTarget::open(dir)?;
    let net = cluster::netns::NetAccess::for_layout(target.layout())?;
    let cluster: Arc<dyn ChaosCluster> = Arc::new(target);
    let config = config.clone();
    net.run(async move { run_until(cluster, schedule, &config, stop).await })
        .await?
}

/// Check 3 for the load: every recorded pod watch (one per namespace and API server) against
/// the store's own history of the run's pods in that namespace (`/registry/pods/<ns>/load-<run>-…`).
/// Each unbroken stretch of a watch — from a list to the next list, or to the last revision it
/// is known complete through — must have every event of its revisions. Values are not
/// compared (the store holds the stored encoding, the watch a re-encoding): revisions, keys and
/// deletions are. A watch that had to re-list lost its place: a failure, unless its API server
/// was killed since the list before (`server_kills`: per server URL, the kills on the load's
/// clock) — a restarted server's cache starts after the client's resourceVersion, and
/// Kubernetes answers that with 410 Gone and a re-list too.
pub async fn check_load_watches(
    dir: &std::path::Path,
    histories: Vec<load::WatchHistory>,
    run_id: &str,
    server_kills: &HashMap<String, Vec<f64>>,
) -> anyhow::Result<watch_check::WatchCheckReport> {
    let target = super::targets::ClusterDirTarget::open(dir)?;
    let net = cluster::netns::NetAccess::for_layout(target.layout())?;
    let client = target.store_client(Duration::from_secs(2), Duration::from_secs(30))?;
    let pod_prefix = format!("load-{run_id}-");
    let server_kills = server_kills.clone();
    net.run(async move {
        let mut total = watch_check::WatchCheckReport::accumulator();
        for h in histories {
            let source = format!("{} via {}", h.namespace, h.server);
            if h.lists.is_empty() {
                total.passed = false;
                total
                    .examples
                    .push(format!("the watch of {source} never listed"));
                total.watches.push(format!("{source}: never listed"));
                continue;
            }
            let kills = server_kills.get(&h.server).map(Vec::as_slice).unwrap_or(&[]);
            let prefix = format!("/registry/pods/{}/", h.namespace);
            let mut line = watch_check::WatchCheckReport::accumulator();
            for (k, list) in h.lists.iter().enumerate() {
                let next = h.lists.get(k + 1);
                let events = &h.events[list.events_before..next.map_or(h.events.len(), |n| n.events_before)];
                if k > 0 {
                    if relist_follows_a_kill(h.lists[k - 1].t, list.t, kills) {
                        total.relists_after_restarts += 1;
                    } else {
                        total.passed = false;
                        total.examples.push(format!(
                            "the watch of {source} lost its place and re-listed at {:.1}s without a restart of its API server",
                            list.t
                        ));
                    }
                }
                // The last stretch is complete through the last bookmark; an earlier one
                // only through its last event (what came after it was lost with the server).
                let to = match next {
                    None => h.through_rv,
                    Some(_) => events.iter().map(|e| e.0).max().unwrap_or(list.rv),
                };
                let from = list.rv + 1;
                if from > to {
                    continue;
                }
                let reference: Vec<WatchedEvent> = recorder::reference_history(
                    &client,
                    &prefix,
                    from,
                    to,
                    Duration::from_secs(120),
                )
                .await?
                .into_iter()
                .filter(|e| {
                    e.key
                        .strip_prefix(&prefix)
                        .is_some_and(|name| name.starts_with(&pod_prefix))
                })
                .map(|e| WatchedEvent { value_hash: 0, ..e })
                .collect();
                let recorded: Vec<WatchedEvent> = events
                    .iter()
                    .map(|(rv, name, deleted)| WatchedEvent {
                        revision: *rv,
                        key: format!("{prefix}{name}"),
                        deleted: *deleted,
                        value_hash: 0,
                    })
                    .collect();
                let r = watch_check::check(&recorded, &reference, from, to);
                line.absorb(&r);
                total.absorb(&r);
                total
                    .examples
                    .extend(r.examples.into_iter().map(|e| format!("{source}: {e}")));
            }
            total.watches.push(format!(
                "{source}: revisions {}..={}, {} lists, {} events, {} missing, {} duplicated, {} out of order, {} phantom",
                h.lists[0].rv + 1,
                h.through_rv,
                h.lists.len(),
                line.recorded_events,
                line.missing,
                line.duplicates,
                line.out_of_order,
                line.phantom
            ));
        }
        if total.from_revision == i64::MAX {
            total.from_revision = 0;
        }
        total.examples.truncate(10);
        Ok(total)
    })
    .await?
}

/// Whether the API server of a watch that listed at `previous` and again at `relisted` was
/// killed in between (`kills`: times on the same clock).
fn relist_follows_a_kill(previous: f64, relisted: f64, kills: &[f64]) -> bool {
    kills.iter().any(|&t| t > previous && t <= relisted)
}

/// Waits until every disruptive action in `actions` has a successful store probe and API probe
/// sent after it (on the killed server itself after `kill-apiserver`, as
/// [`service::api_measure`] measures), or `limit` passed. Whether everything recovered.
async fn wait_for_recovery(
    actions: &[super::actions::ActionRecord],
    store: &workload::ProbeLog,
    api: &[(String, workload::ProbeLog)],
    limit: Duration,
) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    let mut pending: Vec<_> = actions.iter().filter(|a| a.disruptive).collect();
    loop {
        let servers: Vec<service::ServerProbes> = api
            .iter()
            .map(|(server, log)| service::ServerProbes {
                server: server.clone(),
                probes: log.lock().clone(),
                ..Default::default()
            })
            .collect();
        let store_probes = store.lock().clone();
        pending.retain(|a| {
            let store_ok = availability::first_ok_after(store_probes.iter(), a.at_s)
                .1
                .is_some();
            let api_ok = service::api_measure(&servers, a).is_none_or(|m| m.recover_s.is_some());
            !(store_ok && api_ok)
        });
        if pending.is_empty() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The revision after the run, retried while the store is still recovering.
async fn final_revision(client: &Client, prefix: &str) -> anyhow::Result<i64> {
    let mut last = None;
    for _ in 0..10 {
        match recorder::current_revision(client, prefix).await {
            Ok(r) => return Ok(r),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err(last.expect("ten attempts"))
}

/// Every write the store acknowledged with a revision must be in its history at that revision,
/// with its value: a write acknowledged and then lost would be missing.
pub fn acknowledged_writes(
    history: &[Operation],
    reference: &[watch_check::WatchedEvent],
) -> AcknowledgedWrites {
    let by_revision: HashMap<(i64, &str), u64> = reference
        .iter()
        .filter(|e| !e.deleted)
        .map(|e| ((e.revision, e.key.as_str()), e.value_hash))
        .collect();
    let mut report = AcknowledgedWrites {
        passed: true,
        checked: 0,
        missing: 0,
        examples: Vec::new(),
    };
    for op in history {
        let applied = matches!(
            op.output,
            RegisterOutput::Written | RegisterOutput::Cas { succeeded: true }
        );
        let (true, Some(revision), Some(value)) = (applied, op.revision, op.written_value()) else {
            continue;
        };
        report.checked += 1;
        if by_revision.get(&(revision, op.key.as_str())) != Some(&value_hash(value.as_bytes())) {
            report.missing += 1;
            if report.examples.len() < 10 {
                report.examples.push(format!(
                    "{} = {value} acknowledged at revision {revision} by client {} is not in the store's history",
                    op.key, op.client
                ));
            }
        }
    }
    report.passed = report.missing == 0;
    report
}

#[cfg(test)]
mod tests {
    use super::relist_follows_a_kill;

    #[test]
    fn only_a_kill_between_two_lists_excuses_the_relist() {
        assert!(relist_follows_a_kill(1.0, 9.0, &[5.0]));
        assert!(!relist_follows_a_kill(1.0, 9.0, &[]));
        // A kill before the first list, or after the relist, says nothing about it.
        assert!(!relist_follows_a_kill(6.0, 9.0, &[5.0, 9.5]));
    }

    use super::*;
    use crate::actions::{ActionKind, ActionRecord};
    use crate::availability::Probe;
    use crate::history::RegisterInput;
    use crate::watch_check::WatchedEvent;

    #[tokio::test]
    async fn probes_go_on_until_the_last_action_recovered() {
        let kill = |kind, target: &str, at| ActionRecord {
            at_s: at,
            kind,
            target: target.into(),
            detail: String::new(),
            disruptive: true,
        };
        let actions = vec![
            kill(ActionKind::KillStoreLeader, "s1", 10.0),
            kill(ActionKind::KillApiserver, "apiserver-1", 20.0),
        ];
        let ok = |sent: f64| Probe {
            sent_s: sent,
            done_s: sent + 0.1,
            ok: true,
        };
        let store = workload::ProbeLog::default();
        let api: Vec<(String, workload::ProbeLog)> = ["apiserver-0", "apiserver-1"]
            .iter()
            .map(|s| (s.to_string(), workload::ProbeLog::default()))
            .collect();
        store.lock().extend([ok(11.0), ok(21.0)]);
        // Writes on the other server say nothing about the killed one.
        api[0].1.lock().extend([ok(11.0), ok(21.0)]);
        let limit = Duration::from_millis(300);
        assert!(!wait_for_recovery(&actions, &store, &api, limit).await);

        // The killed server answers while the tail waits.
        let late = api[1].1.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            late.lock().push(ok(22.0));
        });
        let t = Instant::now();
        assert!(wait_for_recovery(&actions, &store, &api, Duration::from_secs(10)).await);
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_lost_acknowledged_write_is_found() {
        let write = |v: &str, rev: i64| Operation {
            client: 0,
            key: "/p/k0".into(),
            input: RegisterInput::Write { value: v.into() },
            output: RegisterOutput::Written,
            call_ns: 0,
            return_ns: Some(1),
            revision: Some(rev),
        };
        let history = vec![write("a", 5), write("b", 6)];
        let event = |v: &str, rev: i64| WatchedEvent {
            revision: rev,
            key: "/p/k0".into(),
            deleted: false,
            value_hash: value_hash(v.as_bytes()),
        };
        let complete = vec![event("a", 5), event("b", 6)];
        assert!(acknowledged_writes(&history, &complete).passed);
        // Planted: the store's history lacks the write acknowledged at revision 6.
        let lossy = vec![event("a", 5)];
        let r = acknowledged_writes(&history, &lossy);
        assert!(!r.passed);
        assert_eq!(r.missing, 1);
        assert!(r.examples[0].contains("revision 6"));
    }
}
