//! Kubernetes' storage operations on the kemu store, as the real API server does them on etcd:
//! create = `Txn(ModRevision(key) == 0 → Put)`, update = `Txn(ModRevision(key) == rv → Put, else
//! Get)`, delete likewise. An object's resourceVersion is its key's mod revision.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use serde_json::Value;
use store::client::Client;
use store::types::{
    Compare, CompareResult, CompareTarget, DeleteRangeRequest, KeyRange, LeaseId, PutRequest,
    RangeRequest, RangeResponse, RequestOp, ResponseOp, TxnRequest, TxnResponse,
};

use crate::errors::ApiError;
use crate::meta;
use crate::metrics::StoreMetrics;

/// The outcome of a conditional write.
pub enum Written {
    /// Done, at this revision.
    Ok(i64),
    /// The condition failed; here is what the key holds now (None: it does not exist).
    Conflict(Option<(Value, i64)>),
}

#[derive(Clone)]
pub struct Storage {
    client: Client,
    metrics: Arc<StoreMetrics>,
}

impl Storage {
    pub fn new(client: Client) -> Storage {
        Storage {
            client,
            metrics: Arc::default(),
        }
    }

    /// Records the store calls' latency in `metrics` (the process's registry's).
    pub fn with_metrics(mut self, metrics: StoreMetrics) -> Storage {
        self.metrics = Arc::new(metrics);
        self
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// How long this server's store calls took (`etcd_request_duration_seconds`).
    pub fn metrics(&self) -> &StoreMetrics {
        &self.metrics
    }

    /// A read through the store client, timed as `operation` on `key`.
    async fn range(
        &self,
        operation: &'static str,
        key: &str,
        range: KeyRange,
    ) -> Result<RangeResponse, ApiError> {
        let started = Instant::now();
        let response = self
            .client
            .range(RangeRequest {
                range,
                ..Default::default()
            })
            .await;
        self.metrics.observe(operation, key, started.elapsed());
        Ok(response?)
    }

    /// A transaction through the store client's batches, timed as `operation` on `key`.
    async fn txn(
        &self,
        operation: &'static str,
        key: &str,
        txn: TxnRequest,
    ) -> Result<TxnResponse, ApiError> {
        let started = Instant::now();
        let response = self.client.txn_batched(txn).await;
        self.metrics.observe(operation, key, started.elapsed());
        Ok(response?)
    }

    /// Serializes an object for storage: in kube-apiserver's field order (so that reads serve
    /// the stored bytes as they are), without resourceVersion, which is the key's revision.
    /// Written straight from `object`, leaving `metadata.resourceVersion` out as it goes (no
    /// copy of the object).
    pub fn encode(object: &Value) -> Result<Bytes, ApiError> {
        Ok(Bytes::from(crate::go_json::to_vec_for_storage(object)))
    }

    /// Reads one object from the store (linearizable).
    pub async fn get(&self, key: &str) -> Result<Option<(Value, i64)>, ApiError> {
        let response = self
            .range("get", key, KeyRange::single(key.to_string()))
            .await?;
        match response.kvs.first() {
            Some(kv) => Ok(Some((decode(&kv.value, kv.mod_revision)?, kv.mod_revision))),
            None => Ok(None),
        }
    }

    /// Creates `key` if it does not exist.
    pub async fn create(
        &self,
        key: &str,
        object: &Value,
        lease: LeaseId,
    ) -> Result<Written, ApiError> {
        let value = Storage::encode(object)?;
        let txn = TxnRequest {
            compare: vec![mod_revision_is(key, 0)],
            success: vec![RequestOp::Put(PutRequest {
                key: Bytes::from(key.to_string()),
                value,
                lease,
                prev_kv: false,
            })],
            failure: vec![],
        };
        let response = self.txn("create", key, txn).await?;
        Ok(if response.succeeded {
            Written::Ok(response.header.revision)
        } else {
            Written::Conflict(None)
        })
    }

    /// Creates `key` (if it does not exist) and writes each `guards` object (if its revision is
    /// still the one given), all or nothing. `Conflict(Some)`: the key exists; `Conflict(None)`:
    /// a guarded object changed.
    pub async fn create_guarded(
        &self,
        key: &str,
        object: &Value,
        lease: LeaseId,
        guards: &[Guarded],
    ) -> Result<Written, ApiError> {
        let put = RequestOp::Put(PutRequest {
            key: Bytes::from(key.to_string()),
            value: Storage::encode(object)?,
            lease,
            prev_kv: false,
        });
        self.guarded("create", key, 0, put, guards).await
    }

    /// Deletes `key` (if its revision is still `expected`) and writes each `guards` object, all
    /// or nothing. On `Conflict`, the key's current state: when it is unchanged, a guard moved.
    pub async fn delete_guarded(
        &self,
        key: &str,
        expected: i64,
        guards: &[Guarded],
    ) -> Result<Written, ApiError> {
        let delete = RequestOp::DeleteRange(DeleteRangeRequest {
            range: KeyRange::single(key.to_string()),
            prev_kv: false,
        });
        self.guarded("delete", key, expected, delete, guards).await
    }

    async fn guarded(
        &self,
        operation: &'static str,
        key: &str,
        expected: i64,
        op: RequestOp,
        guards: &[Guarded],
    ) -> Result<Written, ApiError> {
        let mut compare = vec![mod_revision_is(key, expected)];
        let mut success = vec![op];
        for guard in guards {
            compare.push(mod_revision_is(&guard.key, guard.revision));
            success.push(RequestOp::Put(PutRequest {
                key: Bytes::from(guard.key.clone()),
                value: Storage::encode(&guard.object)?,
                lease: 0,
                prev_kv: false,
            }));
        }
        let txn = TxnRequest {
            compare,
            success,
            failure: vec![RequestOp::Range(RangeRequest {
                range: KeyRange::single(key.to_string()),
                ..Default::default()
            })],
        };
        let response = self.txn(operation, key, txn).await?;
        if response.succeeded {
            return Ok(Written::Ok(response.header.revision));
        }
        Ok(Written::Conflict(first_kv(&response.responses)?))
    }

    /// Every object under `prefix`, with its revision (linearizable).
    pub async fn list(&self, prefix: &str) -> Result<Vec<(String, Value, i64)>, ApiError> {
        let response = self
            .range("list", prefix, KeyRange::prefix(prefix.to_string()))
            .await?;
        response
            .kvs
            .iter()
            .map(|kv| {
                Ok((
                    String::from_utf8_lossy(&kv.key).into_owned(),
                    decode(&kv.value, kv.mod_revision)?,
                    kv.mod_revision,
                ))
            })
            .collect()
    }

    /// Replaces `key` if its mod revision is still `expected`.
    pub async fn update(
        &self,
        key: &str,
        object: &Value,
        expected: i64,
        lease: LeaseId,
    ) -> Result<Written, ApiError> {
        let value = Storage::encode(object)?;
        let put = RequestOp::Put(PutRequest {
            key: Bytes::from(key.to_string()),
            value,
            lease,
            prev_kv: false,
        });
        self.conditional("update", key, expected, put).await
    }

    /// Deletes `key` if its mod revision is still `expected`.
    pub async fn delete(&self, key: &str, expected: i64) -> Result<Written, ApiError> {
        let delete = RequestOp::DeleteRange(DeleteRangeRequest {
            range: KeyRange::single(key.to_string()),
            prev_kv: false,
        });
        self.conditional("delete", key, expected, delete).await
    }

    async fn conditional(
        &self,
        operation: &'static str,
        key: &str,
        expected: i64,
        op: RequestOp,
    ) -> Result<Written, ApiError> {
        let txn = TxnRequest {
            compare: vec![mod_revision_is(key, expected)],
            success: vec![op],
            failure: vec![RequestOp::Range(RangeRequest {
                range: KeyRange::single(key.to_string()),
                ..Default::default()
            })],
        };
        let response = self.txn(operation, key, txn).await?;
        if response.succeeded {
            return Ok(Written::Ok(response.header.revision));
        }
        Ok(Written::Conflict(first_kv(&response.responses)?))
    }
}

/// An object written alongside another only if it has not changed since it was read.
pub struct Guarded {
    pub key: String,
    pub object: Value,
    /// Its mod revision when read.
    pub revision: i64,
}

/// The object a failed transaction's range read found, if any.
fn first_kv(responses: &[ResponseOp]) -> Result<Option<(Value, i64)>, ApiError> {
    Ok(match responses.first() {
        Some(ResponseOp::Range(r)) => match r.kvs.first() {
            Some(kv) => Some((decode(&kv.value, kv.mod_revision)?, kv.mod_revision)),
            None => None,
        },
        _ => None,
    })
}

fn mod_revision_is(key: &str, revision: i64) -> Compare {
    Compare {
        range: KeyRange::single(key.to_string()),
        result: CompareResult::Equal,
        target: CompareTarget::ModRevision(revision),
    }
}

/// Decodes a stored object and stamps its resourceVersion.
pub fn decode(value: &[u8], revision: i64) -> Result<Value, ApiError> {
    let mut object: Value = serde_json::from_slice(value)
        .map_err(|e| ApiError::internal(format!("stored object is not JSON: {e}")))?;
    meta::set_resource_version(&mut object, revision);
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stored_form_leaves_out_only_the_resource_version() {
        for object in [
            json!({"kind": "Pod", "metadata": {"name": "a", "resourceVersion": "5", "uid": "u"}, "spec": {"resourceVersion": "x"}}),
            json!({"metadata": {"resourceVersion": "5"}}),
            json!({"metadata": {"name": "a"}}),
            json!({"metadata": "odd"}),
            json!({"kind": "X"}),
            json!([1, 2]),
        ] {
            let mut expected = object.clone();
            if let Some(meta) = expected.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
            let encoded = Storage::encode(&object).expect("encodes");
            assert_eq!(encoded, crate::go_json::to_vec(&expected), "{object}");
        }
    }
}
