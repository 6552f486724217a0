//! End-to-end tests of what a store member does with its files after a crash, and of the `kemu kv`
//! command line as a user runs it: real `kemu` processes on loopback.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use anyhow::{ensure, Context};
use bytes::Bytes;
use cluster::process::LocalStore;
use common::{kemu_exe, wait_until};
use serde_json::Value;
use store::client::{Client, ClientConfig, ClientError};
use store::types::*;

fn put(key: impl Into<Bytes>, value: impl Into<Bytes>) -> PutRequest {
    PutRequest {
        key: key.into(),
        value: value.into(),
        lease: 0,
        prev_kv: false,
    }
}

/// Writes `key`, trying again while the outcome is ambiguous. A client whose connection was to a
/// SIGKILLed member learns of it only when the request on it fails, and a failed write may or may
/// not have been applied; writing the same value again is harmless here.
async fn put_acknowledged(client: &Client, key: &str, value: &str) -> anyhow::Result<i64> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match client.put(put(key.to_string(), value.to_string())).await {
            Ok(r) => return Ok(r.header.revision),
            Err(ClientError::Ambiguous) if Instant::now() < deadline => continue,
            Err(e) => return Err(e).with_context(|| format!("writing {key}")),
        }
    }
}

/// A member that is not the leader.
async fn a_follower(cluster: &LocalStore) -> anyhow::Result<String> {
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await?;
    cluster
        .names()
        .into_iter()
        .find(|n| *n != leader)
        .context("a follower")
}

/// The WAL file of the newest generation in a member's raft directory.
fn newest_wal(data_dir: &Path) -> anyhow::Result<PathBuf> {
    let raft = data_dir.join("raft");
    let mut wals: Vec<PathBuf> = std::fs::read_dir(&raft)
        .with_context(|| format!("listing {}", raft.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("wal-") && n.ends_with(".log"))
        })
        .collect();
    // The generation is fixed-width hex, so the names sort by generation.
    wals.sort();
    wals.pop()
        .with_context(|| format!("no WAL file in {}", raft.display()))
}

/// A WAL record as laid out on disk: `[u32 len][u32 crc][u8 kind][payload]`.
#[derive(Debug)]
struct WalRecord {
    offset: usize,
    kind: u8,
    payload_len: usize,
}

const RECORD_HEADER: usize = 4 + 4 + 1;
const ENTRIES_RECORD: u8 = 1;

/// Every complete record in `wal`, in order (checksums are not checked).
fn wal_records(wal: &[u8]) -> Vec<WalRecord> {
    let mut records = Vec::new();
    let mut at = 0;
    while at + RECORD_HEADER <= wal.len() {
        let len = u32::from_le_bytes(wal[at..at + 4].try_into().expect("4 bytes")) as usize;
        if at + RECORD_HEADER + len > wal.len() {
            break;
        }
        records.push(WalRecord {
            offset: at,
            kind: wal[at + 8],
            payload_len: len,
        });
        at += RECORD_HEADER + len;
    }
    records
}

/// What was appended to `log` since it was `from` bytes long.
fn log_since(log: &Path, from: u64) -> anyhow::Result<String> {
    let bytes = std::fs::read(log)?;
    Ok(String::from_utf8_lossy(&bytes[from as usize..]).into_owned())
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_with_a_corrupt_log_refuses_to_start() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &[]).await?;
    let admin = cluster.admin()?;
    for i in 0..20 {
        admin.put(put(format!("c/{i:02}"), format!("v{i}"))).await?;
    }
    let victim = a_follower(&cluster).await?;
    cluster.terminate(&victim).await;

    // Damage the payload of the first entries record; many valid records follow it, so this is
    // not a torn write and the member must not start from the file.
    let wal = newest_wal(&cluster.data_dir(&victim))?;
    let mut bytes = std::fs::read(&wal)?;
    let records = wal_records(&bytes);
    let (index, target) = records
        .iter()
        .enumerate()
        .find(|(_, r)| r.kind == ENTRIES_RECORD && r.payload_len > 0)
        .with_context(|| format!("no entries record in {}: {records:?}", wal.display()))?;
    ensure!(
        records.len() > index + 2,
        "only {} records after the first entries record",
        records.len() - index - 1
    );
    let flip = target.offset + RECORD_HEADER + target.payload_len / 2;
    bytes[flip] ^= 0x5a;
    std::fs::write(&wal, &bytes)?;

    let log = cluster.log_path(&victim);
    let log_before = file_len(&log);
    cluster.restart(&victim)?;
    wait_until(
        &format!("{victim} exits on its corrupt log"),
        Duration::from_secs(10),
        || async { cluster.exit_status(&victim).is_some() },
    )
    .await?;
    let status = cluster.exit_status(&victim).context("exited")?;
    let output = log_since(&log, log_before)?;
    assert!(
        !status.success(),
        "{victim} exited with {status} on a corrupt log:\n{output}"
    );
    let wal_name = wal.display().to_string();
    assert!(
        output
            .lines()
            .any(|l| l.contains("corrupt") && l.contains(&wal_name)),
        "{victim}'s log does not name the corrupt file {wal_name}:\n{output}"
    );

    // The other two are a majority and go on serving writes.
    let written = put_acknowledged(&admin, "c/after", "still-serving").await?;
    assert!(written > 20);
    assert_eq!(
        admin.get("c/after").await?.map(|kv| kv.value),
        Some(Bytes::from("still-serving"))
    );
    cluster.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_with_a_torn_log_tail_repairs_and_rejoins() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &[]).await?;
    let admin = cluster.admin()?;
    for i in 0..20 {
        admin.put(put(format!("t/{i:02}"), format!("v{i}"))).await?;
    }
    let victim = a_follower(&cluster).await?;
    cluster.kill(&victim);

    // A record whose header promises 200 bytes, of which only 7 made it to disk.
    let wal = newest_wal(&cluster.data_dir(&victim))?;
    let intact_len = file_len(&wal);
    let mut torn = Vec::new();
    torn.extend_from_slice(&200u32.to_le_bytes());
    torn.extend_from_slice(&0xdead_beefu32.to_le_bytes());
    torn.push(ENTRIES_RECORD);
    torn.extend_from_slice(b"partial");
    {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new().append(true).open(&wal)?;
        file.write_all(&torn)?;
    }

    // The cluster moves on while the member is down.
    for i in 20..40 {
        put_acknowledged(&admin, &format!("t/{i:02}"), &format!("v{i}")).await?;
    }
    let log = cluster.log_path(&victim);
    let log_before = file_len(&log);
    cluster.restart(&victim)?;
    let endpoint = cluster.endpoint(&victim).context("victim endpoint")?;
    let victim_client = Client::new(
        ClientConfig::new(vec![endpoint]),
        &cluster.certs_dir(),
        store::config::STORE_ADMIN,
    )?;
    wait_until(
        &format!("{victim} serves again"),
        Duration::from_secs(10),
        || async {
            tokio::time::timeout(
                Duration::from_millis(500),
                victim_client.status_of(endpoint),
            )
            .await
            .is_ok_and(|r| r.is_ok())
        },
    )
    .await?;
    let output = log_since(&log, log_before)?;
    assert!(
        output.contains("torn") && output.contains(&wal.display().to_string()),
        "{victim} did not log the dropped tail of {}:\n{output}",
        wal.display()
    );
    assert!(
        cluster.exit_status(&victim).is_none(),
        "{victim} exited:\n{output}"
    );
    // The repair cut exactly the torn bytes: everything before them is still there.
    let repaired = std::fs::read(&wal)?;
    assert!(repaired.len() as u64 >= intact_len);
    assert!(
        !repaired[intact_len as usize..].starts_with(&torn),
        "the torn record is still in the WAL at offset {intact_len}"
    );

    // A write after the restart, then every member ends at the same revision and key-space hash.
    let last = put_acknowledged(&admin, "t/last", "v").await?;
    let members = cluster.client_endpoints();
    let agreed = parking_lot::Mutex::new(Vec::new());
    wait_until(
        "every member has the same revision and hash",
        Duration::from_secs(20),
        || async {
            let mut hashes = Vec::new();
            for &m in &members {
                match tokio::time::timeout(Duration::from_secs(1), admin.hash_of(m)).await {
                    Ok(Ok(h)) => hashes.push((h.header.revision, h.hash)),
                    _ => return false,
                }
            }
            let same = hashes[0].0 >= last && hashes.windows(2).all(|w| w[0] == w[1]);
            *agreed.lock() = hashes;
            same
        },
    )
    .await
    .with_context(|| format!("last (revision, hash) per member: {:?}", agreed.lock()))?;
    let caught_up = victim_client
        .range(RangeRequest {
            range: KeyRange::prefix("t/"),
            count_only: true,
            serializable: true,
            ..Default::default()
        })
        .await?;
    assert_eq!(caught_up.count, 41);
    cluster.stop().await;
    Ok(())
}

/// Runs `kemu ARGS` to completion (at most 30 s).
async fn kemu(args: &[&str]) -> anyhow::Result<Output> {
    let child = tokio::process::Command::new(kemu_exe())
        .args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(30), child)
        .await
        .with_context(|| format!("kemu {args:?} did not finish within 30 s"))?
        .with_context(|| format!("running kemu {args:?}"))
}

/// Runs `kemu ARGS`, requires success and returns its stdout.
async fn kemu_ok(args: &[&str]) -> anyhow::Result<String> {
    let out = kemu(args).await?;
    ensure!(
        out.status.success(),
        "kemu {args:?} failed with {}:\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

fn parse_json(text: &str) -> anyhow::Result<Value> {
    serde_json::from_str(text.trim()).with_context(|| format!("not JSON: {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kv_cli_round_trip() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;

    // `kemu certs` writes the CA and every identity's certificate.
    let made = dir.path().join("made-certs");
    let made_str = made.display().to_string();
    kemu_ok(&["certs", "--dir", &made_str]).await?;
    for file in ["ca.crt", "ca.key", "admin.crt", "admin.key", "s1.crt"] {
        assert!(made.join(file).is_file(), "kemu certs did not write {file}");
    }

    let cluster = LocalStore::start_with(kemu_exe(), &dir.path().join("cluster"), 3, &[]).await?;
    let endpoints = cluster
        .client_endpoints()
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let certs = cluster.certs_dir().display().to_string();
    let kv = |args: &[&str]| {
        let mut all = vec!["kv", "--endpoints", &endpoints, "--certs", &certs];
        all.extend_from_slice(args);
        all.into_iter().map(String::from).collect::<Vec<String>>()
    };
    let run = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kemu(&args).await
    };
    let run_ok = |args: Vec<String>| async move {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        kemu_ok(&args).await
    };

    assert_eq!(run_ok(kv(&["put", "k", "v"])).await?.trim(), "OK");
    let got = parse_json(&run_ok(kv(&["get", "k", "-o", "json"])).await?)?;
    assert_eq!(got["kvs"][0]["value"], "v", "{got}");
    let put_rev = got["kvs"][0]["mod_revision"]
        .as_i64()
        .context("mod_revision")?;
    assert!(put_rev > 0, "{got}");
    assert_eq!(
        run_ok(kv(&["get", "--prefix", "k", "--count-only"]))
            .await?
            .trim(),
        "1"
    );

    // A compare-and-swap on the mod revision: once it succeeds, it no longer holds.
    let compare = format!("mod(k) = {put_rev}");
    let txn = kv(&[
        "txn",
        "--compare",
        &compare,
        "--then",
        "put k v2",
        "--else",
        "get k",
    ]);
    let first = run_ok(txn.clone()).await?;
    assert_eq!(first.lines().next(), Some("SUCCESS"), "{first}");
    let second = run_ok(txn).await?;
    assert_eq!(
        second.lines().collect::<Vec<_>>(),
        ["FAILURE", "k", "v2"],
        "{second}"
    );

    // A watch from revision 1 replays the history: the put, then the swap.
    let watched = run_ok(kv(&[
        "watch", "k", "--rev", "1", "--events", "2", "-o", "json",
    ]))
    .await?;
    let events: Vec<Value> = watched
        .lines()
        .map(parse_json)
        .collect::<anyhow::Result<_>>()?;
    assert_eq!(events.len(), 2, "{watched}");
    assert_eq!(
        (&events[0]["type"], &events[0]["kv"]["value"]),
        (&Value::from("PUT"), &Value::from("v")),
        "{watched}"
    );
    assert_eq!(events[0]["kv"]["mod_revision"], put_rev, "{watched}");
    assert_eq!(
        (&events[1]["type"], &events[1]["kv"]["value"]),
        (&Value::from("PUT"), &Value::from("v2")),
        "{watched}"
    );
    let swap_rev = events[1]["kv"]["mod_revision"]
        .as_i64()
        .context("mod_revision")?;
    assert!(swap_rev > put_rev, "{watched}");

    assert_eq!(run_ok(kv(&["del", "k"])).await?.trim(), "1");
    assert_eq!(
        run_ok(kv(&["get", "--prefix", "k", "--count-only"]))
            .await?
            .trim(),
        "0"
    );

    let status = parse_json(&run_ok(kv(&["status", "-o", "json"])).await?)?;
    let rows = status.as_array().context("status is an array")?;
    assert_eq!(rows.len(), 3, "{status}");
    let leaders: Vec<&Value> = rows.iter().filter(|r| r["is_leader"] == true).collect();
    assert_eq!(leaders.len(), 1, "exactly one leader: {status}");
    let leader_name = &leaders[0]["name"];
    assert!(
        rows.iter().all(|r| &r["leader"] == leader_name),
        "members disagree on the leader: {status}"
    );

    let lease = parse_json(&run_ok(kv(&["lease", "grant", "60", "-o", "json"])).await?)?;
    assert!(lease["id"].as_i64().is_some_and(|id| id != 0), "{lease}");
    assert_eq!(lease["ttl"], 60, "{lease}");

    // History before a compaction is gone, and the error says so.
    let swap = swap_rev.to_string();
    assert_eq!(
        run_ok(kv(&["compact", &swap])).await?.trim(),
        format!("compacted revision {swap_rev}")
    );
    let old = run(kv(&["get", "k", "--rev", &put_rev.to_string()])).await?;
    let stderr = String::from_utf8_lossy(&old.stderr);
    assert!(
        !old.status.success() && stderr.contains("compacted"),
        "a read below the compaction: {}\nstderr: {stderr}",
        old.status
    );

    // A bad invocation exits non-zero and says what is missing.
    let bad = kemu(&["kv", "get", "k"]).await?;
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && stderr.contains("--endpoints"),
        "kemu kv get without --endpoints: {}\nstderr: {stderr}",
        bad.status
    );
    cluster.stop().await;
    Ok(())
}
