//! End-to-end tests of the launcher: the real `kemu up`, `status`, `down` and `run` on small
//! clusters written into temp directories.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::{kemu_exe, wait_until};
use serde_json::Value;

/// Whether this kemu can run `sub`: test clusters include a component only when it can.
fn has_subcommand(sub: &str) -> bool {
    Command::new(kemu_exe())
        .args([sub, "--help"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// A small cluster: `members` store members, one API server, and (when this kemu has them) a
/// scheduler and two node hosts of ten nodes each.
fn small_config(name: &str, members: u32, extra: &str) -> String {
    let schedulers = u32::from(has_subcommand("scheduler"));
    let node_hosts = if has_subcommand("node-host") { 2 } else { 0 };
    format!(
        "name = \"{name}\"\n[store]\nmembers = {members}\n[scheduler]\nreplicas = {schedulers}\n[controllers]\nreplicas = 0\n[nodes]\nhosts = {node_hosts}\nper_host = 10\n{extra}"
    )
}

/// A cluster directory that is brought down (and purged) however the test ends.
struct TestCluster {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    config: PathBuf,
}

impl TestCluster {
    fn new(config: &str) -> TestCluster {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("cluster.toml");
        std::fs::write(&path, config).unwrap();
        TestCluster {
            dir: tmp.path().join("cluster"),
            config: path,
            _tmp: tmp,
        }
    }

    fn kemu(&self, args: &[&str]) -> Output {
        Command::new(kemu_exe())
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .output()
            .unwrap()
    }

    fn up_detached(&self) {
        let out = Command::new(kemu_exe())
            .args(["up", "--detach", "-f"])
            .arg(&self.config)
            .arg("--dir")
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "kemu up failed: {}\n{}\nsupervisor log:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(self.dir.join("logs/supervisor.log")).unwrap_or_default()
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("export KUBECONFIG="), "{stdout}");
    }

    fn status(&self) -> Value {
        let out = self.kemu(&["status", "-o", "json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn down(&self) {
        let out = self.kemu(&["down"]);
        assert!(
            out.status.success(),
            "kemu down failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if self.dir.exists() {
            let _ = self.kemu(&["down"]);
        }
    }
}

fn pids(status: &Value) -> Vec<u32> {
    status["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["pid"].as_u64().map(|p| p as u32))
        .collect()
}

fn addresses(status: &Value) -> Vec<SocketAddr> {
    status["components"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| {
            c["address"]
                .as_str()
                .unwrap()
                .split_whitespace()
                .filter_map(|kv| kv.split_once('=').and_then(|(_, a)| a.parse().ok()))
                .collect::<Vec<SocketAddr>>()
        })
        .collect()
}

/// Whether `pid` is a live (not zombie) process.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// Live processes whose command line mentions `needle`.
fn processes_mentioning(needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(needle) && alive(pid) {
                out.push(pid);
            }
        }
    }
    out
}

fn namespaces() -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn assert_running(status: &Value, components: usize) {
    assert_eq!(status["phase"], "running", "{status:#}");
    let comps = status["components"].as_array().unwrap();
    assert_eq!(comps.len(), components, "{status:#}");
    for c in comps {
        assert_eq!(c["state"], "running", "{status:#}");
        assert!(c["pid"].as_u64().is_some(), "{status:#}");
    }
    assert!(status["store"]["leader"].is_string(), "{status:#}");
    let nodes = &status["nodes"];
    assert_eq!(nodes["ready"], nodes["total"], "{status:#}");
}

fn expected_components(members: usize) -> usize {
    members
        + 1
        + usize::from(has_subcommand("scheduler"))
        + if has_subcommand("node-host") { 2 } else { 0 }
}

fn assert_nothing_left(dir: &Path, pids: &[u32], addrs: &[SocketAddr]) {
    for &pid in pids {
        assert!(!alive(pid), "process {pid} is still running");
    }
    let left = processes_mentioning(&dir.display().to_string());
    assert!(left.is_empty(), "processes left behind: {left:?}");
    for a in addrs {
        if !a.ip().is_loopback() {
            continue;
        }
        // Both protocols: store and QUIC ports are UDP, HTTP and metrics TCP.
        let free =
            || std::net::TcpListener::bind(a).is_ok() && std::net::UdpSocket::bind(a).is_ok();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !free() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        if free() {
            continue;
        }
        // Tests run in parallel and other processes' ephemeral sockets may land on a port this
        // cluster let go of: only a holder that belongs to this cluster is a leak.
        for owner in port_owners(a.port()) {
            let cmdline = std::fs::read(format!("/proc/{owner}/cmdline")).unwrap_or_default();
            let ours = pids.contains(&owner)
                || String::from_utf8_lossy(&cmdline).contains(&dir.display().to_string());
            assert!(
                !ours,
                "port {a} is still held by this cluster's process {owner}"
            );
        }
    }
}

/// The pids holding a TCP or UDP socket on `port`, from `ss`.
fn port_owners(port: u16) -> Vec<u32> {
    let Ok(out) = std::process::Command::new("ss")
        .args(["-H", "-tuanp"])
        .output()
    else {
        return Vec::new();
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let needle = format!(":{port} ");
    let mut owners = Vec::new();
    for line in text.lines().filter(|l| l.contains(&needle)) {
        for part in line.split("pid=").skip(1) {
            if let Some(pid) = part.split(',').next().and_then(|p| p.parse().ok()) {
                owners.push(pid);
            }
        }
    }
    owners
}

#[test]
fn up_status_down_leave_nothing_behind() {
    let c = TestCluster::new(&small_config("basic", 3, ""));
    c.up_detached();
    let status = c.status();
    assert_running(&status, expected_components(3));
    let table = String::from_utf8_lossy(&c.kemu(&["status"]).stdout).into_owned();
    assert!(table.contains("store: leader s"), "{table}");
    assert!(table.contains("apiserver-1"), "{table}");
    assert!(c.dir.join("kubeconfig").exists());
    assert!(c.dir.join("certs/ca.crt").exists());
    assert!(c.dir.join("certs/s1.crt").exists());
    assert!(c.dir.join("logs/s1.log").exists());
    let pids = pids(&status);
    let supervisor = status["supervisor_pid"].as_u64().unwrap() as u32;
    let addrs = addresses(&status);
    c.down();
    let mut all = pids.clone();
    all.push(supervisor);
    assert_nothing_left(&c.dir, &all, &addrs);
    let after = c.status();
    assert_eq!(after["phase"], "stopped", "{after:#}");
    // --purge removes the directory.
    let out = c.kemu(&["down", "--purge"]);
    assert!(out.status.success());
    assert!(!c.dir.exists());
}

#[tokio::test]
async fn a_killed_component_is_restarted() {
    let c = TestCluster::new(&small_config("restart", 3, ""));
    c.up_detached();
    let status = c.status();
    let pid_of = |status: &Value, name: &str| -> Option<u64> {
        status["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == name)
            .and_then(|x| x["pid"].as_u64())
    };
    for name in ["apiserver-1", "s2"] {
        let before = pid_of(&status, name).unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(before as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        wait_until(
            &format!("{name} runs again under a new pid"),
            Duration::from_secs(20),
            || {
                let s = c.status();
                let restarted =
                    s["components"].as_array().unwrap().iter().any(|x| {
                        x["name"] == name && x["restarts"] == 1 && x["state"] == "running"
                    });
                let new_pid = pid_of(&s, name).is_some_and(|p| p != before);
                async move { restarted && new_pid }
            },
        )
        .await
        .unwrap();
    }
    let log = std::fs::read_to_string(c.dir.join("logs/supervisor.log")).unwrap();
    assert!(log.contains("apiserver-1 exited"), "{log}");
    assert!(log.contains("restarted apiserver-1 (restart 1)"), "{log}");
    assert!(log.contains("restarted s2 (restart 1)"), "{log}");
    // The restarted API server serves again and the store has a leader.
    wait_until(
        "the cluster is whole again",
        Duration::from_secs(30),
        || {
            let s = c.status();
            async move { s["store"]["leader"].is_string() && s["nodes"].is_object() }
        },
    )
    .await
    .unwrap();
    c.down();
}

#[test]
fn a_typo_names_the_key_and_line() {
    let config = "name = \"typo\"\n\n[store]\nmembers = 1\n\n[nodes]\nhosts = 0\nper_hots = 3\n";
    let c = TestCluster::new(config);
    let out = Command::new(kemu_exe())
        .args(["up", "--detach", "-f"])
        .arg(&c.config)
        .arg("--dir")
        .arg(&c.dir)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("per_hots"), "{err}");
    assert!(err.contains("line 8"), "{err}");
    assert!(
        !c.dir.exists(),
        "a bad config must not create the cluster directory"
    );

    // A bad value names its field and line too.
    let c = TestCluster::new("name = \"bad\"\n[store]\nmembers = 0\n");
    let out = c.kemu(&["up", "-f", c.config.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("store.members") && err.contains("line 3"),
        "{err}"
    );

    // So does a bad setting of the emulated CSI driver, before anything starts.
    let c = TestCluster::new(
        "name = \"bad-storage\"\n[controllers]\nreplicas = 1\n[storage]\nattach_latency_ms = 100\nprovision_failure_rate = 1.5\n",
    );
    let out = c.kemu(&["up", "--detach", "-f", c.config.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("line 6: storage.provision_failure_rate: 1.5: must be between 0 and 1"),
        "{err}"
    );
    assert!(
        !c.dir.exists(),
        "a bad config must not create the cluster directory"
    );
}

/// Every flag a config's `[storage]` turns into is one `kemu controllers` takes.
#[test]
fn storage_settings_are_flags_of_the_controller_manager() {
    let config = cluster::config::ClusterConfig::parse(
        "[storage]\nprovision_latency_ms = 1\nresize_latency_ms = 1\nattach_latency_ms = 1\nnode_capacity = \"1Gi\"\nprovision_failure_rate = 0.5\nattach_failure_rate = 0.5\ndefault_class = false\ndefault_binding_mode = \"WaitForFirstConsumer\"\n",
        Path::new("storage.toml"),
    )
    .unwrap();
    let args = config.storage.controller_args();
    let flags: Vec<&String> = args.iter().filter(|a| a.starts_with("--")).collect();
    assert_eq!(flags.len(), 8, "{args:?}");
    let out = Command::new(kemu_exe())
        .args(["controllers", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in flags {
        assert!(
            help.contains(flag.as_str()),
            "{flag} is no flag of `kemu controllers`"
        );
    }
}

#[test]
fn two_clusters_run_side_by_side() {
    let config = small_config("twin", 1, "");
    let a = TestCluster::new(&config);
    let b = TestCluster::new(&config);
    a.up_detached();
    b.up_detached();
    let sa = a.status();
    let sb = b.status();
    assert_running(&sa, expected_components(1));
    assert_running(&sb, expected_components(1));
    let (aa, ab) = (addresses(&sa), addresses(&sb));
    assert!(aa.iter().all(|x| !ab.contains(x)), "{aa:?} {ab:?}");
    a.down();
    // b is unaffected by a's down.
    assert_running(&b.status(), expected_components(1));
    b.down();
    assert_nothing_left(&a.dir, &pids(&sa), &aa);
    assert_nothing_left(&b.dir, &pids(&sb), &ab);
}

#[tokio::test]
async fn foreground_up_stops_everything_on_ctrl_c() {
    let c = TestCluster::new(&small_config("fg", 1, ""));
    let mut up = Command::new(kemu_exe())
        .args(["up", "-f"])
        .arg(&c.config)
        .arg("--dir")
        .arg(&c.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until("the cluster runs", Duration::from_secs(60), || {
        let running = std::fs::read_to_string(c.dir.join("state.json"))
            .map(|s| s.contains("\"phase\": \"running\""))
            .unwrap_or(false);
        async move { running }
    })
    .await
    .unwrap();
    let status = c.status();
    assert_running(&status, expected_components(1));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(up.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let code = up.wait().unwrap();
    assert!(code.success(), "{code}");
    assert_nothing_left(&c.dir, &pids(&status), &addresses(&status));
}

#[test]
fn run_without_a_load_plan_starts_and_stops() {
    let c = TestCluster::new(&small_config("runner", 1, ""));
    let out = Command::new(kemu_exe())
        .args(["run", "-f"])
        .arg(&c.config)
        .arg("--dir")
        .arg(&c.dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let report = std::fs::read_to_string(c.dir.join("report/run.json")).unwrap();
    assert!(report.contains("\"passed\": true"), "{report}");
    assert!(processes_mentioning(&c.dir.display().to_string()).is_empty());
}

#[tokio::test]
async fn netns_hosts_reach_each_other() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipped: netns mode needs root");
        return;
    }
    let c = TestCluster::new(&small_config(
        "ns",
        3,
        "[hosts]\nmode = \"netns\"\n[[hosts.host]]\nname = \"cp\"\ncomponents = [\"apiserver-1\"]\n",
    ));
    c.up_detached();
    let status = c.status();
    assert_running(&status, expected_components(3));
    assert_eq!(status["mode"], "netns");
    // Every component on its own host with its own address from the private /24.
    let hosts = status["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), expected_components(3), "{status:#}");
    let mut ips: Vec<&str> = hosts
        .iter()
        .map(|h| h["address"].as_str().unwrap())
        .collect();
    ips.dedup();
    assert_eq!(ips.len(), hosts.len());
    assert!(ips.iter().all(|ip| ip.starts_with("10.213.0.")), "{ips:?}");
    let ours: Vec<String> = hosts
        .iter()
        .map(|h| h["netns"].as_str().unwrap().to_string())
        .collect();
    let existing = namespaces();
    assert!(
        ours.iter().all(|ns| existing.contains(ns)),
        "{ours:?} {existing:?}"
    );
    // The store members elected a leader across hosts, and every member answers.
    assert_eq!(status["store"]["members"].as_array().unwrap().len(), 3);
    let table = String::from_utf8_lossy(&c.kemu(&["status"]).stdout).into_owned();
    assert!(table.contains("cp (10.213.0.2)"), "{table}");
    assert!(table.contains("3/3 members answering"), "{table}");
    // The API server (on host cp) reached the store (on three other hosts), and is reachable
    // from this machine through the forwarder the kubeconfig names.
    let kubeconfig = std::fs::read_to_string(c.dir.join("kubeconfig")).unwrap();
    let server = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("server: https://"))
        .unwrap()
        .to_string();
    let admin = cluster::api_access::ApiAccess::from_certs(
        server.parse().unwrap(),
        &c.dir.join("certs"),
        Some("admin"),
    )
    .unwrap();
    let (code, body) = admin.get("/api/v1/namespaces").await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("kube-system"), "{body}");
    let pids = pids(&status);
    c.down();
    let left: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| ours.contains(n))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    // The bridge's namespace (`kemu-<id>`, the hosts' prefix) is gone too.
    let prefix = ours[0].rsplit_once("-cp").unwrap().0.to_string();
    let bridge_left: Vec<String> = namespaces()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(bridge_left.is_empty(), "{bridge_left:?}");
    assert_nothing_left(&c.dir, &pids, &[]);
}

/// The `metrics=` address each component of `status` serves on, by component name.
fn metrics_addresses(status: &Value) -> Vec<(String, SocketAddr)> {
    status["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let address = c["address"].as_str()?.split_whitespace().find_map(|kv| {
                let (key, addr) = kv.split_once('=')?;
                (key == "metrics").then(|| addr.parse().ok())?
            })?;
            Some((c["name"].as_str()?.to_string(), address))
        })
        .collect()
}

#[tokio::test]
async fn every_component_answers_metrics_and_readyz() {
    if !(has_subcommand("scheduler") && has_subcommand("controllers")) {
        panic!("this kemu lacks the scheduler or controllers subcommand");
    }
    let config = small_config("telemetry", 3, "")
        .replace("[controllers]\nreplicas = 0", "[controllers]\nreplicas = 1");
    let c = TestCluster::new(&config);
    c.up_detached();
    let status = c.status();
    let endpoints = metrics_addresses(&status);
    let stores: Vec<&str> = status["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] == "store")
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(stores.len(), 3, "{status}");
    assert!(
        stores.iter().all(|s| endpoints.iter().any(|(n, _)| n == s)),
        "every store member lists a metrics address: {endpoints:?}"
    );
    let kinds = |prefix: &str| {
        endpoints
            .iter()
            .filter(|(n, _)| n.starts_with(prefix))
            .count()
    };
    assert_eq!(kinds("scheduler"), 1, "{endpoints:?}");
    assert_eq!(kinds("controllers"), 1, "{endpoints:?}");
    assert_eq!(kinds("nodehost"), 2, "{endpoints:?}");

    // What each component's /metrics must show, and the checks its /readyz must pass.
    let expect = |name: &str| -> (Vec<&'static str>, Vec<&'static str>) {
        if stores.contains(&name) {
            (
                vec![
                    "etcd_server_has_leader 1\n",
                    "# TYPE etcd_server_leader_changes_seen_total counter",
                    "etcd_server_proposals_applied_total ",
                    "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"0.001\"}",
                    "etcd_mvcc_db_total_size_in_bytes ",
                    "etcd_network_peer_sent_bytes_total{To=\"",
                ],
                vec![
                    "[+]raft_loop ok",
                    "[+]leader ok",
                    "[+]serializable_read ok",
                    "[+]linearizable_read ok",
                ],
            )
        } else if name.starts_with("scheduler") {
            (
                vec![
                    "# TYPE scheduler_schedule_attempts_total counter",
                    "scheduler_pending_pods{queue=\"active\"}",
                    "leader_election_master_status{name=\"kube-scheduler\"} 1",
                ],
                vec!["[+]ping ok", "[+]informer-sync ok", "[+]leaderElection ok"],
            )
        } else if name.starts_with("controllers") {
            (
                vec!["kemu_controller_manager_leader 1"],
                vec!["[+]informer-sync ok", "[+]leaderElection ok"],
            )
        } else {
            (
                vec![
                    "kemu_node_host_nodes_registered 10",
                    "# TYPE kemu_node_host_lease_renewals_total counter",
                ],
                vec!["[+]apiserver-connection ok", "[+]nodes-registered ok"],
            )
        }
    };
    for (name, addr) in &endpoints {
        let (series, checks) = expect(name);
        wait_until(
            &format!("{name} is ready and shows its metrics"),
            Duration::from_secs(60),
            || {
                let (series, checks) = (series.clone(), checks.clone());
                async move {
                    let get = |path: &'static str| {
                        cluster::process::http_request(*addr, "GET", path, None, b"")
                    };
                    let (Ok((200, readyz)), Ok((200, metrics))) =
                        (get("/readyz?verbose").await, get("/metrics").await)
                    else {
                        return false;
                    };
                    readyz.ends_with("readyz check passed\n")
                        && checks.iter().all(|c| readyz.contains(c))
                        && series.iter().all(|s| metrics.contains(s))
                        && metrics.contains("process_resident_memory_bytes ")
                }
            },
        )
        .await
        .unwrap();
        // /livez and a per-check path answer too.
        let (code, body) = cluster::process::http_request(*addr, "GET", "/livez", None, b"")
            .await
            .unwrap();
        assert_eq!((code, body.as_str()), (200, "ok"), "{name}");
        let (code, body) = cluster::process::http_request(*addr, "GET", "/readyz/ping", None, b"")
            .await
            .unwrap();
        assert_eq!((code, body.as_str()), (200, "ok"), "{name}");
    }

    // The API server, through its HTTPS front as kubectl reads it.
    let kubectl = |args: &[&str]| {
        let out = Command::new(common::kubectl_path())
            .arg("--kubeconfig")
            .arg(c.dir.join("kubeconfig"))
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (ok, readyz) = kubectl(&["get", "--raw", "/readyz?verbose"]);
    assert!(ok, "{readyz}");
    for line in [
        "[+]ping ok\n",
        "[+]etcd ok\n",
        "[+]informer-sync ok\n",
        "readyz check passed\n",
    ] {
        assert!(readyz.contains(line), "{line} in {readyz}");
    }
    let (ok, etcd) = kubectl(&["get", "--raw", "/livez/etcd"]);
    assert!(ok && etcd == "ok", "{etcd}");
    let (ok, metrics) = kubectl(&["get", "--raw", "/metrics"]);
    assert!(ok, "{metrics}");
    for series in [
        "# TYPE apiserver_request_total counter",
        "apiserver_request_duration_seconds_bucket{verb=\"GET\"",
        "etcd_request_duration_seconds_count{operation=",
        "apiserver_storage_objects{resource=\"pods\"}",
    ] {
        assert!(metrics.contains(series), "/metrics lacks {series}");
    }
    c.down();
}

/// Each store member's etcd gRPC address from `kemu status --json`.
fn grpc_addresses(status: &Value) -> Vec<(String, SocketAddr)> {
    status["components"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let address = c["address"].as_str()?.split_whitespace().find_map(|kv| {
                let (key, addr) = kv.split_once('=')?;
                (key == "grpc").then(|| addr.parse().ok())?
            })?;
            Some((c["name"].as_str()?.to_string(), address))
        })
        .collect()
}

#[test]
fn etcdctl_reaches_the_store_of_a_running_cluster() {
    let c = TestCluster::new(&small_config("etcdctl", 3, ""));
    c.up_detached();
    let status = c.status();
    let grpc = grpc_addresses(&status);
    assert_eq!(grpc.len(), 3, "every member serves etcd's API: {status:#}");
    let table = String::from_utf8_lossy(&c.kemu(&["status"]).stdout).into_owned();
    assert!(table.contains("grpc="), "{table}");

    let endpoints = grpc
        .iter()
        .map(|(_, a)| format!("https://{a}"))
        .collect::<Vec<_>>()
        .join(",");
    let certs = c.dir.join("certs");
    // The API servers' identity: one the store admits on both its fronts.
    let etcdctl = |args: &[&str]| -> String {
        let out = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={endpoints}"))
            .arg(format!("--cacert={}", certs.join("ca.crt").display()))
            .arg(format!("--cert={}", certs.join("apiserver.crt").display()))
            .arg(format!("--key={}", certs.join("apiserver.key").display()))
            .arg("--command-timeout=10s")
            .args(args)
            .output()
            .expect("etcdctl (installed by scripts/setup)");
        assert!(
            out.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };

    // The member list names each member with its gRPC address as its client URL.
    let members: Value = serde_json::from_str(&etcdctl(&["member", "list", "-w", "json"]))
        .expect("member list as JSON");
    let listed = members["members"].as_array().expect("members");
    assert_eq!(listed.len(), 3, "{members:#}");
    for (name, address) in &grpc {
        let member = listed
            .iter()
            .find(|m| m["name"] == name.as_str())
            .unwrap_or_else(|| panic!("{name} is not listed: {members:#}"));
        assert_eq!(
            member["clientURLs"][0],
            format!("https://{address}"),
            "{members:#}"
        );
    }
    // Every endpoint answers and all agree on the leader.
    let statuses: Value = serde_json::from_str(&etcdctl(&["endpoint", "status", "-w", "json"]))
        .expect("endpoint status as JSON");
    let leaders: std::collections::BTreeSet<u64> = statuses
        .as_array()
        .expect("statuses")
        .iter()
        .map(|s| s["Status"]["leader"].as_u64().expect("a leader"))
        .collect();
    assert_eq!(leaders.len(), 1, "{statuses:#}");
    // The Kubernetes objects the API server wrote are there, and a key written through the
    // gRPC front is read back through it.
    let keys = etcdctl(&["get", "/registry/", "--prefix", "--keys-only"]);
    assert!(keys.contains("/registry/"), "{keys}");
    etcdctl(&["put", "/etcdctl-test/a", "one"]);
    assert_eq!(
        etcdctl(&["get", "/etcdctl-test/a", "--print-value-only"]).trim(),
        "one"
    );
    c.down();
}

/// `kemu load` finds its cluster as kubectl does: the files of `$KUBECONFIG` merged (the first
/// to set `current-context` wins), and `--context` choosing another.
#[test]
fn kemu_load_reads_kubeconfig_and_context_as_kubectl_does() {
    // The controller manager makes the load namespaces' `default` ServiceAccounts.
    let config = small_config("kubeconfig", 1, "")
        .replace("[controllers]\nreplicas = 0", "[controllers]\nreplicas = 1");
    let c = TestCluster::new(&config);
    c.up_detached();
    let tmp = tempfile::tempdir().unwrap();
    // A first file whose current context names a cluster that is nowhere defined.
    let decoy = tmp.path().join("decoy");
    std::fs::write(
        &decoy,
        "apiVersion: v1\nkind: Config\ncurrent-context: elsewhere\ncontexts:\n- name: elsewhere\n  context:\n    cluster: elsewhere\n    user: nobody\n",
    )
    .unwrap();
    let kubeconfig = std::env::join_paths([decoy, c.dir.join("kubeconfig")]).unwrap();
    let load = |extra: &[&str]| {
        Command::new(kemu_exe())
            .args(["load", "--pods", "6", "--rate", "20", "--report-dir"])
            .arg(tmp.path())
            .args(extra)
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", tmp.path())
            .output()
            .unwrap()
    };

    let out = load(&[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the decoy's context was not used");
    assert!(
        stderr.contains("cluster \"elsewhere\" does not exist"),
        "{stderr}"
    );

    let out = load(&["--context", "kemu"]);
    assert!(
        out.status.success(),
        "kemu load --context kemu: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(tmp.path().join("load-report.json").exists());
    c.down();
}
