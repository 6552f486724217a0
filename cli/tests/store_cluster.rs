//! End-to-end tests of the replicated store: real `kemu store` processes on loopback.

use crate::common;

use std::collections::HashMap;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use cluster::process::LocalStore;
use common::{kemu_exe, wait_until};
use parking_lot::Mutex;
use store::client::{Client, ClientConfig, ClientError};
use store::types::*;

/// A client that talks to one member only.
fn member_client(cluster: &LocalStore, name: &str) -> anyhow::Result<Client> {
    let endpoint = cluster.endpoint(name).context("no such member")?;
    Ok(Client::new(
        ClientConfig::new(vec![endpoint]),
        &cluster.certs_dir(),
        store::config::STORE_ADMIN,
    )?)
}

async fn revision_of(cluster: &LocalStore, name: &str) -> Option<i64> {
    let client = member_client(cluster, name).ok()?;
    let endpoint = cluster.endpoint(name)?;
    client.status_of(endpoint).await.ok().map(|s| s.revision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_writes_survive_a_leader_kill_and_the_watch_sees_each_once(
) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &[]).await?;
    let admin = cluster.admin()?;

    // The watch starts at revision 1, before any write.
    let mut watch = admin
        .watch(WatchRequest {
            range: KeyRange::prefix("k/"),
            start_revision: 1,
            prev_kv: false,
            progress_notify_secs: 0,
        })
        .await?;
    let seen: Arc<Mutex<Vec<(i64, Bytes, Bytes)>>> = Arc::default();
    let seen_by_watch = seen.clone();
    let watcher = tokio::spawn(async move {
        while let Some(message) = watch.next().await {
            match message {
                Ok(WatchResponse::Events { events, .. }) => {
                    let mut seen = seen_by_watch.lock();
                    for e in events {
                        seen.push((e.kv.mod_revision, e.kv.key, e.kv.value));
                    }
                }
                Ok(WatchResponse::Canceled { reason, .. }) => {
                    return Err(anyhow::anyhow!("watch canceled: {reason}"))
                }
                Ok(_) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    });

    const WRITERS: usize = 16;
    const PER_WRITER: usize = 625;
    let acked: Arc<Mutex<HashMap<Bytes, (Bytes, i64)>>> = Arc::default();
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let client = Client::new(
            ClientConfig::new(cluster.client_endpoints()),
            &cluster.certs_dir(),
            store::config::STORE_ADMIN,
        )?;
        client.prefer(w);
        let acked = acked.clone();
        writers.push(tokio::spawn(async move {
            for i in 0..PER_WRITER {
                let key = Bytes::from(format!("k/{w:02}/{i:05}"));
                let value = Bytes::from(format!("v{w}-{i}"));
                // A failed write is tried again until one attempt is acknowledged.
                loop {
                    let put = PutRequest {
                        key: key.clone(),
                        value: value.clone(),
                        lease: 0,
                        prev_kv: false,
                    };
                    match client.put(put).await {
                        Ok(r) => {
                            acked
                                .lock()
                                .insert(key.clone(), (value.clone(), r.header.revision));
                            break;
                        }
                        Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                }
            }
        }));
    }

    // Kill the leader once a third of the writes are in, and bring it back a second later.
    wait_until(
        "3,000 writes are acknowledged",
        Duration::from_secs(60),
        || async { acked.lock().len() >= 3000 },
    )
    .await?;
    let victim = cluster.kill_leader().await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    cluster.restart(&victim)?;
    for writer in writers {
        writer.await?;
    }
    let acked = acked.lock().clone();
    assert_eq!(acked.len(), WRITERS * PER_WRITER);

    // Every member converges on the same final revision and holds every acknowledged write.
    let final_revision = admin
        .range(RangeRequest {
            range: KeyRange::prefix("k/"),
            ..Default::default()
        })
        .await?
        .header
        .revision;
    for name in cluster.names() {
        wait_until(
            &format!("{name} applied revision {final_revision}"),
            Duration::from_secs(30),
            || async {
                revision_of(&cluster, &name)
                    .await
                    .is_some_and(|r| r >= final_revision)
            },
        )
        .await?;
        let client = member_client(&cluster, &name)?;
        let all = client
            .range(RangeRequest {
                range: KeyRange::prefix("k/"),
                serializable: true,
                ..Default::default()
            })
            .await?;
        let stored: HashMap<Bytes, KeyValue> =
            all.kvs.into_iter().map(|kv| (kv.key.clone(), kv)).collect();
        for (key, (value, revision)) in &acked {
            let kv = stored
                .get(key)
                .with_context(|| format!("{name} lost {key:?}"))?;
            assert_eq!(&kv.value, value, "{name}: value of {key:?}");
            assert_eq!(
                kv.mod_revision, *revision,
                "{name}: mod revision of {key:?}"
            );
        }
    }

    // The watch saw every revision exactly once, in order, with no gap: every write here is one
    // put under k/, so the revisions run 2, 3, ... final.
    wait_until(
        "the watch reached the final revision",
        Duration::from_secs(30),
        || async {
            seen.lock()
                .last()
                .is_some_and(|(r, _, _)| *r >= final_revision)
        },
    )
    .await?;
    let seen = seen.lock().clone();
    let revisions: Vec<i64> = seen.iter().map(|(r, _, _)| *r).collect();
    let expected: Vec<i64> = (2..=final_revision).collect();
    assert_eq!(revisions.len(), expected.len(), "watch event count");
    assert!(
        revisions == expected,
        "watch revisions are not exactly 2..={final_revision}"
    );
    let by_revision: HashMap<i64, (&Bytes, &Bytes)> =
        seen.iter().map(|(r, k, v)| (*r, (k, v))).collect();
    for (key, (value, revision)) in &acked {
        assert_eq!(
            by_revision.get(revision),
            Some(&(key, value)),
            "watch event at revision {revision}"
        );
    }
    watcher.abort();
    cluster.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_transactions_and_leases_behave_as_in_etcd() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &[]).await?;
    let c = cluster.admin()?;
    let put = |k: &str, v: &str| PutRequest {
        key: Bytes::from(k.to_string()),
        value: Bytes::from(v.to_string()),
        lease: 0,
        prev_kv: true,
    };

    let r1 = c.put(put("a", "1")).await?;
    let r2 = c.put(put("a", "2")).await?;
    assert_eq!(r2.header.revision, r1.header.revision + 1);
    assert_eq!(
        r2.prev_kv.as_ref().map(|kv| kv.value.clone()),
        Some(Bytes::from("1"))
    );
    let r3 = c.put(put("b", "x")).await?;
    let a = c.get("a").await?.context("a exists")?;
    assert_eq!(
        (a.create_revision, a.mod_revision, a.version),
        (r1.header.revision, r2.header.revision, 2)
    );

    // Compaction: reads and watches below the compacted revision answer "compacted".
    c.compact(r2.header.revision).await?;
    let old = c
        .range(RangeRequest {
            range: KeyRange::single("a"),
            revision: r1.header.revision,
            ..Default::default()
        })
        .await;
    assert!(
        matches!(old, Err(ClientError::Store(StoreError::Compacted { .. }))),
        "got {old:?}"
    );
    let at = c
        .range(RangeRequest {
            range: KeyRange::single("a"),
            revision: r2.header.revision,
            ..Default::default()
        })
        .await?;
    assert_eq!(at.kvs[0].value, Bytes::from("2"));
    let mut w = c
        .watch(WatchRequest {
            range: KeyRange::single("a"),
            start_revision: r1.header.revision,
            ..Default::default()
        })
        .await?;
    let canceled = loop {
        match w.next().await.context("watch ended without a cancel")?? {
            WatchResponse::Created { .. } => continue,
            other => break other,
        }
    };
    assert!(
        matches!(canceled, WatchResponse::Canceled { compact_revision, .. } if compact_revision == r2.header.revision),
        "got {canceled:?}"
    );
    let count = c
        .range(RangeRequest {
            range: KeyRange::prefix(""),
            count_only: true,
            ..Default::default()
        })
        .await?;
    assert_eq!((count.count, count.kvs.len()), (2, 0));
    let limited = c
        .range(RangeRequest {
            range: KeyRange::prefix(""),
            limit: 1,
            ..Default::default()
        })
        .await?;
    assert_eq!(
        (limited.kvs.len(), limited.more, limited.count),
        (1, true, 2)
    );

    // Kubernetes' create and update transactions.
    let create = |key: &str| TxnRequest {
        compare: vec![Compare {
            range: KeyRange::single(key.to_string()),
            result: CompareResult::Equal,
            target: CompareTarget::ModRevision(0),
        }],
        success: vec![RequestOp::Put(put(key, "new"))],
        failure: vec![],
    };
    assert!(
        !c.txn(create("a")).await?.succeeded,
        "create of an existing key must fail"
    );
    assert!(c.txn(create("fresh")).await?.succeeded);
    let update = |rev: i64| TxnRequest {
        compare: vec![Compare {
            range: KeyRange::single("b"),
            result: CompareResult::Equal,
            target: CompareTarget::ModRevision(rev),
        }],
        success: vec![RequestOp::Put(put("b", "y"))],
        failure: vec![RequestOp::Range(RangeRequest {
            range: KeyRange::single("b"),
            ..Default::default()
        })],
    };
    let stale = c.txn(update(r1.header.revision)).await?;
    assert!(!stale.succeeded);
    match &stale.responses[..] {
        [ResponseOp::Range(got)] => assert_eq!(got.kvs[0].mod_revision, r3.header.revision),
        other => bail!("else branch answered {other:?}"),
    }
    assert!(c.txn(update(r3.header.revision)).await?.succeeded);

    // A lease's expiry deletes its keys and emits delete events.
    let lease = c.lease_grant(1).await?;
    let leased = PutRequest {
        key: Bytes::from("leased"),
        value: Bytes::from("v"),
        lease: lease.id,
        prev_kv: false,
    };
    let put_rev = c.put(leased).await?.header.revision;
    let mut w = c
        .watch(WatchRequest {
            range: KeyRange::single("leased"),
            start_revision: put_rev + 1,
            ..Default::default()
        })
        .await?;
    let deleted = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match w.next().await {
                Some(Ok(WatchResponse::Events { events, .. })) => return Ok(events),
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(anyhow::Error::from(e)),
                None => bail!("watch ended"),
            }
        }
    })
    .await
    .context("no delete event within 10 s of a 1 s lease")??;
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].kind, EventKind::Delete);
    assert!(c.get("leased").await?.is_none());
    let missing = c.lease_keep_alive(lease.id).await;
    assert!(
        matches!(
            missing,
            Err(ClientError::Store(StoreError::LeaseNotFound { .. }))
        ),
        "got {missing:?}"
    );
    cluster.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_restarted_after_log_compaction_catches_up_from_a_snapshot() -> anyhow::Result<()>
{
    catches_up(600, 512, 0).await
}

/// The same gap within the catch-up entries the leader keeps: the member catches up from the
/// log, without a snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_a_little_behind_catches_up_from_the_kept_log() -> anyhow::Result<()> {
    catches_up(600, 512, 2000).await
}

/// A snapshot of 72 MB: larger than a transport frame (64 MiB), so the leader sends it in
/// pieces. Before pieces, such a member never caught up (every send failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_larger_than_a_frame_reaches_a_lagging_member() -> anyhow::Result<()> {
    catches_up(1100, 64 * 1024, 0).await
}

/// Kills a follower, writes `puts` values of `value_bytes` (the log is compacted every 100
/// entries, keeping `catch_up` entries before each snapshot), restarts it: it must catch up —
/// through the leader's snapshot when the gap is more than `catch_up` entries, else from the
/// log — and agree with the rest.
async fn catches_up(puts: usize, value_bytes: usize, catch_up: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let extra = [
        "--snapshot-entries".to_string(),
        "100".to_string(),
        "--snapshot-catch-up-entries".to_string(),
        catch_up.to_string(),
    ];
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &extra).await?;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await?;
    let follower = cluster
        .names()
        .into_iter()
        .find(|n| *n != leader)
        .context("a follower")?;
    cluster.kill(&follower);
    let c = cluster.admin()?;
    for i in 0..puts {
        let put = PutRequest {
            key: Bytes::from(format!("snap/{i:04}")),
            value: Bytes::from(bench::store::incompressible(i as u64, value_bytes)),
            lease: 0,
            prev_kv: false,
        };
        c.put(put).await?;
    }
    cluster.restart(&follower)?;
    let final_revision = c
        .range(RangeRequest {
            range: KeyRange::prefix("snap/"),
            count_only: true,
            ..Default::default()
        })
        .await?
        .header
        .revision;
    wait_until(
        &format!("{follower} caught up"),
        Duration::from_secs(90),
        || async {
            revision_of(&cluster, &follower)
                .await
                .is_some_and(|r| r >= final_revision)
        },
    )
    .await?;
    let log = std::fs::read_to_string(cluster.log_path(&follower))?;
    let from_snapshot = puts > catch_up;
    assert_eq!(
        log.contains("installed a snapshot"),
        from_snapshot,
        "{follower} should catch up from a snapshot: {from_snapshot}\n{log}"
    );
    let mut hashes = Vec::new();
    for endpoint in cluster.client_endpoints() {
        let h = c.hash_of(endpoint).await?;
        hashes.push((h.header.revision, h.hash));
    }
    assert!(
        hashes.windows(2).all(|w| w[0] == w[1]),
        "members diverged: {hashes:?}"
    );
    let follower_client = member_client(&cluster, &follower)?;
    let count = follower_client
        .range(RangeRequest {
            range: KeyRange::prefix("snap/"),
            count_only: true,
            serializable: true,
            ..Default::default()
        })
        .await?;
    assert_eq!(count.count as usize, puts);
    let last = format!("snap/{:04}", puts - 1);
    let got = follower_client
        .range(RangeRequest {
            range: KeyRange::single(last.clone()),
            serializable: true,
            ..Default::default()
        })
        .await?;
    assert_eq!(
        got.kvs.first().map(|kv| kv.value.clone()),
        Some(Bytes::from(bench::store::incompressible(
            (puts - 1) as u64,
            value_bytes
        ))),
        "{follower} has {last} as written"
    );
    cluster.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_are_refused_and_garbage_closes_only_its_stream() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &[]).await?;
    let endpoint = cluster.client_endpoints()[0];

    // A certificate from another CA is refused.
    let other = dir.path().join("other-ca");
    std::fs::create_dir_all(&other)?;
    transport::pki::create_ca(&other, "stranger")?;
    let spec = transport::pki::CertSpec {
        name: "admin".into(),
        organizations: vec!["system:masters".into()],
        sans: vec![],
    };
    transport::pki::issue(&other, &spec)?;
    let mut config = ClientConfig::new(vec![endpoint]);
    config.call_timeout = Duration::from_secs(3);
    let stranger = Client::new(config.clone(), &other, "admin")?;
    assert!(
        stranger.get("a").await.is_err(),
        "a client from another CA was served"
    );
    // So is the Kubernetes API's admin (system:masters) from the cluster's own CA: only the
    // API servers and the store's tools use the store.
    let kube_admin = Client::new(config, &cluster.certs_dir(), "admin")?;
    assert!(
        kube_admin.get("a").await.is_err(),
        "the Kubernetes admin reached the store"
    );

    // Garbage on one stream: that stream fails, the connection and the member go on.
    let identity =
        transport::tls::TlsIdentity::load(&cluster.certs_dir(), store::config::STORE_ADMIN)?;
    let rpc = transport::rpc::RpcClient::new(&identity)?;
    let connection = rpc.connect(endpoint).await?;
    let (mut send, mut recv) = connection.raw().open_bi().await?;
    send.write_all(&[0, 0, 0, 8, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8])
        .await?;
    let _ = send.finish();
    let answer = tokio::time::timeout(Duration::from_secs(5), recv.read_to_end(1 << 20)).await?;
    assert!(
        answer.map(|b| b.is_empty()).unwrap_or(true),
        "garbage got an answer"
    );
    let status: ClientResponse = connection.unary(&ClientRequest::Status).await?;
    assert!(
        matches!(status, ClientResponse::Status(_)),
        "got {status:?}"
    );

    // A huge length prefix is answered as too large, without the body being read.
    let (mut send, mut recv) = connection.raw().open_bi().await?;
    send.write_all(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3]).await?;
    let _ = send.finish();
    let answer = tokio::time::timeout(Duration::from_secs(5), recv.read_to_end(1 << 20)).await??;
    let answer: ClientResponse = transport::frame::decode(&answer)?;
    assert!(
        matches!(answer, ClientResponse::Error(StoreError::TooLarge { .. })),
        "oversized frame got {answer:?}"
    );

    let client = cluster.admin()?;
    client
        .put(PutRequest {
            key: "still".into(),
            value: "serving".into(),
            lease: 0,
            prev_kv: false,
        })
        .await?;
    assert_eq!(
        client.get("still").await?.map(|kv| kv.value),
        Some(Bytes::from("serving"))
    );
    for name in cluster.names() {
        assert!(cluster.exit_status(&name).is_none(), "{name} exited");
    }
    cluster.stop().await;
    Ok(())
}

/// A client connected to the leader when it is SIGKILLed (no close is ever sent) notices the
/// silence and writes through another member within seconds — not after its 6 s attempt
/// timeout or the 30 s QUIC idle timeout — and its watch resumes without losing an event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_on_a_killed_leader_moves_on_within_seconds() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &[]).await?;
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await?;
    let index = cluster
        .names()
        .iter()
        .position(|n| *n == leader)
        .context("leader among the names")?;
    let client = cluster.admin()?;
    client.prefer(index);
    let put = |i: usize| PutRequest {
        key: Bytes::from(format!("f/{i:03}")),
        value: Bytes::from(format!("v{i}")),
        lease: 0,
        prev_kv: false,
    };
    client.put(put(0)).await?;
    let mut watch = client
        .watch(WatchRequest {
            range: KeyRange::prefix("f/"),
            start_revision: 1,
            prev_kv: false,
            progress_notify_secs: 0,
        })
        .await?;

    cluster.kill_leader().await?;
    let killed = Instant::now();
    // The first write after the kill may be ambiguous (it may have reached the dead leader);
    // retry until one is acknowledged, as a real client would.
    let mut i = 1;
    loop {
        match client.put(put(i)).await {
            Ok(_) => break,
            Err(e) => {
                eprintln!("write {i} after the kill: {e}");
                i += 1;
            }
        }
        anyhow::ensure!(
            killed.elapsed() < Duration::from_secs(30),
            "no write within 30 s"
        );
    }
    let recovered = killed.elapsed();
    eprintln!("first acknowledged write {recovered:?} after the leader kill");
    assert!(
        recovered < Duration::from_secs(5),
        "writes took {recovered:?} to recover after the leader kill"
    );
    for j in i + 1..i + 5 {
        client.put(put(j)).await?;
    }

    // The watch moved to a live member and delivers every acknowledged key once, in order.
    let mut revisions = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    tokio::time::timeout(Duration::from_secs(20), async {
        while keys.len() < 5 || !keys.contains(&format!("f/{:03}", i + 4)) {
            match watch.next().await {
                Some(Ok(WatchResponse::Events { events, .. })) => {
                    for e in events {
                        revisions.push(e.kv.mod_revision);
                        keys.insert(String::from_utf8_lossy(&e.kv.key).into_owned());
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => anyhow::bail!("watch failed: {e}"),
                None => anyhow::bail!("watch ended"),
            }
        }
        Ok(())
    })
    .await
    .context("the watch resumed on a live member")??;
    assert!(
        revisions.windows(2).all(|w| w[0] < w[1]),
        "watch revisions not strictly increasing: {revisions:?}"
    );
    cluster.stop().await;
    Ok(())
}

/// A restarted member rebuilds its state off the raft thread and takes part in raft meanwhile.
/// Here the rebuild is held for 20 s (fault injection); the leader is killed while it lasts: the
/// survivors must elect one of them and serve writes within seconds. A restarting member that
/// stayed absent until its state was back would leave the survivor without a quorum for the
/// whole rebuild (stalls of 3–13 s were measured so). With logs as long, the member with a state wins (the restoring
/// one has the lower raft priority). The restoring member answers its clients `Unavailable`
/// meanwhile, and converges afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restoring_member_votes_before_it_serves() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let extra = ["--restore-pause-ms".to_string(), "20000".to_string()];
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &extra).await?;
    let leader = cluster.wait_for_leader(Duration::from_secs(20)).await?;
    let restoring = cluster
        .names()
        .into_iter()
        .find(|n| *n != leader)
        .context("a follower")?;
    let client = cluster.admin()?;
    let put = |i: usize| PutRequest {
        key: Bytes::from(format!("r/{i:03}")),
        value: Bytes::from(format!("v{i}")),
        lease: 0,
        prev_kv: false,
    };
    for i in 0..20 {
        client.put(put(i)).await?;
    }
    cluster.kill(&restoring);
    cluster.restart(&restoring)?;
    let restarted = Instant::now();
    // It takes part in raft at once: it hears the leader, though its state is not back.
    let restoring_endpoint = cluster.endpoint(&restoring).context("endpoint")?;
    wait_until(
        &format!("{restoring} follows {leader}"),
        Duration::from_secs(10),
        || async {
            client
                .status_of(restoring_endpoint)
                .await
                .is_ok_and(|s| s.leader_name == leader)
        },
    )
    .await?;
    match client.hash_of(restoring_endpoint).await {
        Err(ClientError::Store(StoreError::Unavailable { reason })) => {
            assert!(reason.contains("restoring"), "{reason}")
        }
        other => bail!("a restoring member answered {other:?}"),
    }

    let survivor = cluster
        .names()
        .into_iter()
        .find(|n| *n != restoring && *n != leader)
        .context("the survivor")?;
    let survivor_endpoint = cluster.endpoint(&survivor).context("endpoint")?;
    wait_until("the logs are as long", Duration::from_secs(10), || async {
        match (
            client.status_of(restoring_endpoint).await,
            client.status_of(survivor_endpoint).await,
        ) {
            (Ok(a), Ok(b)) => a.raft_index == b.raft_index,
            _ => false,
        }
    })
    .await?;
    let killed = cluster.kill_leader().await?;
    assert_eq!(killed, leader);
    let after_kill = Instant::now();
    let mut i = 20;
    loop {
        match client.put(put(i)).await {
            Ok(_) => break,
            Err(e) => eprintln!("write {i} after the kill: {e}"),
        }
        i += 1;
        anyhow::ensure!(
            after_kill.elapsed() < Duration::from_secs(15),
            "no write within 15 s of the leader kill"
        );
    }
    let recovered = after_kill.elapsed();
    eprintln!("writes recovered {recovered:?} after the kill");
    anyhow::ensure!(
        restarted.elapsed() < Duration::from_secs(18),
        "the test was too slow to kill the leader within the restore pause"
    );
    assert!(
        recovered < Duration::from_secs(5),
        "writes took {recovered:?} with a restoring member"
    );
    let status = client.status_of(restoring_endpoint).await?;
    assert_eq!(
        status.leader_name, survivor,
        "the member with a state leads: {status:?}"
    );
    match client.hash_of(restoring_endpoint).await {
        Err(ClientError::Store(StoreError::Unavailable { .. })) => {}
        other => bail!("still restoring, it answered {other:?}"),
    }

    // Once its state is back it serves, and agrees with the survivor.
    wait_until(
        &format!("{restoring} restored and converged"),
        Duration::from_secs(60),
        || async {
            let (Ok(a), Ok(b)) = (
                client.hash_of(restoring_endpoint).await,
                client.hash_of(survivor_endpoint).await,
            ) else {
                return false;
            };
            eprintln!(
                "hashes: {restoring} {} at {}, survivor {} at {}",
                a.hash, a.header.revision, b.hash, b.header.revision
            );
            (a.header.revision, a.hash) == (b.header.revision, b.hash)
        },
    )
    .await?;
    let log = std::fs::read_to_string(cluster.log_path(&restoring))?;
    assert!(
        log.contains("state machine restored: serving clients"),
        "{log}"
    );
    cluster.stop().await;
    Ok(())
}

/// The chaos run's convergence check while writes go on (as node leases do under `kemu run`): the
/// members never stand still at one revision, yet they agree on the hash at a revision all have
/// applied; a revision a member has not applied yet is refused, not hashed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_converge_while_writes_go_on() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &[]).await?;
    cluster.wait_for_leader(Duration::from_secs(10)).await?;
    let admin = cluster.admin()?;
    let writer = admin.clone();
    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let writes = tokio::spawn(async move {
        let mut n = 0u64;
        while !*stopped.borrow() {
            let put = PutRequest {
                key: Bytes::from(format!("busy/{}", n % 50)),
                value: Bytes::from(n.to_string()),
                ..Default::default()
            };
            writer.put(put).await?;
            n += 1;
            tokio::select! {
                _ = stopped.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
        anyhow::Ok(n)
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let endpoints: Vec<transport::Endpoint> = cluster
        .client_endpoints()
        .into_iter()
        .map(transport::Endpoint::Addr)
        .collect();
    let report =
        chaos::convergence::wait_for_convergence(&admin, &endpoints, Duration::from_secs(30)).await;
    let _ = stop.send(true);
    let written = writes.await??;
    assert!(report.passed, "{report:?}");
    assert_eq!(report.members.len(), 3);
    assert!(written > 50, "the writer wrote {written} times");
    let ahead = cluster_revision(&admin).await? + 1_000;
    match admin.hash_at(endpoints[0].clone(), ahead).await {
        Err(ClientError::Store(StoreError::FutureRevision { .. })) => {}
        other => bail!("hash at a revision not applied: {other:?}"),
    }
    cluster.stop().await;
    Ok(())
}

async fn cluster_revision(client: &Client) -> anyhow::Result<i64> {
    let r = client
        .range(RangeRequest {
            range: KeyRange::single("busy/0"),
            ..Default::default()
        })
        .await?;
    Ok(r.header.revision)
}

/// A write costs each member one fsync of its log, not two: a `Ready` whose hard state moved only
/// its commit index is written and left for the next fsync (raft learns the commit index again
/// after a restart). Before, the leader synced once for the new entry and once more when the
/// followers' acknowledgements committed it, and the followers once more when the commit index
/// reached them; that was most of the members' CPU per write on this machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_costs_each_member_one_log_fsync() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &[]).await?;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await?;
    let client = member_client(&cluster, &leader)?;
    let syncs = || async {
        let mut out = Vec::new();
        for name in cluster.names() {
            let endpoint = cluster.endpoint(&name).context("no such member")?;
            let status = member_client(&cluster, &name)?.status_of(endpoint).await?;
            out.push((name, status.wal_syncs));
        }
        anyhow::Ok(out)
    };
    // One write first, so every member has synced whatever its start-up left unsynced.
    client
        .put(PutRequest {
            key: Bytes::from("fsync/warm-up"),
            value: Bytes::from("x"),
            ..Default::default()
        })
        .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = syncs().await?;
    const WRITES: u64 = 200;
    let started = Instant::now();
    for i in 0..WRITES {
        client
            .put(PutRequest {
                key: Bytes::from(format!("fsync/{i}")),
                value: Bytes::from(i.to_string()),
                ..Default::default()
            })
            .await?;
    }
    let elapsed = started.elapsed();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after = syncs().await?;
    // One fsync per write, plus those of the elections' and heartbeats' business in between
    // (none should sync, but leave room for a term change): at most a quarter more.
    for ((name, b), (_, a)) in before.iter().zip(&after) {
        let per_write = (a - b) as f64 / WRITES as f64;
        assert!(
            (a - b) <= WRITES + WRITES / 4,
            "{name} synced {} times for {WRITES} sequential writes ({per_write:.2} a write, \
             {elapsed:?} in all)",
            a - b
        );
        assert!(
            (a - b) >= WRITES / 2,
            "{name} synced only {} times for {WRITES} sequential writes: is the counter counting?",
            a - b
        );
    }
    cluster.stop().await;
    Ok(())
}

/// With a linger, writes that arrive apart while the client has no call out share one call and
/// one raft entry; without one, each goes alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_linger_gathers_writes_that_arrive_apart() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &[]).await?;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await?;
    let endpoint = cluster.endpoint(&leader).context("no such member")?;
    // Three writes 30 ms apart: the raft entries they took, with a 300 ms linger and without.
    let mut entries = Vec::new();
    for (round, linger) in [Duration::from_millis(300), Duration::ZERO]
        .into_iter()
        .enumerate()
    {
        let client = Client::new(
            ClientConfig {
                batch_linger: linger,
                ..ClientConfig::new(vec![endpoint])
            },
            &cluster.certs_dir(),
            store::config::STORE_ADMIN,
        )?;
        let start = client.status_of(endpoint).await?;
        let mut writes = Vec::new();
        for i in 0..3 {
            let client = client.clone();
            let txn = TxnRequest {
                compare: vec![],
                success: vec![RequestOp::Put(PutRequest {
                    key: Bytes::from(format!("linger/{round}/{i}")),
                    value: Bytes::from("v"),
                    ..Default::default()
                })],
                failure: vec![],
            };
            writes.push(tokio::spawn(async move { client.txn_batched(txn).await }));
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        let mut revisions = Vec::new();
        for write in writes {
            let response = write.await??;
            assert!(response.succeeded);
            revisions.push(response.header.revision);
        }
        revisions.sort();
        revisions.dedup();
        assert_eq!(revisions.len(), 3, "each write has a revision of its own");
        let end = client.status_of(endpoint).await?;
        entries.push(end.raft_index - start.raft_index);
    }
    assert_eq!(
        entries,
        [1, 3],
        "raft entries taken with a linger, then without"
    );
    cluster.stop().await;
    Ok(())
}

/// Transactions a busy client sends together (`Client::txn_batched`, what the API server's
/// writes use) travel as one call and one raft entry, yet each is judged alone and applied at a
/// revision of its own, and a watcher sees them one revision per response, as if they had come
/// one by one. Sent through a follower, so the batch is also forwarded to the leader whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_transactions_share_an_entry_but_keep_their_own_revisions() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = LocalStore::start_with(kemu_exe(), dir.path(), 3, &[]).await?;
    let leader = cluster.wait_for_leader(Duration::from_secs(10)).await?;
    let follower = cluster
        .names()
        .into_iter()
        .find(|n| *n != leader)
        .context("no follower")?;
    let client = member_client(&cluster, &follower)?;
    let endpoint = cluster.endpoint(&follower).context("no such member")?;
    // Ten keys exist already, so the creates of those ten must fail, alone.
    for i in 0..10 {
        client
            .put(PutRequest {
                key: Bytes::from(format!("batch/{i:03}")),
                value: Bytes::from("before"),
                ..Default::default()
            })
            .await?;
    }
    let start = client.status_of(endpoint).await?;
    let mut watch = client
        .watch(WatchRequest {
            range: KeyRange::prefix("batch/"),
            start_revision: start.revision + 1,
            prev_kv: false,
            progress_notify_secs: 0,
        })
        .await?;

    const TXNS: usize = 300;
    let creates = (0..TXNS).map(|i| {
        let client = client.clone();
        tokio::spawn(async move {
            let key = Bytes::from(format!("batch/{i:03}"));
            let response = client
                .txn_batched(TxnRequest {
                    compare: vec![Compare {
                        range: KeyRange::single(key.clone()),
                        result: CompareResult::Equal,
                        target: CompareTarget::ModRevision(0),
                    }],
                    success: vec![RequestOp::Put(PutRequest {
                        key: key.clone(),
                        value: Bytes::from(format!("value {i}")),
                        ..Default::default()
                    })],
                    failure: vec![],
                })
                .await?;
            anyhow::Ok((key, response.succeeded, response.header.revision))
        })
    });
    let mut created = HashMap::new();
    for (i, create) in creates.collect::<Vec<_>>().into_iter().enumerate() {
        let (key, succeeded, revision) = create.await??;
        assert_eq!(succeeded, i >= 10, "create of {key:?}");
        if succeeded {
            assert!(
                created.insert(revision, key.clone()).is_none(),
                "two creates answered with revision {revision}"
            );
        }
    }
    assert_eq!(created.len(), TXNS - 10);

    // Each create's revision is its key's; the watch sees each alone, in revision order.
    let mut seen = Vec::new();
    while seen.len() < created.len() {
        let message = tokio::time::timeout(Duration::from_secs(10), watch.next())
            .await
            .context("the watch went quiet")?
            .context("the watch ended")?;
        if let WatchResponse::Events { header, events } = message? {
            assert_eq!(events.len(), 1, "one revision per watch response");
            for e in events {
                assert_eq!(e.kv.mod_revision, header.revision);
                seen.push((e.kv.mod_revision, e.kv.key));
            }
        }
    }
    let mut expected: Vec<(i64, Bytes)> = created.into_iter().collect();
    expected.sort();
    assert_eq!(seen, expected);
    assert_eq!(
        expected.last().map(|(r, _)| *r),
        Some(start.revision + (TXNS - 10) as i64),
        "the creates took the revisions after the start, one each"
    );

    // And they did share entries: far fewer raft entries than transactions.
    let end = client.status_of(endpoint).await?;
    let entries = end.raft_index - start.raft_index;
    assert!(
        entries <= (TXNS / 4) as u64,
        "{TXNS} concurrent transactions took {entries} raft entries"
    );
    cluster.stop().await;
    Ok(())
}
