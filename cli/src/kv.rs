//! `kemu kv`: an etcdctl-like client for the store.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use bytes::Bytes;
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{json, Value};
use store::client::{Client, ClientConfig};
use store::types::*;

#[derive(Args, Debug)]
pub struct KvArgs {
    #[command(flatten)]
    pub conn: Connect,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Text, global = true)]
    output: Output,
    #[command(subcommand)]
    command: KvCommand,
}

/// How to reach the store.
#[derive(Args, Debug, Clone)]
pub struct Connect {
    /// Client addresses of the members, comma-separated.
    // Not `required`: clap forbids required global arguments (a debug-build assertion panics on
    // every invocation), so `client()` checks it instead.
    #[arg(long, value_delimiter = ',', global = true)]
    pub endpoints: Vec<SocketAddr>,
    /// Directory with `ca.crt` and the client certificate.
    #[arg(long, global = true)]
    pub certs: Option<PathBuf>,
    /// Which certificate in `--certs` to present.
    #[arg(long, default_value = store::config::STORE_ADMIN, global = true)]
    pub user: String,
}

impl Connect {
    pub fn client(&self) -> anyhow::Result<Client> {
        if self.endpoints.is_empty() {
            bail!("--endpoints is required: the members' client addresses, comma-separated");
        }
        let certs = self.certs.as_ref().context("--certs is required")?;
        Ok(Client::new(
            ClientConfig::new(self.endpoints.clone()),
            certs,
            &self.user,
        )?)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Output {
    Text,
    Json,
}

#[derive(Subcommand, Debug)]
enum KvCommand {
    /// Write a key.
    Put {
        key: String,
        value: String,
        #[arg(long, default_value_t = 0)]
        lease: i64,
        /// Print the previous key-value.
        #[arg(long)]
        prev_kv: bool,
    },
    /// Read a key or a range.
    Get {
        key: String,
        /// Every key with this prefix.
        #[arg(long)]
        prefix: bool,
        /// Read at this past revision.
        #[arg(long, default_value_t = 0)]
        rev: i64,
        /// Serve from the member's local state without a ReadIndex round (may be stale).
        #[arg(long)]
        serializable: bool,
        /// Print only the number of keys.
        #[arg(long)]
        count_only: bool,
        #[arg(long)]
        keys_only: bool,
        #[arg(long, default_value_t = 0)]
        limit: i64,
    },
    /// Delete a key or a range.
    Del {
        key: String,
        #[arg(long)]
        prefix: bool,
        #[arg(long)]
        prev_kv: bool,
    },
    /// A transaction: `--compare 'mod(k) = 5'` (version, create, mod, value, lease; = != > <),
    /// `--then`/`--else` operations `put K V`, `get K`, `del K`.
    Txn {
        #[arg(long = "compare")]
        compares: Vec<String>,
        #[arg(long = "then")]
        success: Vec<String>,
        #[arg(long = "else")]
        failure: Vec<String>,
    },
    /// Print changes to a key or prefix as they happen.
    Watch {
        key: String,
        #[arg(long)]
        prefix: bool,
        /// Start at this revision (0 = from now).
        #[arg(long, default_value_t = 0)]
        rev: i64,
        #[arg(long)]
        prev_kv: bool,
        /// Exit after this many events (0 = never).
        #[arg(long, default_value_t = 0)]
        events: u64,
    },
    /// Discard history before a revision.
    Compact { revision: i64 },
    /// Leases.
    #[command(subcommand)]
    Lease(LeaseCommand),
    /// Each member's name, leader, term, raft index, applied index, revision and data size.
    Status,
    /// Each member's revision and key-space hash.
    Hash,
}

#[derive(Subcommand, Debug)]
enum LeaseCommand {
    Grant { ttl: i64 },
    Revoke { id: i64 },
    Keepalive { id: i64 },
}

pub async fn run(args: KvArgs) -> anyhow::Result<ExitCode> {
    let client = args.conn.client()?;
    let json_out = args.output == Output::Json;
    match args.command {
        KvCommand::Put {
            key,
            value,
            lease,
            prev_kv,
        } => {
            let response = client
                .put(PutRequest {
                    key: key.into(),
                    value: value.into(),
                    lease,
                    prev_kv,
                })
                .await?;
            if json_out {
                print_json(
                    json!({"header": header_json(&response.header), "prev_kv": response.prev_kv.as_ref().map(kv_json)}),
                );
            } else {
                println!("OK");
                if let Some(prev) = &response.prev_kv {
                    print_kv_text(prev, false);
                }
            }
        }
        KvCommand::Get {
            key,
            prefix,
            rev,
            serializable,
            count_only,
            keys_only,
            limit,
        } => {
            let request = RangeRequest {
                range: range_of(key, prefix),
                limit,
                revision: rev,
                count_only,
                keys_only,
                serializable,
            };
            let response = client.range(request).await?;
            if json_out {
                print_json(json!({
                    "header": header_json(&response.header),
                    "kvs": response.kvs.iter().map(kv_json).collect::<Vec<_>>(),
                    "more": response.more,
                    "count": response.count,
                }));
            } else if count_only {
                println!("{}", response.count);
            } else {
                for kv in &response.kvs {
                    print_kv_text(kv, keys_only);
                }
            }
        }
        KvCommand::Del {
            key,
            prefix,
            prev_kv,
        } => {
            let response = client
                .delete_range(DeleteRangeRequest {
                    range: range_of(key, prefix),
                    prev_kv,
                })
                .await?;
            if json_out {
                print_json(json!({
                    "header": header_json(&response.header),
                    "deleted": response.deleted,
                    "prev_kvs": response.prev_kvs.iter().map(kv_json).collect::<Vec<_>>(),
                }));
            } else {
                println!("{}", response.deleted);
                for kv in &response.prev_kvs {
                    print_kv_text(kv, false);
                }
            }
        }
        KvCommand::Txn {
            compares,
            success,
            failure,
        } => {
            let request = TxnRequest {
                compare: compares
                    .iter()
                    .map(|c| parse_compare(c))
                    .collect::<anyhow::Result<_>>()?,
                success: success
                    .iter()
                    .map(|o| parse_op(o))
                    .collect::<anyhow::Result<_>>()?,
                failure: failure
                    .iter()
                    .map(|o| parse_op(o))
                    .collect::<anyhow::Result<_>>()?,
            };
            let response = client.txn(request).await?;
            if json_out {
                print_json(json!({
                    "header": header_json(&response.header),
                    "succeeded": response.succeeded,
                    "responses": response.responses.iter().map(op_json).collect::<Vec<_>>(),
                }));
            } else {
                println!(
                    "{}",
                    if response.succeeded {
                        "SUCCESS"
                    } else {
                        "FAILURE"
                    }
                );
                for op in &response.responses {
                    if let ResponseOp::Range(r) = op {
                        for kv in &r.kvs {
                            print_kv_text(kv, false);
                        }
                    }
                }
            }
        }
        KvCommand::Watch {
            key,
            prefix,
            rev,
            prev_kv,
            events,
        } => {
            let request = WatchRequest {
                range: range_of(key, prefix),
                start_revision: rev,
                prev_kv,
                progress_notify_secs: 0,
            };
            return watch(&client, request, events, json_out).await;
        }
        KvCommand::Compact { revision } => {
            let response = client.compact(revision).await?;
            if json_out {
                print_json(json!({"header": header_json(&response.header)}));
            } else {
                println!("compacted revision {revision}");
            }
        }
        KvCommand::Lease(command) => lease(&client, command, json_out).await?,
        KvCommand::Status => return status(&client, json_out).await,
        KvCommand::Hash => {
            let mut rows = Vec::new();
            for endpoint in client.endpoints().to_vec() {
                match client.hash_of(&endpoint).await {
                    Ok(h) => rows.push(json!({"endpoint": endpoint.to_string(), "revision": h.header.revision, "hash": h.hash, "compact_revision": h.compact_revision})),
                    Err(e) => rows.push(json!({"endpoint": endpoint.to_string(), "error": e.to_string()})),
                }
            }
            if json_out {
                print_json(Value::Array(rows));
            } else {
                for row in rows {
                    println!("{row}");
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn watch(
    client: &Client,
    request: WatchRequest,
    max_events: u64,
    json_out: bool,
) -> anyhow::Result<ExitCode> {
    let mut stream = client.watch(request).await?;
    let mut seen = 0u64;
    loop {
        let message = tokio::select! {
            _ = cluster::shutdown::signal() => return Ok(ExitCode::SUCCESS),
            m = stream.next() => m,
        };
        let Some(message) = message else {
            bail!("watch ended unexpectedly")
        };
        match message? {
            WatchResponse::Events { events, .. } => {
                for event in &events {
                    if json_out {
                        print_json(json!({
                            "type": match event.kind { EventKind::Put => "PUT", EventKind::Delete => "DELETE" },
                            "kv": kv_json(&event.kv),
                            "prev_kv": event.prev_kv.as_ref().map(kv_json),
                        }));
                    } else {
                        println!(
                            "{}",
                            match event.kind {
                                EventKind::Put => "PUT",
                                EventKind::Delete => "DELETE",
                            }
                        );
                        print_kv_text(&event.kv, event.kind == EventKind::Delete);
                    }
                    seen += 1;
                    if max_events > 0 && seen >= max_events {
                        return Ok(ExitCode::SUCCESS);
                    }
                }
            }
            WatchResponse::Canceled { reason, .. } => bail!("watch canceled: {reason}"),
            WatchResponse::Created { .. } | WatchResponse::Progress { .. } => {}
        }
    }
}

async fn lease(client: &Client, command: LeaseCommand, json_out: bool) -> anyhow::Result<()> {
    match command {
        LeaseCommand::Grant { ttl } => {
            let r = client.lease_grant(ttl).await?;
            if json_out {
                print_json(json!({"id": r.id, "ttl": r.ttl}));
            } else {
                println!("lease {} granted with TTL({}s)", r.id, r.ttl);
            }
        }
        LeaseCommand::Revoke { id } => {
            client.lease_revoke(id).await?;
            if json_out {
                print_json(json!({"id": id, "revoked": true}));
            } else {
                println!("lease {id} revoked");
            }
        }
        LeaseCommand::Keepalive { id } => {
            let r = client.lease_keep_alive(id).await?;
            if json_out {
                print_json(json!({"id": r.id, "ttl": r.ttl}));
            } else {
                println!("lease {} keepalived with TTL({})", r.id, r.ttl);
            }
        }
    }
    Ok(())
}

async fn status(client: &Client, json_out: bool) -> anyhow::Result<ExitCode> {
    let mut rows = Vec::new();
    let mut failed = false;
    for endpoint in client.endpoints().to_vec() {
        match client.status_of(&endpoint).await {
            Ok(s) => rows.push(json!({
                "endpoint": endpoint.to_string(),
                "name": s.name,
                "member_id": s.member_id,
                "is_leader": s.leader_id == s.member_id,
                "leader": s.leader_name,
                "term": s.term,
                "raft_index": s.raft_index,
                "commit_index": s.commit_index,
                "applied_index": s.applied_index,
                "revision": s.revision,
                "compact_revision": s.compact_revision,
                "keys": s.keys,
                "data_size": s.data_size,
                "disk_size": s.disk_size,
                "wal_syncs": s.wal_syncs,
            })),
            Err(e) => {
                failed = true;
                rows.push(json!({"endpoint": endpoint.to_string(), "error": e.to_string()}));
            }
        }
    }
    if json_out {
        print_json(Value::Array(rows));
    } else {
        println!(
            "{:<22} {:<8} {:<8} {:<6} {:>11} {:>11} {:>10} {:>10} {:>10}",
            "ENDPOINT",
            "NAME",
            "LEADER",
            "TERM",
            "RAFT INDEX",
            "APPLIED",
            "REVISION",
            "KEYS",
            "DATA SIZE"
        );
        for row in &rows {
            if let Some(err) = row.get("error") {
                println!(
                    "{:<22} error: {}",
                    row["endpoint"].as_str().unwrap_or(""),
                    err.as_str().unwrap_or("")
                );
                continue;
            }
            println!(
                "{:<22} {:<8} {:<8} {:<6} {:>11} {:>11} {:>10} {:>10} {:>10}",
                row["endpoint"].as_str().unwrap_or(""),
                row["name"].as_str().unwrap_or(""),
                row["leader"].as_str().unwrap_or(""),
                // A JSON value's Display ignores width and alignment; its string does not.
                row["term"].to_string(),
                row["raft_index"].to_string(),
                row["applied_index"].to_string(),
                row["revision"].to_string(),
                row["keys"].to_string(),
                human_bytes(row["data_size"].as_u64().unwrap_or(0)),
            );
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "kB", "MB", "GB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1000.0 && unit + 1 < UNITS.len() {
        value /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn range_of(key: String, prefix: bool) -> KeyRange {
    if prefix {
        KeyRange::prefix(Bytes::from(key))
    } else {
        KeyRange::single(Bytes::from(key))
    }
}

/// `version(k) = 3`, `create(k) > 0`, `mod(k) != 5`, `value(k) = "x"`, `lease(k) = 7`.
fn parse_compare(text: &str) -> anyhow::Result<Compare> {
    let text = text.trim();
    let open = text
        .find('(')
        .with_context(|| format!("compare {text:?}: expected TARGET(KEY) OP VALUE"))?;
    let close = text
        .find(')')
        .with_context(|| format!("compare {text:?}: missing ')'"))?;
    if close < open {
        bail!("compare {text:?}: expected TARGET(KEY) OP VALUE");
    }
    let target = text[..open].trim();
    let key = text[open + 1..close].trim();
    let rest = text[close + 1..].trim();
    let (op, value) = ["!=", "=", ">", "<"]
        .iter()
        .find_map(|op| rest.strip_prefix(op).map(|v| (*op, v.trim())))
        .with_context(|| format!("compare {text:?}: operator must be one of = != > <"))?;
    let result = match op {
        "=" => CompareResult::Equal,
        "!=" => CompareResult::NotEqual,
        ">" => CompareResult::Greater,
        _ => CompareResult::Less,
    };
    let number = || {
        value
            .parse::<i64>()
            .with_context(|| format!("compare {text:?}: {value:?} is not a number"))
    };
    let target = match target {
        "version" | "ver" => CompareTarget::Version(number()?),
        "create" | "create_revision" => CompareTarget::CreateRevision(number()?),
        "mod" | "mod_revision" => CompareTarget::ModRevision(number()?),
        "lease" => CompareTarget::Lease(number()?),
        "value" | "val" => CompareTarget::Value(Bytes::from(value.trim_matches('"').to_string())),
        other => {
            bail!("compare {text:?}: unknown target {other:?} (version, create, mod, value, lease)")
        }
    };
    Ok(Compare {
        range: KeyRange::single(Bytes::from(key.to_string())),
        result,
        target,
    })
}

/// `put K V`, `get K`, `del K`.
fn parse_op(text: &str) -> anyhow::Result<RequestOp> {
    let mut parts = text.split_whitespace();
    let verb = parts.next().unwrap_or_default();
    let key = parts
        .next()
        .with_context(|| format!("operation {text:?}: missing key"))?
        .to_string();
    Ok(match verb {
        "put" => {
            let value: Vec<&str> = parts.collect();
            if value.is_empty() {
                bail!("operation {text:?}: put needs a value");
            }
            RequestOp::Put(PutRequest {
                key: key.into(),
                value: value.join(" ").into(),
                ..Default::default()
            })
        }
        "get" => RequestOp::Range(RangeRequest {
            range: KeyRange::single(Bytes::from(key)),
            ..Default::default()
        }),
        "del" => RequestOp::DeleteRange(DeleteRangeRequest {
            range: KeyRange::single(Bytes::from(key)),
            prev_kv: false,
        }),
        other => bail!("operation {text:?}: unknown verb {other:?} (put, get, del)"),
    })
}

fn print_json(value: Value) {
    println!("{value}");
}

fn print_kv_text(kv: &KeyValue, key_only: bool) {
    println!("{}", String::from_utf8_lossy(&kv.key));
    if !key_only {
        println!("{}", String::from_utf8_lossy(&kv.value));
    }
}

fn header_json(h: &ResponseHeader) -> Value {
    json!({"revision": h.revision, "member_id": h.member_id, "raft_term": h.raft_term})
}

pub fn kv_json(kv: &KeyValue) -> Value {
    json!({
        "key": String::from_utf8_lossy(&kv.key),
        "value": String::from_utf8_lossy(&kv.value),
        "create_revision": kv.create_revision,
        "mod_revision": kv.mod_revision,
        "version": kv.version,
        "lease": kv.lease,
    })
}

fn op_json(op: &ResponseOp) -> Value {
    match op {
        ResponseOp::Range(r) => {
            json!({"range": {"kvs": r.kvs.iter().map(kv_json).collect::<Vec<_>>(), "count": r.count}})
        }
        ResponseOp::Put(r) => json!({"put": {"prev_kv": r.prev_kv.as_ref().map(kv_json)}}),
        ResponseOp::DeleteRange(r) => json!({"delete_range": {"deleted": r.deleted}}),
        ResponseOp::Txn(r) => json!({"txn": {"succeeded": r.succeeded}}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_compares_and_ops() {
        let c = parse_compare("mod(/a) = 5").expect("parses");
        assert_eq!(c.result, CompareResult::Equal);
        assert_eq!(c.target, CompareTarget::ModRevision(5));
        let c = parse_compare("value(k) != \"x y\"").expect("parses");
        assert_eq!(c.target, CompareTarget::Value(Bytes::from("x y")));
        assert!(parse_compare("mod(k) ~ 5").is_err());
        assert!(parse_compare("nope(k) = 1").is_err());
        assert!(
            matches!(parse_op("put k hello world").expect("put"), RequestOp::Put(p) if &p.value[..] == b"hello world")
        );
        assert!(parse_op("put k").is_err());
        assert!(parse_op("frob k").is_err());
    }
}
