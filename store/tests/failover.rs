//! Failover in one process: members' real raft drivers and on-disk logs, wired by the
//! harness in `store::testing`, with crashes and partitions made by the test.

use std::time::Duration;

use store::testing::{wait_until, Cluster};
use store::types::{KeyRange, StoreError};
use telemetry::Endpoint;

/// Generous: a loaded test machine can delay ticks a lot.
const PATIENCE: Duration = Duration::from_secs(30);

async fn wait_for_leader(c: &Cluster, not: Option<usize>) -> usize {
    wait_until("a leader", PATIENCE, || async {
        c.leader().is_some_and(|l| Some(l) != not)
    })
    .await
    .unwrap();
    c.leader().unwrap()
}

/// Puts through whichever member leads, trying again while leadership settles; the leader
/// that took it.
async fn put_acknowledged(c: &Cluster, key: &str, value: &str) -> usize {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let leader = wait_for_leader(c, None).await;
        match c.put(leader, key, value).await {
            Ok(_) => return leader,
            Err(e) if tokio::time::Instant::now() < deadline => {
                eprintln!("put {key} through m{}: {e}; again", leader + 1);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => panic!("put {key}: {e}"),
        }
    }
}

async fn value_on(c: &Cluster, i: usize, key: &str) -> Option<String> {
    let kv = c
        .get(i, key)
        .await
        .unwrap_or_else(|e| panic!("get {key}: {e}"))?;
    Some(String::from_utf8_lossy(&kv.value).into_owned())
}

async fn wait_for_value(c: &Cluster, i: usize, key: &str, value: &str) {
    wait_until(
        &format!("m{} has {key}={value}", i + 1),
        PATIENCE,
        || async {
            c.get_local(i, key)
                .ok()
                .flatten()
                .is_some_and(|kv| kv.value == value.as_bytes())
        },
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_leaders_successor_has_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(dir.path(), 3, |_| {}).unwrap();
    let mut written = Vec::new();
    for n in 0..30 {
        let (key, value) = (format!("/k/{n}"), format!("v{n}"));
        put_acknowledged(&c, &key, &value).await;
        written.push((key, value));
    }
    let old = wait_for_leader(&c, None).await;
    c.crash(old);
    let new = wait_for_leader(&c, Some(old)).await;
    assert_ne!(new, old);
    for (key, value) in &written {
        assert_eq!(
            value_on(&c, new, key).await.as_deref(),
            Some(value.as_str())
        );
    }
    put_acknowledged(&c, "/after", "kill").await;

    // The old leader comes back from its disk and catches up with what it missed.
    c.restart(old).unwrap();
    wait_for_value(&c, old, "/after", "kill").await;
    for (key, value) in &written {
        assert_eq!(
            value_on(&c, old, key).await.as_deref(),
            Some(value.as_str())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_minority_cannot_commit() {
    let dir = tempfile::tempdir().unwrap();
    let c = Cluster::start(dir.path(), 3, |_| {}).unwrap();
    put_acknowledged(&c, "/before", "1").await;
    let cut_off = wait_for_leader(&c, None).await;
    c.isolate(cut_off);

    // The cut-off leader takes the proposal but can never commit it.
    let minority = c.put(cut_off, "/minority", "lost").await;
    assert!(
        matches!(
            minority,
            Err(StoreError::Timeout | StoreError::NoLeader { .. })
        ),
        "{minority:?}"
    );
    // The majority elects a leader of its own and goes on.
    let majority = wait_for_leader(&c, Some(cut_off)).await;
    assert!(c.status(majority).term > c.status(cut_off).term || !c.status(cut_off).is_leader);
    put_acknowledged(&c, "/majority", "2").await;
    // A linearizable read on the cut-off member cannot be served either.
    assert!(c.get(cut_off, "/before").await.is_err());

    c.heal_all();
    wait_for_value(&c, cut_off, "/majority", "2").await;
    for i in 0..c.len() {
        assert_eq!(value_on(&c, i, "/minority").await, None, "m{}", i + 1);
        assert_eq!(value_on(&c, i, "/before").await.as_deref(), Some("1"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_far_behind_catches_up_by_snapshot_and_restarts_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(dir.path(), 3, |config| {
        // Snapshots and compactions come often, so the member left behind needs one.
        config.snapshot_entries = 20;
        config.snapshot_wal_fraction = 0.0;
        config.snapshot_catch_up_entries = 5;
    })
    .unwrap();
    put_acknowledged(&c, "/first", "1").await;
    let leader = wait_for_leader(&c, None).await;
    let behind = (leader + 1) % c.len();
    wait_for_value(&c, behind, "/first", "1").await;

    // A watcher on the member left behind, which the snapshot will end.
    let (tx, mut old_watch) = tokio::sync::mpsc::channel(16);
    let old_id = {
        let shared = c.handle(behind).shared();
        let revision = shared.mvcc.read().current_revision();
        shared
            .hub
            .lock()
            .register(KeyRange::prefix("/".as_bytes()), false, revision + 1, tx)
    };

    c.isolate(behind);
    for n in 0..100 {
        put_acknowledged(&c, &format!("/k/{n}"), &n.to_string()).await;
    }
    c.heal_all();
    wait_for_value(&c, behind, "/k/99", "99").await;
    // It took a snapshot: the watcher was ended rather than told a partial history, and
    // watch ids go on from where they were.
    wait_until("the old watcher ends", PATIENCE, || {
        let ended = loop {
            match old_watch.try_recv() {
                Ok(_) => continue,
                Err(e) => break e == tokio::sync::mpsc::error::TryRecvError::Disconnected,
            }
        };
        async move { ended }
    })
    .await
    .unwrap();
    let (tx, _new_watch) = tokio::sync::mpsc::channel(16);
    let new_id = c.handle(behind).shared().hub.lock().register(
        KeyRange::single("/x".as_bytes()),
        false,
        1,
        tx,
    );
    assert!(new_id > old_id, "{new_id} after {old_id}");

    // Restarted, it rebuilds its state from its own snapshot and log.
    c.crash(behind);
    put_acknowledged(&c, "/while-down", "yes").await;
    c.restart(behind).unwrap();
    wait_until(
        "the restarted member restores its state",
        PATIENCE,
        || async { !c.handle(behind).shared().is_restoring() },
    )
    .await
    .unwrap();
    wait_for_value(&c, behind, "/while-down", "yes").await;
    for n in 0..100 {
        assert_eq!(
            value_on(&c, behind, &format!("/k/{n}")).await,
            Some(n.to_string())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_cluster_restart_keeps_every_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Cluster::start(dir.path(), 3, |_| {}).unwrap();
    for n in 0..20 {
        put_acknowledged(&c, &format!("/k/{n}"), "v").await;
    }
    for i in 0..c.len() {
        c.crash(i);
    }
    for i in 0..c.len() {
        c.restart(i).unwrap();
    }
    let leader = wait_for_leader(&c, None).await;
    for n in 0..20 {
        assert_eq!(
            value_on(&c, leader, &format!("/k/{n}")).await.as_deref(),
            Some("v")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_member_is_not_ready_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let c = Cluster::start(dir.path(), 3, |_| {}).unwrap();
    put_acknowledged(&c, "/k", "v").await;
    let cluster = &c;
    let readyz = move |i: usize| async move {
        cluster
            .telemetry(i)
            .health
            .answer_endpoint(Endpoint::Readyz, "verbose")
            .await
    };
    for i in 0..c.len() {
        wait_until(&format!("m{} is ready", i + 1), PATIENCE, || async {
            readyz(i).await.status == 200
        })
        .await
        .unwrap();
        let metrics = c.telemetry(i).metrics.encode();
        assert!(metrics.contains("etcd_server_has_leader 1\n"), "{metrics}");
        assert!(
            metrics.contains("etcd_debugging_mvcc_keys_total 1\n"),
            "{metrics}"
        );
    }
    let leader = wait_for_leader(&c, None).await;
    let cut_off = (leader + 1) % c.len();
    c.isolate(cut_off);
    // Once its leader's lease runs out it knows no leader, and cannot confirm a read index.
    wait_until("the cut-off member is not ready", PATIENCE, || async {
        let answer = readyz(cut_off).await;
        answer.status == 500
            && answer.body.contains("[-]leader failed: reason withheld\n")
            && answer
                .body
                .contains("[-]linearizable_read failed: reason withheld\n")
    })
    .await
    .unwrap();
    let answer = readyz(cut_off).await;
    assert!(answer.body.contains("[+]raft_loop ok\n"), "{}", answer.body);
    assert!(
        answer.body.contains("[+]serializable_read ok\n"),
        "{}",
        answer.body
    );
    assert!(c
        .telemetry(cut_off)
        .metrics
        .encode()
        .contains("etcd_server_has_leader 0\n"));
    assert_eq!(readyz(leader).await.status, 200);

    c.heal_all();
    wait_until("the healed member is ready again", PATIENCE, || async {
        readyz(cut_off).await.status == 200
    })
    .await
    .unwrap();
}
