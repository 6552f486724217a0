//! `kemu run`: a cluster from a config, its `[load]` plan with the `[chaos]` plan alongside,
//! their reports joined, and the cluster stopped again — the `cluster`, `load` and `chaos`
//! crates composed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use chaos::actions::ActionKind;
use chaos::plan::ChaosPlan;
use chaos::report::ChaosReport;
use chaos::service::{self, PodTimes, ServiceReport};
use cluster::config::{ClusterConfig, HostMode};
use cluster::launcher;
use cluster::layout::{self, Kind, Layout};
use cluster::shutdown::Interrupt;
use cluster::state::ClusterState;
use cluster::supervisor::Supervisor;
use load::LoadOutcome;

use crate::run_config::RunConfig;

/// After the first stop signal, how long `kemu run` waits for the load's report (and the chaos
/// results joined to it) before it stops the cluster anyway.
pub const REPORT_GRACE: Duration = Duration::from_secs(30);

/// `kemu run`: up in the foreground, the load and chaos plans, the report, down.
///
/// A stop signal (Ctrl-C, SIGTERM) goes to the load first: it ends the phase under way, samples
/// the processes and writes its report while the cluster is still up; then the cluster is
/// stopped. The report gets [`REPORT_GRACE`]; a second signal stops the cluster at once.
pub async fn run(file: &Path, dir: Option<&Path>) -> anyhow::Result<ExitCode> {
    let config = RunConfig::load(file)?;
    let layout = launcher::prepare(&config.cluster, &config.text, dir, true)?;
    if config.cluster.hosts.mode == HostMode::Remote {
        bail!("kemu run needs a local or netns cluster; remote clusters are started by hand (kemu up --plan)");
    }
    let interrupt = Interrupt::listen();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let dir = layout.dir.clone();
    // The supervisor stops when told to, not on the signal itself: the load reports first.
    let mut supervisor = tokio::spawn(async move {
        let stop = async move {
            let _ = stop_rx.await;
        };
        Supervisor::run(&dir, stop).await
    });
    let started = tokio::select! {
        started = launcher::wait_until_running(&layout, || {
            supervisor
                .is_finished()
                .then(|| "the supervisor stopped".to_string())
        }) => started,
        _ = interrupt.first() => Err(anyhow::anyhow!("interrupted while {} was starting; no load ran", layout.name)),
    };
    let run_started = Instant::now();
    let mut supervised = None;
    let outcome = match started {
        Ok(()) => {
            // From the first signal on, the report has REPORT_GRACE; a second signal ends it.
            let cut_off = async {
                interrupt.first().await;
                tokio::select! {
                    _ = tokio::time::sleep(REPORT_GRACE) => format!("no report {} s after the stop signal", REPORT_GRACE.as_secs()),
                    _ = interrupt.second() => "a second stop signal".to_string(),
                }
            };
            tokio::select! {
                r = run_load(&config, &layout, &interrupt) => r,
                s = &mut supervisor => {
                    supervised = Some(s);
                    Err(anyhow::anyhow!("the cluster stopped before the run finished"))
                }
                why = cut_off => {
                    let json = layout.dir.join("report").join("load-report.json");
                    Err(anyhow::anyhow!(
                        "interrupted: stopped the cluster before the report was complete ({why}); {}",
                        if json.exists() {
                            format!("{} may hold the load's part", json.display())
                        } else {
                            "no report written".to_string()
                        }
                    ))
                }
            }
        }
        Err(e) => Err(e),
    };
    let run_s = run_started.elapsed().as_secs_f64();
    if interrupt.requested() {
        eprintln!("{}: stopping the cluster", layout.name);
    }
    let _ = stop_tx.send(());
    let supervised = match supervised {
        Some(s) => s,
        None => supervisor.await,
    }
    .context("supervisor task")?;
    let outcome = outcome?;
    supervised?;
    let verdict = if outcome.interrupted {
        "INTERRUPTED: the report holds what was measured until the stop signal"
    } else if outcome.passed {
        "PASSED"
    } else {
        "FAILED"
    };
    println!("{}: {verdict} (run {run_s:.0} s)", layout.name);
    for (what, path) in &outcome.files {
        println!("  {what:<12} {}", path.display());
    }
    Ok(if outcome.interrupted {
        interrupt.exit_code()
    } else if outcome.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What `run_load` did: whether every check passed, whether a stop signal cut it short, and
/// the files it wrote.
struct RunOutcome {
    passed: bool,
    interrupted: bool,
    files: Vec<(&'static str, PathBuf)>,
}

/// The API servers the load's watches do not go through (the kubeconfig names the first, or
/// in netns mode a forwarder): the chaos check records a pod watch through each of them too,
/// and the load spreads its requests over them with the first. In netns mode they are inside
/// the hosts' namespaces, out of the load's reach: none.
fn extra_watch_servers(layout: &Layout) -> Vec<String> {
    if layout.api_forward.is_some() {
        return Vec::new();
    }
    let first = layout.api_url();
    layout
        .api_http
        .iter()
        .map(|a| format!("https://{a}"))
        .filter(|url| *url != first)
        .collect()
}

/// Load clock + this = chaos clock (the two runs start at different moments).
fn chaos_offset(chaos: &ChaosReport, outcome: &LoadOutcome) -> f64 {
    load::report::seconds_between(&chaos.started_at, &outcome.report.started_at)
}

/// When each API server (by the URL the load's watches name it with) was killed, on the
/// load's clock.
fn api_server_kills(
    chaos: &ChaosReport,
    outcome: &LoadOutcome,
    layout: &Layout,
) -> HashMap<String, Vec<f64>> {
    let offset = chaos_offset(chaos, outcome);
    let servers: Vec<&str> = layout
        .components
        .iter()
        .filter(|c| c.kind == Kind::Apiserver)
        .map(|c| c.name.as_str())
        .collect();
    let mut kills: HashMap<String, Vec<f64>> = HashMap::new();
    for a in chaos
        .actions
        .iter()
        .filter(|a| a.disruptive && a.kind == ActionKind::KillApiserver)
    {
        let Some(i) = servers.iter().position(|s| *s == a.target) else {
            continue;
        };
        // netns mode: the load reaches the first API server through the forwarder.
        let url = match (i, layout.api_forward) {
            (0, Some(_)) => layout.api_url(),
            _ => match layout.api_http.get(i) {
                Some(addr) => format!("https://{addr}"),
                None => continue,
            },
        };
        kills.entry(url).or_default().push(a.at_s - offset);
    }
    kills
}

/// The chaos run's service report with the load's pods: when pods created after each action
/// were scheduled and reached Running (on the killed host's nodes after a node-host kill).
fn service_with_pods(
    chaos: &ChaosReport,
    outcome: &LoadOutcome,
    config: &ClusterConfig,
    layout: &Layout,
) -> ServiceReport {
    let offset = chaos_offset(chaos, outcome);
    let pods: Vec<PodTimes> = outcome
        .records
        .iter()
        .map(|r| PodTimes {
            create_sent_s: r.create_sent + offset,
            created: r.created,
            scheduled_s: r.scheduled_seen.map(|t| t + offset),
            running_s: r.running_seen.map(|t| t + offset),
            node: r.node.clone(),
        })
        .collect();
    // Node hosts own consecutive runs of `per_host` nodes (see `NODE_PREFIX`).
    let hosts: Vec<String> = layout
        .components
        .iter()
        .filter(|c| c.kind == Kind::Nodehost)
        .map(|c| c.name.clone())
        .collect();
    let per_host = config.nodes.per_host.max(1) as usize;
    let host_of = |node: &str| -> Option<String> {
        let i: usize = node.strip_prefix(layout::NODE_PREFIX)?.parse().ok()?;
        hosts.get(i / per_host).cloned()
    };
    service::analyse(&chaos.api_probes, Some((&pods, &host_of)), &chaos.actions)
}

/// Starts the `[chaos]` plan on the cluster in `dir`, to run until `done` fires.
fn spawn_chaos(
    dir: &Path,
    chaos_plan: ChaosPlan,
    done: tokio::sync::oneshot::Receiver<()>,
) -> tokio::task::JoinHandle<anyhow::Result<ChaosReport>> {
    let dir = dir.to_path_buf();
    let run_config = chaos::run::ChaosRunConfig {
        duration: CHAOS_HORIZON,
        seed: chaos_plan.seed,
        ..Default::default()
    };
    let stop = async move {
        let _ = done.await;
    };
    tokio::spawn(async move {
        chaos::run::run_on_cluster_dir(&dir, &chaos_plan, &run_config, stop).await
    })
}

/// Runs a clusterloader2 config with the `[chaos]` plan, if any, alongside: the chaos checks
/// that need no load of kemu's own (the register workload, availability and recovery of the
/// API) join the verdict.
async fn run_cl2(
    cl2: &load::cl2::Cl2Options,
    chaos_plan: Option<ChaosPlan>,
    layout: &Layout,
    report_dir: &Path,
    interrupt: &Interrupt,
) -> anyhow::Result<RunOutcome> {
    let run_json = report_dir.join("run.json");
    let processes = load::cl2::processes::ClusterView::from_cluster_dir(&layout.dir)?;
    let (cl2_done, cl2_done_rx) = tokio::sync::oneshot::channel::<()>();
    let chaos = chaos_plan.map(|plan| spawn_chaos(&layout.dir, plan, cl2_done_rx));
    let outcome = load::cl2::run(
        cl2,
        &cluster::api_access::KubeconfigChoice::file(&layout.kubeconfig),
        processes,
        report_dir,
        interrupt,
    )
    .await;
    let _ = cl2_done.send(());
    let chaos = match chaos {
        Some(task) => Some(task.await.context("chaos task")?.context("the chaos run")?),
        None => None,
    };
    let outcome = outcome?;
    println!("{}", outcome.summary);
    let interrupted = outcome.report.interrupted;
    let mut passed = outcome.passed;
    let mut files = vec![
        ("report", outcome.report_html.clone()),
        ("report json", outcome.report_json.clone()),
    ];
    let mut chaos_passed = None;
    if let Some(mut chaos) = chaos {
        chaos.interrupted = interrupted;
        chaos.passed &= !interrupted;
        let service = service::analyse(&chaos.api_probes, None, &chaos.actions);
        chaos.passed &= service.passed;
        chaos.service = Some(service);
        println!("{}", chaos.summary());
        let chaos_files = chaos.write(report_dir)?;
        files.push(("chaos json", chaos_files.json));
        files.push(("chaos history", chaos_files.history));
        passed &= chaos.passed;
        chaos_passed = Some(chaos.passed);
    }
    let summary = serde_json::json!({
        "passed": passed,
        "interrupted": interrupted,
        "cl2": {
            "passed": outcome.passed,
            "report_json": outcome.report_json,
            "report_html": outcome.report_html,
            "result_files": outcome.report.result_files,
        },
        "chaos": chaos_passed,
    });
    std::fs::write(&run_json, serde_json::to_vec_pretty(&summary)?)?;
    files.push(("summary", run_json));
    Ok(RunOutcome {
        passed,
        interrupted,
        files,
    })
}

/// Upper bound on a chaos plan's length under `kemu run`: its repeats stop when the load ends.
const CHAOS_HORIZON: Duration = Duration::from_secs(6 * 3600);

/// Runs the `[load]` plan with the `[chaos]` plan alongside; whether every check passed. A
/// stop signal of `interrupt` cuts the load short (see [`load::run`]); the chaos plan
/// ends with it, and its results join the report as they do after a whole run.
async fn run_load(
    config: &RunConfig,
    layout: &Layout,
    interrupt: &Interrupt,
) -> anyhow::Result<RunOutcome> {
    let report_dir = layout.dir.join("report");
    let processes = ClusterState::read(&layout.dir)?
        .map(|s| {
            s.components
                .iter()
                .filter_map(|c| {
                    c.pid.map(|pid| load::SampledProcess {
                        name: c.name.clone(),
                        pid,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let chaos_plan = config.chaos.clone().filter(ChaosPlan::has_actions);
    let run_json = report_dir.join("run.json");
    let Some(plan) = &config.load else {
        if chaos_plan.is_some() {
            bail!("the config has a [chaos] plan but no [load] plan: chaos runs alongside a load (or use `kemu chaos --dir` on a cluster from `kemu up`)");
        }
        println!("the config has no [load] plan: the cluster started and stopped cleanly");
        std::fs::write(
            &run_json,
            r#"{"passed": true, "load": null, "chaos": null}"#,
        )?;
        return Ok(RunOutcome {
            passed: true,
            interrupted: false,
            files: vec![("summary", run_json)],
        });
    };
    if let Some(cl2) = &plan.cl2 {
        return run_cl2(cl2, chaos_plan, layout, &report_dir, interrupt).await;
    }
    // Chaos first, so its clock starts before the load's; its repeats end with the load.
    let (load_done, load_done_rx) = tokio::sync::oneshot::channel::<()>();
    let chaos = chaos_plan.map(|chaos_plan| spawn_chaos(&layout.dir, chaos_plan, load_done_rx));
    let other_servers = extra_watch_servers(layout);
    let target = load::LoadTarget {
        kubeconfig: cluster::api_access::KubeconfigChoice::file(&layout.kubeconfig),
        report_dir: report_dir.clone(),
        processes,
        record_watch: chaos.is_some(),
        extra_watch_servers: other_servers.clone(),
        spread_servers: other_servers,
    };
    let outcome = load::run(plan, &target, interrupt).await;
    let _ = load_done.send(());
    let chaos = match chaos {
        Some(task) => Some(task.await.context("chaos task")?),
        None => None,
    };
    let mut outcome = outcome?;
    let mut files = vec![
        ("report", outcome.report_html.clone()),
        ("report json", outcome.report_json.clone()),
    ];
    let mut chaos_passed = None;
    if let Some(chaos) = chaos {
        let mut chaos = chaos.context("the chaos run")?;
        chaos.interrupted = outcome.interrupted;
        chaos.passed &= !outcome.interrupted;
        chaos.accounting = outcome.report.accounting.combined();
        let server_kills = api_server_kills(&chaos, &outcome, layout);
        let load_watch = chaos::run::check_load_watches(
            &layout.dir,
            std::mem::take(&mut outcome.watch_histories),
            &outcome.report.run_id,
            &server_kills,
        )
        .await
        .unwrap_or_else(|e| chaos::watch_check::WatchCheckReport {
            passed: false,
            examples: vec![format!("cannot read the store's history: {e:#}")],
            ..Default::default()
        });
        chaos.passed &= load_watch.passed && chaos.accounting.as_ref().is_some_and(|a| a.passed);
        chaos.load_watch = Some(load_watch);
        let service = service_with_pods(&chaos, &outcome, &config.cluster, layout);
        chaos.passed &= service.passed;
        chaos.service = Some(service);
        let chaos_files = chaos.write(&report_dir)?;
        files.push(("chaos json", chaos_files.json));
        files.push(("chaos history", chaos_files.history));
        let report = &mut outcome.report;
        report.passed &= chaos.passed;
        let section = chaos.as_load_section(&report.started_at)?;
        let (_, _, summary) = load::write_report(report, &[section], &report_dir)?;
        outcome.summary = summary;
        outcome.passed = report.passed;
        chaos_passed = Some(chaos.passed);
    }
    println!("{}", outcome.summary);
    let summary = serde_json::json!({
        "passed": outcome.passed,
        "interrupted": outcome.interrupted,
        "load": {
            "report_json": outcome.report_json,
            "report_html": outcome.report_html,
        },
        "chaos": chaos_passed,
    });
    std::fs::write(&run_json, serde_json::to_vec_pretty(&summary)?)?;
    files.push(("summary", run_json));
    Ok(RunOutcome {
        passed: outcome.passed,
        interrupted: outcome.interrupted,
        files,
    })
}
