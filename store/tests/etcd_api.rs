//! The etcd v3 gRPC front against etcd's own clients: `etcdctl` (Debian's etcd-client, from
//! scripts/setup) and the etcd client crate, on a 3-member store.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes};
use common::{run_err, run_ok, Cluster, ADMIN, KUBE_ADMIN, STRANGER};
use etcd_client::{
    Compare, CompareOp, EventType, GetOptions, PutOptions, Txn, TxnOp, TxnOpResponse,
    WatchFilterType, WatchOptions,
};

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

fn decode64(value: &serde_json::Value) -> String {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(value.as_str().expect("a base64 string"))
        .expect("base64");
    String::from_utf8(bytes).expect("UTF-8")
}

/// Lines of output without the empty ones.
fn lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| !l.is_empty()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcdctl_uses_every_service() {
    let cluster = Cluster::start(3, |_| {});
    cluster.leader().await;
    let endpoints = cluster.endpoints();
    let ctl = |args: &[&str]| run_ok(cluster.etcdctl(ADMIN, &endpoints).args(args));

    // KV.
    assert_eq!(ctl(&["put", "/a/1", "one"]).trim(), "OK");
    ctl(&["put", "/a/2", "two"]);
    ctl(&["put", "/a/3", "three"]);
    assert_eq!(
        ctl(&["get", "/a/", "--prefix", "--print-value-only"]),
        "one\ntwo\nthree\n"
    );
    assert_eq!(
        lines(&ctl(&[
            "get",
            "/a/",
            "--prefix",
            "--keys-only",
            "--sort-by=VALUE"
        ])),
        ["/a/1", "/a/3", "/a/2"]
    );
    assert_eq!(
        lines(&ctl(&[
            "get",
            "/a/",
            "--prefix",
            "--keys-only",
            "--order=DESCEND"
        ])),
        ["/a/3", "/a/2", "/a/1"]
    );
    let limited = json(&ctl(&["get", "/a/", "--prefix", "--limit=1", "-w", "json"]));
    assert_eq!(limited["count"], 3);
    assert_eq!(limited["more"], true);
    assert_eq!(decode64(&limited["kvs"][0]["value"]), "one");
    let header = &limited["header"];
    assert!(
        header["cluster_id"].as_u64().is_some_and(|c| c != 0),
        "{header}"
    );
    assert!(header["member_id"]
        .as_u64()
        .is_some_and(|m| (1..=3).contains(&m)));
    assert!(header["raft_term"].as_u64().is_some_and(|t| t > 0));
    let first_put = limited["kvs"][0]["mod_revision"]
        .as_i64()
        .expect("a revision");
    ctl(&["put", "/a/1", "uno"]);
    assert_eq!(
        ctl(&[
            "get",
            "/a/1",
            &format!("--rev={first_put}"),
            "--print-value-only"
        ]),
        "one\n"
    );
    assert_eq!(
        ctl(&["get", "/a/1", "--consistency=s", "--print-value-only"]).trim(),
        "uno"
    );
    assert_eq!(
        lines(&ctl(&["del", "/a/3", "--prev-kv"])),
        ["1", "/a/3", "three"]
    );

    // Txn, from etcdctl's interactive form on standard input.
    let mut txn = cluster.etcdctl(ADMIN, &endpoints);
    txn.arg("txn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = txn.spawn().expect("etcdctl txn starts");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(b"value(\"/a/1\") = \"uno\"\n\nput /a/1 \"eins\"\n\nget /a/2\n\n")
            .expect("writes the transaction");
    }
    let out = child.wait_with_output().expect("etcdctl txn ends");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(lines(&out), ["SUCCESS", "OK"], "{out}");
    assert_eq!(ctl(&["get", "/a/1", "--print-value-only"]).trim(), "eins");

    // Lease.
    let granted = ctl(&["lease", "grant", "600"]);
    let lease = granted
        .split_whitespace()
        .nth(1)
        .expect("lease <id> granted")
        .to_string();
    assert!(granted.contains("granted with TTL(600s)"), "{granted}");
    ctl(&["put", "/l/1", "leased", &format!("--lease={lease}")]);
    let ttl = ctl(&["lease", "timetolive", &lease, "--keys"]);
    assert!(ttl.contains("granted with TTL(600s)"), "{ttl}");
    assert!(ttl.contains("attached keys([/l/1])"), "{ttl}");
    assert!(ctl(&["lease", "list"]).contains(&lease));
    let kept = ctl(&["lease", "keep-alive", "--once", &lease]);
    assert!(kept.contains("keepalived with TTL(600)"), "{kept}");
    // A put that keeps the key's lease, and one that keeps its value.
    ctl(&["put", "/l/1", "relabelled", "--ignore-lease"]);
    assert!(ctl(&["lease", "timetolive", &lease, "--keys"]).contains("[/l/1]"));
    ctl(&["put", "/a/2", "--ignore-value", &format!("--lease={lease}")]);
    assert_eq!(ctl(&["get", "/a/2", "--print-value-only"]).trim(), "two");
    assert!(ctl(&["lease", "revoke", &lease]).contains("revoked"));
    assert_eq!(ctl(&["get", "/l/", "--prefix"]), "");
    assert_eq!(ctl(&["get", "/a/2"]), "", "the key took the revoked lease");

    // Watch: a background etcdctl sees puts, their previous values and a delete.
    let mut watch = cluster.etcdctl(ADMIN, &endpoints);
    watch
        .args(["watch", "/w/", "--prefix", "--prev-kv"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut watcher = watch.spawn().expect("etcdctl watch starts");
    let stdout = watcher.stdout.take().expect("stdout");
    let (seen_tx, seen) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if seen_tx.send(line).is_err() {
                break;
            }
        }
    });
    // The watch is set up once a write made after it shows; write until one does.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut first = Vec::new();
    while first.is_empty() {
        assert!(Instant::now() < deadline, "etcdctl watch saw nothing");
        ctl(&["put", "/w/ready", "x"]);
        while let Ok(line) = seen.recv_timeout(Duration::from_millis(500)) {
            first.push(line);
        }
    }
    ctl(&["put", "/w/k", "a"]);
    ctl(&["put", "/w/k", "b"]);
    ctl(&["del", "/w/k"]);
    let mut watched = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    // Three events: each put shows the previous value first (none for the first), a delete
    // the last value and then the key with no value.
    while watched.len() < 12 {
        assert!(
            Instant::now() < deadline,
            "etcdctl watch saw only {watched:?}"
        );
        if let Ok(line) = seen.recv_timeout(Duration::from_millis(200)) {
            if !line.is_empty() {
                watched.push(line);
            }
        }
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
    let watched: Vec<&str> = watched.iter().map(String::as_str).collect();
    assert_eq!(
        watched,
        ["PUT", "/w/k", "a", "PUT", "/w/k", "a", "/w/k", "b", "DELETE", "/w/k", "b", "/w/k"]
    );

    // Compaction, and what a read below it is told.
    let revision = json(&ctl(&["get", "/a/1", "-w", "json"]))["header"]["revision"]
        .as_i64()
        .expect("a revision");
    assert!(ctl(&["compaction", &revision.to_string()])
        .contains(&format!("compacted revision {revision}")));
    let compacted = run_err(cluster.etcdctl(ADMIN, &endpoints).args([
        "get",
        "/a/1",
        &format!("--rev={first_put}"),
    ]));
    assert!(
        compacted.contains("etcdserver: mvcc: required revision has been compacted"),
        "{compacted}"
    );
    let future = run_err(cluster.etcdctl(ADMIN, &endpoints).args([
        "get",
        "/a/1",
        &format!("--rev={}", revision + 1000),
    ]));
    assert!(
        future.contains("etcdserver: mvcc: required revision is a future revision"),
        "{future}"
    );

    // Cluster and Maintenance.
    let members = json(&ctl(&["member", "list", "-w", "json"]));
    let members = members["members"].as_array().expect("members");
    assert_eq!(members.len(), 3);
    for (i, member) in members.iter().enumerate() {
        assert_eq!(member["name"], format!("s{}", i + 1));
        assert_eq!(member["clientURLs"][0], cluster.members[i].endpoint());
    }
    let status = json(&ctl(&["endpoint", "status", "--cluster", "-w", "json"]));
    let status = status.as_array().expect("one status per member");
    assert_eq!(
        status.len(),
        3,
        "--cluster finds every member through the member list"
    );
    let leaders: Vec<u64> = status
        .iter()
        .map(|s| s["Status"]["leader"].as_u64().unwrap_or(0))
        .collect();
    assert!(
        leaders[0] != 0 && leaders.iter().all(|l| *l == leaders[0]),
        "{leaders:?}"
    );
    assert!(status.iter().all(
        |s| s["Status"]["header"]["cluster_id"] == status[0]["Status"]["header"]["cluster_id"]
    ));
    assert!(status.iter().all(|s| s["Status"]["version"]
        .as_str()
        .is_some_and(|v| v.starts_with("3.4"))));
    let health = ctl(&["endpoint", "health", "--cluster"]);
    let stderr_health = cluster
        .etcdctl(ADMIN, &endpoints)
        .args(["endpoint", "health", "--cluster"])
        .output()
        .expect("etcdctl runs");
    let all_health = format!("{health}{}", String::from_utf8_lossy(&stderr_health.stderr));
    assert_eq!(all_health.matches("is healthy").count(), 3, "{all_health}");
    let hashes = json(&ctl(&[
        "endpoint",
        "hashkv",
        "--cluster",
        &format!("--rev={revision}"),
        "-w",
        "json",
    ]));
    let hashes: Vec<u64> = hashes
        .as_array()
        .expect("one hash per member")
        .iter()
        .map(|h| h["HashKV"]["hash"].as_u64().expect("a hash"))
        .collect();
    assert_eq!(hashes.len(), 3);
    assert!(hashes.iter().all(|h| *h == hashes[0]), "{hashes:?}");
    assert_eq!(ctl(&["alarm", "list"]), "");
    assert_eq!(ctl(&["alarm", "disarm"]), "");
    assert_eq!(
        ctl(&["defrag", "--cluster"])
            .matches("Finished defragmenting")
            .count(),
        3
    );
    let snapshot = cluster.dir.path().join("snapshot.db");
    let saved = run_ok(
        cluster
            .etcdctl(ADMIN, &cluster.members[0].endpoint())
            .args(["snapshot", "save", &common::path_string(&snapshot)]),
    );
    assert!(saved.contains("Snapshot saved at"), "{saved}");
    let data = std::fs::read(&snapshot).expect("the snapshot file");
    let (state, digest) = data.split_at(data.len() - 32);
    assert_eq!(
        ring::digest::digest(&ring::digest::SHA256, state).as_ref(),
        digest,
        "the stream ends with the SHA-256 of the state before it"
    );
    assert_eq!(state.len() % 512, 0, "whole sectors");
    let state = store::grpc::snapshot_state(state).expect("a length");
    assert!(
        store::mvcc::Mvcc::from_snapshot(state).is_ok(),
        "a store snapshot"
    );

    // A lock, which etcdctl builds from leases, transactions and watches.
    let locked = ctl(&["lock", "/locks/one", "echo", "held"]);
    assert_eq!(locked.trim(), "held");

    // A client certificate from the CA whose organisation may not use the store.
    let denied = run_err(cluster.etcdctl(STRANGER, &endpoints).args(["get", "/a/1"]));
    assert!(denied.contains("etcdserver: permission denied"), "{denied}");
    // Nor may the Kubernetes API's admins: only the API servers and the store's own tools.
    let denied = run_err(
        cluster
            .etcdctl(KUBE_ADMIN, &endpoints)
            .args(["get", "/a/1"]),
    );
    assert!(denied.contains("etcdserver: permission denied"), "{denied}");
}

/// The etcd client crate through every service, with Kubernetes' create and update CAS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_etcd_client_crate_uses_every_service() {
    let cluster = Cluster::start(3, |c| {
        c.watch_progress_notify_interval = Duration::from_secs(1);
    });
    cluster.leader().await;
    let endpoints: Vec<String> = cluster.members.iter().map(|m| m.endpoint()).collect();
    let mut client = cluster.client(ADMIN, &endpoints).await;

    // A watch of the prefix from before the writes, with previous values, and one that skips
    // deletes.
    let mut watch = client
        .watch(
            "/pods/",
            Some(WatchOptions::new().with_prefix().with_prev_key()),
        )
        .await
        .expect("a watch");
    let created = watch.message().await.expect("a response").expect("created");
    assert!(created.created());
    let first_id = created.watch_id();
    watch
        .watch(
            "/pods/",
            Some(
                WatchOptions::new()
                    .with_prefix()
                    .with_filters([WatchFilterType::NoDelete]),
            ),
        )
        .await
        .expect("a second watch on the stream");
    let second = watch.message().await.expect("a response").expect("created");
    assert!(second.created());
    assert_ne!(second.watch_id(), first_id);

    // Kubernetes' create: put only if the key does not exist.
    let create = |key: &str, value: &str| {
        Txn::new()
            .when([Compare::mod_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value, None)])
            .or_else([TxnOp::get(key, None)])
    };
    let made = client.txn(create("/pods/a", "v1")).await.expect("create");
    assert!(made.succeeded());
    let rv = made.header().expect("a header").revision();
    let again = client
        .txn(create("/pods/a", "v1"))
        .await
        .expect("create again");
    assert!(!again.succeeded(), "the key exists");
    let Some(TxnOpResponse::Get(existing)) = again.op_responses().into_iter().next() else {
        panic!("the failure branch reads the key")
    };
    assert_eq!(existing.kvs()[0].value(), b"v1");
    // Kubernetes' update: put only if the key is still at the revision read.
    let update = |rv: i64, value: &str| {
        Txn::new()
            .when([Compare::mod_revision("/pods/a", CompareOp::Equal, rv)])
            .and_then([TxnOp::put("/pods/a", value, None)])
            .or_else([TxnOp::get("/pods/a", None)])
    };
    let updated = client.txn(update(rv, "v2")).await.expect("update");
    assert!(updated.succeeded());
    let stale = client.txn(update(rv, "v3")).await.expect("stale update");
    assert!(!stale.succeeded(), "a stale resource version loses");
    let put = client
        .put("/pods/b", "b1", Some(PutOptions::new().with_prev_key()))
        .await
        .expect("put");
    assert!(put.prev_key().is_none());
    let deleted = client.delete("/pods/b", None).await.expect("delete");
    assert_eq!(deleted.deleted(), 1);

    // The watches saw it all, in order.
    let mut first = Vec::new();
    let mut second = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while first.len() < 4 || second.len() < 3 {
        assert!(
            Instant::now() < deadline,
            "watched {first:?} and {second:?}"
        );
        let response = tokio::time::timeout(Duration::from_secs(10), watch.message())
            .await
            .expect("a watch response in time")
            .expect("no error")
            .expect("the stream goes on");
        for event in response.events() {
            let kv = event.kv().expect("a key-value");
            let entry = (
                event.event_type(),
                kv.key_str().expect("UTF-8").to_string(),
                kv.mod_revision(),
                event
                    .prev_kv()
                    .map(|p| p.value_str().expect("UTF-8").to_string()),
            );
            if response.watch_id() == first_id {
                first.push(entry);
            } else {
                second.push(entry);
            }
        }
    }
    let kinds: Vec<EventType> = first.iter().map(|e| e.0).collect();
    assert_eq!(
        kinds,
        [
            EventType::Put,
            EventType::Put,
            EventType::Put,
            EventType::Delete
        ]
    );
    assert_eq!(
        first[1].3.as_deref(),
        Some("v1"),
        "the update's previous value"
    );
    assert!(
        first.windows(2).all(|w| w[0].2 < w[1].2),
        "in revision order"
    );
    assert!(
        second.iter().all(|e| e.0 == EventType::Put),
        "no deletes: {second:?}"
    );
    assert!(
        second.iter().all(|e| e.3.is_none()),
        "no previous values asked"
    );

    // A progress request is answered at the revision the member is at.
    watch.request_progress().await.expect("a progress request");
    let last = client
        .get("/pods/a", None)
        .await
        .expect("get")
        .header()
        .expect("h")
        .revision();
    let progress = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let response = watch
                .message()
                .await
                .expect("no error")
                .expect("a response");
            if response.watch_id() == -1 {
                return response;
            }
        }
    })
    .await
    .expect("a progress response");
    assert!(progress.events().is_empty());
    assert!(progress.header().expect("a header").revision() >= last);
    watch.cancel(first_id).await.expect("cancel");

    // Reads: prefix, sorting, limit, keys only, serializable.
    for i in 0..5 {
        client
            .put(format!("/nodes/n{i}"), format!("{}", 9 - i), None)
            .await
            .expect("put");
    }
    let sorted = client
        .get(
            "/nodes/",
            Some(
                GetOptions::new()
                    .with_prefix()
                    .with_sort(
                        etcd_client::SortTarget::Value,
                        etcd_client::SortOrder::Ascend,
                    )
                    .with_limit(2),
            ),
        )
        .await
        .expect("sorted");
    let keys: Vec<&str> = sorted
        .kvs()
        .iter()
        .map(|kv| kv.key_str().expect("UTF-8"))
        .collect();
    assert_eq!(keys, ["/nodes/n4", "/nodes/n3"]);
    assert!(sorted.more());
    assert_eq!(sorted.count(), 5);
    let serializable = client
        .get(
            "/nodes/",
            Some(
                GetOptions::new()
                    .with_prefix()
                    .with_keys_only()
                    .with_serializable(),
            ),
        )
        .await
        .expect("serializable");
    assert_eq!(serializable.kvs().len(), 5);
    assert!(serializable.kvs().iter().all(|kv| kv.value().is_empty()));

    // Leases: grant, attach, keep alive over the stream, time to live, list, revoke.
    let lease = client.lease_grant(30, None).await.expect("grant");
    assert_eq!(lease.ttl(), 30);
    client
        .put(
            "/leased",
            "x",
            Some(PutOptions::new().with_lease(lease.id())),
        )
        .await
        .expect("put with a lease");
    let (mut keeper, mut kept) = client
        .lease_keep_alive(lease.id())
        .await
        .expect("keep-alive");
    for _ in 0..2 {
        keeper.keep_alive().await.expect("a renewal");
        let renewed = kept.message().await.expect("no error").expect("an answer");
        assert_eq!((renewed.id(), renewed.ttl()), (lease.id(), 30));
    }
    let ttl = client
        .lease_time_to_live(
            lease.id(),
            Some(etcd_client::LeaseTimeToLiveOptions::new().with_keys()),
        )
        .await
        .expect("time to live");
    assert_eq!(ttl.granted_ttl(), 30);
    assert!((25..=30).contains(&ttl.ttl()), "{}", ttl.ttl());
    assert_eq!(ttl.keys(), [b"/leased".to_vec()]);
    let leases = client.leases().await.expect("leases");
    assert!(leases.leases().iter().any(|l| l.id() == lease.id()));
    client.lease_revoke(lease.id()).await.expect("revoke");
    assert_eq!(client.get("/leased", None).await.expect("get").count(), 0);
    let gone = client
        .lease_time_to_live(lease.id(), None)
        .await
        .expect("time to live");
    assert_eq!(gone.ttl(), -1);
    let missing = client
        .lease_revoke(lease.id())
        .await
        .expect_err("revoked twice");
    assert!(
        missing
            .to_string()
            .contains("etcdserver: requested lease not found"),
        "{missing}"
    );

    // Cluster and Maintenance.
    let members = client.member_list().await.expect("member list");
    let header = members.header().expect("a header");
    assert!(header.cluster_id() != 0 && header.member_id() != 0);
    assert_eq!(members.members().len(), 3);
    // Each member's client URL is its `--initial-cluster-grpc` entry, the answering member's
    // own included.
    let mut client_urls: Vec<String> = members
        .members()
        .iter()
        .flat_map(|m| m.client_urls().to_vec())
        .collect();
    client_urls.sort();
    let mut expected_urls = endpoints.clone();
    expected_urls.sort();
    assert_eq!(client_urls, expected_urls);
    let status = client.status().await.expect("status");
    assert!(status.leader() != 0 && status.raft_term() > 0);
    assert!(status.raft_index() >= status.raft_applied_index().min(status.raft_index()));
    let revision = status.header().expect("a header").revision();
    let hash = client.hash_kv(revision).await.expect("hash kv");
    assert_eq!(hash.header().expect("a header").revision(), revision);
    client.hash().await.expect("hash");
    let alarms = client
        .alarm(
            etcd_client::AlarmAction::Get,
            etcd_client::AlarmType::None,
            None,
        )
        .await
        .expect("alarms");
    assert!(alarms.alarms().is_empty());
    client.defragment().await.expect("defragment");
    let mut snapshot = client.snapshot().await.expect("a snapshot stream");
    let mut bytes = Vec::new();
    let mut last_remaining = u64::MAX;
    while let Some(part) = snapshot.message().await.expect("no error") {
        assert!(part.remaining_bytes() <= last_remaining);
        last_remaining = part.remaining_bytes();
        bytes.extend_from_slice(part.blob());
    }
    assert_eq!(last_remaining, 0);
    let (state, digest) = bytes.split_at(bytes.len() - 32);
    assert_eq!(
        ring::digest::digest(&ring::digest::SHA256, state).as_ref(),
        digest
    );
    let state = store::grpc::snapshot_state(state).expect("a length");
    let restored = store::mvcc::Mvcc::from_snapshot(state).expect("a store snapshot");
    assert!(restored.current_revision() >= revision);
    let refused = client
        .member_remove(2)
        .await
        .expect_err("membership is fixed");
    assert!(
        refused.to_string().contains("fixed membership"),
        "{refused}"
    );
}

/// A watch whose member (the leader) is killed resumes on another from the revision after the
/// last it saw, and sees every write, once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_resumes_across_a_leader_kill_without_gaps() {
    let mut cluster = Cluster::start(3, |_| {});
    let leader = cluster.leader().await;
    let endpoints: Vec<String> = cluster.members.iter().map(|m| m.endpoint()).collect();
    let others: Vec<String> = endpoints
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != leader)
        .map(|(_, e)| e.clone())
        .collect();
    let mut watcher = cluster.client(ADMIN, &[endpoints[leader].clone()]).await;
    let mut watch = watcher
        .watch("/seq/", Some(WatchOptions::new().with_prefix()))
        .await
        .expect("a watch on the leader");
    assert!(watch
        .message()
        .await
        .expect("ok")
        .expect("created")
        .created());

    // A writer through the followers, retrying across the election.
    let writer_client = cluster.client(ADMIN, &others).await;
    let (done_tx, mut done) = tokio::sync::watch::channel(false);
    let writer = tokio::spawn(async move {
        let mut client = writer_client;
        let mut acknowledged = Vec::new();
        let mut i = 0;
        while !*done.borrow_and_update() {
            match client
                .put(format!("/seq/{i:05}"), format!("{i}"), None)
                .await
            {
                Ok(put) => {
                    acknowledged.push(put.header().expect("a header").revision());
                    i += 1;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
        acknowledged
    });

    let mut seen: Vec<i64> = Vec::new();
    assert!(
        read_until(&mut watch, &mut seen, 50).await,
        "the watch sees the first writes"
    );
    cluster.members[leader].kill();
    // The stream breaks (or goes silent); the client watches again on a survivor from the
    // revision after the last one it saw.
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        while let Ok(Some(response)) = watch.message().await {
            seen.extend(
                response
                    .events()
                    .iter()
                    .filter_map(|e| e.kv())
                    .map(|kv| kv.mod_revision()),
            );
        }
    })
    .await;
    let resume_from = seen.last().copied().expect("events") + 1;
    let mut resumed_client = cluster.client(ADMIN, &others).await;
    let mut resumed = loop {
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(resume_from);
        if let Ok(mut stream) = resumed_client.watch("/seq/", Some(options)).await {
            if let Ok(Some(created)) = stream.message().await {
                if created.created() && !created.canceled() {
                    break stream;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let before = seen.len();
    assert!(
        read_until(&mut resumed, &mut seen, before + 50).await,
        "the resumed watch sees writes after the election"
    );
    let _ = done_tx.send(true);
    let acknowledged = writer.await.expect("the writer");
    let target = acknowledged.last().copied().expect("writes");
    while seen.last().copied().unwrap_or(0) < target {
        let response = tokio::time::timeout(Duration::from_secs(10), resumed.message())
            .await
            .expect("the rest in time")
            .expect("no error")
            .expect("the stream goes on");
        seen.extend(
            response
                .events()
                .iter()
                .filter_map(|e| e.kv())
                .map(|kv| kv.mod_revision()),
        );
    }
    // One write per revision: every revision from the first seen to the last, once.
    let first = seen[0];
    let expected: Vec<i64> = (first..first + seen.len() as i64).collect();
    assert_eq!(seen, expected, "no gap and no repeat across the kill");
    for revision in &acknowledged {
        if *revision >= first {
            assert!(
                seen.binary_search(revision).is_ok(),
                "acknowledged {revision} was watched"
            );
        }
    }
}

/// Reads revisions from `watch` into `seen` until it holds `count`; false if the stream ends or
/// goes quiet for 10 s.
async fn read_until(
    watch: &mut etcd_client::WatchStream,
    seen: &mut Vec<i64>,
    count: usize,
) -> bool {
    while seen.len() < count {
        match tokio::time::timeout(Duration::from_secs(10), watch.message()).await {
            Ok(Ok(Some(response))) => {
                seen.extend(
                    response
                        .events()
                        .iter()
                        .filter_map(|e| e.kv())
                        .map(|kv| kv.mod_revision()),
                );
            }
            _ => return false,
        }
    }
    true
}

/// Compaction through the KV service, and what reads, watches and hashes below it are told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_answers_as_etcd_does() {
    let cluster = Cluster::start(3, |_| {});
    cluster.leader().await;
    let endpoints: Vec<String> = cluster.members.iter().map(|m| m.endpoint()).collect();
    let mut client = cluster.client(ADMIN, &endpoints).await;
    let mut revisions = Vec::new();
    for i in 0..10 {
        let put = client.put("/c/k", format!("{i}"), None).await.expect("put");
        revisions.push(put.header().expect("h").revision());
    }
    let at = revisions[5];
    client.compact(at, None).await.expect("compact");
    let old = client
        .get("/c/k", Some(GetOptions::new().with_revision(revisions[2])))
        .await
        .expect_err("below the compaction");
    assert!(
        old.to_string()
            .contains("etcdserver: mvcc: required revision has been compacted"),
        "{old}"
    );
    let kept = client
        .get("/c/k", Some(GetOptions::new().with_revision(at)))
        .await
        .expect("at the compaction");
    assert_eq!(kept.kvs()[0].value(), b"5");
    let again = client
        .compact(revisions[3], None)
        .await
        .expect_err("compacted already");
    assert!(
        again
            .to_string()
            .contains("required revision has been compacted"),
        "{again}"
    );
    let future = client
        .compact(revisions[9] + 100, None)
        .await
        .expect_err("future");
    assert!(
        future
            .to_string()
            .contains("required revision is a future revision"),
        "{future}"
    );
    let future_read = client
        .get(
            "/c/k",
            Some(GetOptions::new().with_revision(revisions[9] + 100)),
        )
        .await
        .expect_err("future read");
    assert!(
        future_read.to_string().contains("future revision"),
        "{future_read}"
    );

    // A watch from below the compaction is created, then cancelled with the compact revision.
    let mut watch = client
        .watch(
            "/c/k",
            Some(WatchOptions::new().with_start_revision(revisions[1])),
        )
        .await
        .expect("a watch");
    let created = watch.message().await.expect("ok").expect("created");
    assert!(created.created());
    let cancelled = watch.message().await.expect("ok").expect("cancelled");
    assert!(cancelled.canceled());
    assert_eq!(cancelled.compact_revision(), at);
    assert_eq!(cancelled.watch_id(), created.watch_id());
    // From the compaction itself, the history is there.
    let mut watch = client
        .watch("/c/k", Some(WatchOptions::new().with_start_revision(at)))
        .await
        .expect("a watch");
    assert!(watch
        .message()
        .await
        .expect("ok")
        .expect("created")
        .created());
    let events = watch.message().await.expect("ok").expect("events");
    assert_eq!(events.events()[0].kv().expect("kv").mod_revision(), at);
    let hash = client
        .hash_kv(revisions[1])
        .await
        .expect_err("hash below the compaction");
    assert!(hash.to_string().contains("compacted"), "{hash}");
}

/// A lease nobody renews runs out on the leader's clock; its keys are deleted, and watchers see
/// the deletes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_lease_deletes_its_keys() {
    let cluster = Cluster::start(3, |_| {});
    cluster.leader().await;
    let endpoints: Vec<String> = cluster.members.iter().map(|m| m.endpoint()).collect();
    let mut client = cluster.client(ADMIN, &endpoints).await;
    let lease = client.lease_grant(2, None).await.expect("grant");
    assert_eq!(lease.ttl(), 2);
    for key in ["/e/a", "/e/b"] {
        client
            .put(key, "x", Some(PutOptions::new().with_lease(lease.id())))
            .await
            .expect("put");
    }
    client.put("/e/c", "stays", None).await.expect("put");
    let mut watch = client
        .watch(
            "/e/",
            Some(WatchOptions::new().with_prefix().with_prev_key()),
        )
        .await
        .expect("a watch");
    assert!(watch
        .message()
        .await
        .expect("ok")
        .expect("created")
        .created());
    let started = Instant::now();
    let response = tokio::time::timeout(Duration::from_secs(15), watch.message())
        .await
        .expect("the lease runs out in time")
        .expect("ok")
        .expect("events");
    let expired_after = started.elapsed();
    assert!(
        expired_after >= Duration::from_millis(1500),
        "{expired_after:?}"
    );
    let deleted: Vec<String> = response
        .events()
        .iter()
        .filter(|e| e.event_type() == EventType::Delete)
        .map(|e| e.kv().expect("kv").key_str().expect("UTF-8").to_string())
        .collect();
    assert_eq!(deleted, ["/e/a", "/e/b"], "both keys at one revision");
    let left = client
        .get("/e/", Some(GetOptions::new().with_prefix()))
        .await
        .expect("get");
    assert_eq!(left.kvs().len(), 1);
    assert_eq!(left.kvs()[0].key(), b"/e/c");
    let ttl = client
        .lease_time_to_live(lease.id(), None)
        .await
        .expect("time to live");
    assert_eq!(ttl.ttl(), -1);
    // The member answers a renewal of a gone lease with a TTL of 0, which the client reports.
    let renewal = client
        .lease_keep_alive(lease.id())
        .await
        .expect_err("the lease is gone");
    assert!(renewal.to_string().contains("lease not found"), "{renewal}");
}

/// Raw gRPC bytes to a method, for what no client sends.
#[derive(Default, Clone)]
struct RawCodec;

impl tonic::codec::Codec for RawCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> RawCodec {
        RawCodec
    }

    fn decoder(&mut self) -> RawCodec {
        RawCodec
    }
}

impl tonic::codec::Encoder for RawCodec {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: Bytes,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        dst.put_slice(&item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawCodec {
    type Item = Bytes;
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Bytes>, tonic::Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

async fn raw_call(
    cluster: &Cluster,
    endpoint: &str,
    path: &'static str,
    body: Bytes,
) -> Result<Bytes, tonic::Status> {
    let certs = cluster.certs();
    let read = |name: &str| std::fs::read(certs.join(name)).expect("a certificate file");
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(read("ca.crt")))
        .identity(tonic::transport::Identity::from_pem(
            read(&format!("{ADMIN}.crt")),
            read(&format!("{ADMIN}.key")),
        ))
        .domain_name("localhost");
    let channel = tonic::transport::Channel::from_shared(endpoint.to_string())
        .expect("an endpoint")
        .tls_config(tls)
        .expect("TLS")
        .connect()
        .await
        .expect("connects");
    let mut grpc = tonic::client::Grpc::new(channel).max_encoding_message_size(usize::MAX);
    grpc.ready().await.expect("ready");
    grpc.unary(
        tonic::Request::new(body),
        tonic::codegen::http::uri::PathAndQuery::from_static(path),
        RawCodec,
    )
    .await
    .map(|r| r.into_inner())
}

/// Requests no well-behaved client sends get the gRPC errors etcd gives them, and the member
/// answers the next request as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_etcds_errors_and_the_member_serves_on() {
    const LIMIT: usize = 64 * 1024;
    let cluster = Cluster::start(3, |c| c.max_request_bytes = LIMIT);
    cluster.leader().await;
    let endpoint = cluster.members[0].endpoint();
    let mut client = cluster.client(ADMIN, std::slice::from_ref(&endpoint)).await;
    let code = |e: &etcd_client::Error| match e {
        etcd_client::Error::GRpcStatus(status) => (status.code(), status.message().to_string()),
        other => panic!("not a gRPC status: {other}"),
    };

    // Over the member's limit but within gRPC's: refused by the member, as etcd does.
    let large = client
        .put("/big", vec![b'x'; LIMIT + 1024], None)
        .await
        .expect_err("too large");
    assert_eq!(
        code(&large),
        (
            tonic::Code::InvalidArgument,
            "etcdserver: request is too large".into()
        )
    );
    // Over gRPC's limit too: refused before it is decoded.
    let huge = client
        .put("/big", vec![b'x'; LIMIT + 600 * 1024], None)
        .await
        .expect_err("too large for gRPC");
    let (huge_code, huge_message) = code(&huge);
    assert_eq!(huge_code, tonic::Code::ResourceExhausted, "{huge_message}");
    assert!(
        huge_message.starts_with("grpc: received message larger than max"),
        "{huge_message}"
    );

    // A transaction with more operations than etcd allows.
    let ops: Vec<TxnOp> = (0..129)
        .map(|i| TxnOp::put(format!("/t/{i}"), "v", None))
        .collect();
    let many = client
        .txn(Txn::new().and_then(ops))
        .await
        .expect_err("too many ops");
    assert_eq!(
        code(&many),
        (
            tonic::Code::InvalidArgument,
            "etcdserver: too many operations in txn request".into()
        )
    );
    let twice = client
        .txn(Txn::new().and_then([TxnOp::put("/t/x", "1", None), TxnOp::put("/t/x", "2", None)]))
        .await
        .expect_err("a key twice");
    assert_eq!(
        code(&twice),
        (
            tonic::Code::InvalidArgument,
            "etcdserver: duplicate key given in txn request".into()
        )
    );
    let empty = client.put("", "v", None).await.expect_err("no key");
    assert_eq!(
        code(&empty),
        (
            tonic::Code::InvalidArgument,
            "etcdserver: key is not provided".into()
        )
    );
    let no_lease = client
        .put("/k", "v", Some(PutOptions::new().with_lease(12345)))
        .await
        .expect_err("no such lease");
    assert_eq!(
        code(&no_lease),
        (
            tonic::Code::NotFound,
            "etcdserver: requested lease not found".into()
        )
    );

    // Bytes that are no protobuf message: a field whose length runs past the end.
    let malformed = raw_call(
        &cluster,
        &endpoint,
        "/etcdserverpb.KV/Put",
        Bytes::from_static(&[0x0a, 0xff, 0x7f, 0x01]),
    )
    .await
    .expect_err("malformed");
    assert_eq!(malformed.code(), tonic::Code::Internal, "{malformed:?}");
    assert!(
        malformed
            .message()
            .starts_with("grpc: error unmarshalling request"),
        "{malformed:?}"
    );
    // A method etcd does not have.
    let unknown = raw_call(&cluster, &endpoint, "/etcdserverpb.KV/Nope", Bytes::new())
        .await
        .expect_err("unknown method");
    assert_eq!(unknown.code(), tonic::Code::Unimplemented);
    // An empty message is a valid (empty) request: a Range of no key.
    let no_key = raw_call(&cluster, &endpoint, "/etcdserverpb.KV/Range", Bytes::new())
        .await
        .expect_err("no key");
    assert_eq!(no_key.message(), "etcdserver: key is not provided");

    // A watch stream that sends garbage is ended; the member serves on.
    let garbage = raw_call(
        &cluster,
        &endpoint,
        "/etcdserverpb.Watch/Watch",
        Bytes::from_static(&[0x0a, 0xff]),
    )
    .await;
    assert!(garbage.is_err(), "{garbage:?}");

    // The same client and connection still work.
    client
        .put("/after", "fine", None)
        .await
        .expect("a put after the bad ones");
    let got = client.get("/after", None).await.expect("a get");
    assert_eq!(got.kvs()[0].value(), b"fine");
    let status = client.status().await.expect("status");
    assert!(status.leader() != 0);
}
