//! Transactions: etcd's compare-then-branch, planned against the state before the first
//! write, checked (key intervals, leases, read revisions), then executed at one revision.

use super::*;

/// Which branch each (nested) transaction takes. As in etcd, every compare, nested ones included,
/// is evaluated against the state before the transaction's first write.
struct TxnPlan {
    succeeded: bool,
    /// Plans of the `Txn` ops of the chosen branch, in order.
    nested: Vec<TxnPlan>,
}

impl Mvcc {
    pub(super) fn apply_txn_ops(
        &mut self,
        req: &TxnRequest,
        batch: &mut WriteBatch,
    ) -> Result<TxnResponse, StoreError> {
        check_txn_shape(req)?;
        check_intervals(&req.success)?;
        check_intervals(&req.failure)?;
        let plan = self.plan_txn(req);
        self.check_txn_ops(req, &plan)?;
        Ok(self.exec_txn(req, &plan, batch))
    }

    fn plan_txn(&self, req: &TxnRequest) -> TxnPlan {
        let succeeded = req.compare.iter().all(|c| self.compare_holds(c));
        let branch = if succeeded {
            &req.success
        } else {
            &req.failure
        };
        let nested = branch
            .iter()
            .filter_map(|op| match op {
                RequestOp::Txn(txn) => Some(self.plan_txn(txn)),
                _ => None,
            })
            .collect();
        TxnPlan { succeeded, nested }
    }

    /// Checks the ops that will run against the state (leases, read revisions), so that the
    /// execution itself cannot fail halfway.
    fn check_txn_ops(&self, req: &TxnRequest, plan: &TxnPlan) -> Result<(), StoreError> {
        let branch = if plan.succeeded {
            &req.success
        } else {
            &req.failure
        };
        let mut nested = plan.nested.iter();
        for op in branch {
            match op {
                RequestOp::Range(r) => self.check_range(r)?,
                RequestOp::Put(p) => self.check_put(p)?,
                RequestOp::DeleteRange(_) => {}
                RequestOp::Txn(txn) => {
                    let plan = nested
                        .next()
                        .expect("a plan for every nested txn of the chosen branch");
                    self.check_txn_ops(txn, plan)?;
                }
            }
        }
        Ok(())
    }

    fn exec_txn(
        &mut self,
        req: &TxnRequest,
        plan: &TxnPlan,
        batch: &mut WriteBatch,
    ) -> TxnResponse {
        let branch = if plan.succeeded {
            &req.success
        } else {
            &req.failure
        };
        let mut nested = plan.nested.iter();
        let mut responses = Vec::with_capacity(branch.len());
        for op in branch {
            let response = match op {
                RequestOp::Range(r) => {
                    let rev = if r.revision > 0 {
                        r.revision
                    } else {
                        batch.revision
                    };
                    let mut resp = self.range_at(r, rev);
                    resp.header = self.batch_header(batch);
                    ResponseOp::Range(resp)
                }
                RequestOp::Put(p) => {
                    let prev = self.put_key(batch, &p.key, &p.value, p.lease);
                    let header = self.batch_header(batch);
                    ResponseOp::Put(PutResponse {
                        header,
                        prev_kv: prev.filter(|_| p.prev_kv),
                    })
                }
                RequestOp::DeleteRange(d) => {
                    let mut resp = self.delete_range(d, batch);
                    resp.header = self.batch_header(batch);
                    ResponseOp::DeleteRange(resp)
                }
                RequestOp::Txn(txn) => {
                    let plan = nested
                        .next()
                        .expect("a plan for every nested txn of the chosen branch");
                    let mut resp = self.exec_txn(txn, plan, batch);
                    resp.header = self.batch_header(batch);
                    ResponseOp::Txn(resp)
                }
            };
            responses.push(response);
        }
        TxnResponse {
            header: self.batch_header(batch),
            succeeded: plan.succeeded,
            responses,
        }
    }

    /// etcd's `applyCompare`: every key of the range must satisfy the compare; a missing key
    /// compares as all zeros, except that a value compare on no key at all always fails.
    fn compare_holds(&self, c: &Compare) -> bool {
        let mut any = false;
        for (_, versions) in self.keys.range::<_, [u8]>(bounds(&c.range)) {
            let Some(v) = live_at(versions, self.revision) else {
                continue;
            };
            any = true;
            if !compare_version(Some(v), c) {
                return false;
            }
        }
        if any {
            return true;
        }
        !matches!(c.target, CompareTarget::Value(_)) && compare_version(None, c)
    }
}

fn compare_version(v: Option<&Version>, c: &Compare) -> bool {
    let ord = match &c.target {
        CompareTarget::Version(t) => v.map_or(0, |v| v.version).cmp(t),
        CompareTarget::CreateRevision(t) => v.map_or(0, |v| v.create_revision).cmp(t),
        CompareTarget::ModRevision(t) => v.map_or(0, |v| v.mod_revision).cmp(t),
        CompareTarget::Value(t) => {
            let value = v.map_or_else(Bytes::new, |v| v.client_value(&c.range.key));
            value[..].cmp(&t[..])
        }
        CompareTarget::Lease(t) => v.map_or(0, |v| v.lease).cmp(t),
    };
    match c.result {
        CompareResult::Equal => ord == Ordering::Equal,
        CompareResult::NotEqual => ord != Ordering::Equal,
        CompareResult::Greater => ord == Ordering::Greater,
        CompareResult::Less => ord == Ordering::Less,
    }
}

/// Request-shape checks etcd makes before a txn reaches raft: keys present, recursively.
fn check_txn_shape(req: &TxnRequest) -> Result<(), StoreError> {
    for c in &req.compare {
        check_key(&c.range)?;
    }
    for op in req.success.iter().chain(&req.failure) {
        match op {
            RequestOp::Range(r) => check_key(&r.range)?,
            RequestOp::Put(p) if p.key.is_empty() => return Err(invalid("key is not provided")),
            RequestOp::Put(_) => {}
            RequestOp::DeleteRange(d) => check_key(&d.range)?,
            RequestOp::Txn(txn) => check_txn_shape(txn)?,
        }
    }
    Ok(())
}

/// etcd's `checkIntervals`: within one branch (nested txns included) no key may be put twice or
/// be both put and deleted, so each key changes at most once per revision. The two branches of a
/// nested txn may put the same key, as only one of them runs. Returns the branch's puts and
/// deletes.
fn check_intervals(ops: &[RequestOp]) -> Result<(BTreeSet<Bytes>, Vec<KeyRange>), StoreError> {
    let duplicate = || invalid("duplicate key given in txn request");
    let mut dels: Vec<KeyRange> = ops
        .iter()
        .filter_map(|op| {
            if let RequestOp::DeleteRange(d) = op {
                Some(d.range.clone())
            } else {
                None
            }
        })
        .collect();
    let deleted = |dels: &[KeyRange], key: &[u8]| dels.iter().any(|d| d.contains(key));
    let mut puts = BTreeSet::new();
    for op in ops {
        let RequestOp::Txn(txn) = op else { continue };
        let (puts_then, dels_then) = check_intervals(&txn.success)?;
        let (puts_else, dels_else) = check_intervals(&txn.failure)?;
        for key in &puts_then {
            if puts.contains(key) || deleted(&dels, key) {
                return Err(duplicate());
            }
            puts.insert(key.clone());
        }
        for key in &puts_else {
            if (puts.contains(key) && !puts_then.contains(key)) || deleted(&dels, key) {
                return Err(duplicate());
            }
            puts.insert(key.clone());
        }
        dels.extend(dels_then);
        dels.extend(dels_else);
    }
    for op in ops {
        let RequestOp::Put(p) = op else { continue };
        if puts.contains(&p.key) || deleted(&dels, &p.key) {
            return Err(duplicate());
        }
        puts.insert(p.key.clone());
    }
    Ok((puts, dels))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mvcc::fixtures::*;

    #[test]
    fn kubernetes_create_and_update_transactions() {
        let mut m = Mvcc::new();
        let create = |value: &str| TxnRequest {
            compare: vec![mod_rev_cmp("/registry/pods/ns/p", 0)],
            success: vec![RequestOp::Put(put_req("/registry/pods/ns/p", value))],
            failure: vec![],
        };
        let (r, events) = txn(&mut m, create("v1"));
        assert!(r.succeeded);
        assert_eq!(r.header.revision, 2);
        assert_eq!(events.len(), 1);

        // A second create fails and changes nothing.
        let (r, events) = txn(&mut m, create("v1b"));
        assert!(!r.succeeded);
        assert!(events.is_empty());
        assert_eq!((r.header.revision, m.current_revision()), (2, 2));

        let update = |rv: Revision, value: &str| TxnRequest {
            compare: vec![mod_rev_cmp("/registry/pods/ns/p", rv)],
            success: vec![RequestOp::Put(put_req("/registry/pods/ns/p", value))],
            failure: vec![RequestOp::Range(RangeRequest {
                range: KeyRange::single(b("/registry/pods/ns/p")),
                ..RangeRequest::default()
            })],
        };
        let (r, _) = txn(&mut m, update(2, "v2"));
        assert!(r.succeeded);
        assert_eq!(r.header.revision, 3);
        let ResponseOp::Put(p) = &r.responses[0] else {
            panic!("{r:?}")
        };
        assert_eq!(p.prev_kv.as_ref().unwrap().value, b("v1"));

        // A stale update fails and returns the current object.
        let (r, events) = txn(&mut m, update(2, "v3"));
        assert!(!r.succeeded);
        assert!(events.is_empty());
        let ResponseOp::Range(g) = &r.responses[0] else {
            panic!("{r:?}")
        };
        assert_eq!(
            (g.kvs[0].value.clone(), g.kvs[0].mod_revision),
            (b("v2"), 3)
        );
        assert_eq!(m.current_revision(), 3);
    }

    #[test]
    fn txn_reads_its_own_writes_at_one_revision() {
        let mut m = Mvcc::new();
        put(&mut m, "x", "old"); // 2
        let (r, events) = txn(
            &mut m,
            TxnRequest {
                compare: vec![],
                success: vec![
                    RequestOp::Put(put_req("a", "1")),
                    RequestOp::DeleteRange(DeleteRangeRequest {
                        range: KeyRange::single(b("x")),
                        prev_kv: true,
                    }),
                    RequestOp::Range(RangeRequest {
                        range: KeyRange::prefix(b("")),
                        ..RangeRequest::default()
                    }),
                    RequestOp::Txn(TxnRequest {
                        compare: vec![],
                        success: vec![RequestOp::Put(put_req("b", "2"))],
                        failure: vec![],
                    }),
                ],
                failure: vec![],
            },
        );
        assert!(r.succeeded);
        assert_eq!(r.header.revision, 3);
        let ResponseOp::Range(g) = &r.responses[2] else {
            panic!("{r:?}")
        };
        assert_eq!(keys_of(&g.kvs), vec![&b"a"[..]]);
        assert_eq!(g.kvs[0].mod_revision, 3);
        assert_eq!(events.len(), 3);
        assert!(events.iter().all(|e| e.kv.mod_revision == 3));
        assert_eq!(
            events
                .iter()
                .map(|e| (e.kind, &e.kv.key[..]))
                .collect::<Vec<_>>(),
            vec![
                (EventKind::Put, &b"a"[..]),
                (EventKind::Delete, b"x"),
                (EventKind::Put, b"b")
            ]
        );
        assert_eq!(m.current_revision(), 3);

        // A read-only txn and a txn deleting nothing do not bump the revision.
        let (r, events) = txn(
            &mut m,
            TxnRequest {
                compare: vec![],
                success: vec![
                    RequestOp::Range(RangeRequest {
                        range: KeyRange::single(b("a")),
                        ..RangeRequest::default()
                    }),
                    RequestOp::DeleteRange(DeleteRangeRequest {
                        range: KeyRange::single(b("nope")),
                        prev_kv: false,
                    }),
                ],
                failure: vec![],
            },
        );
        assert!(events.is_empty());
        assert_eq!((r.header.revision, m.current_revision()), (3, 3));
    }

    #[test]
    fn a_batch_applies_each_transaction_at_its_own_revision_and_judges_each_alone() {
        let mut m = Mvcc::new();
        put(&mut m, "taken", "0");
        let base = m.current_revision();
        let create = |key: &str| TxnRequest {
            compare: vec![mod_rev_cmp(key, 0)],
            success: vec![RequestOp::Put(put_req(key, "v"))],
            failure: vec![],
        };
        let invalid = TxnRequest {
            compare: vec![],
            success: vec![
                RequestOp::Put(put_req("d", "1")),
                RequestOp::Put(put_req("d", "2")),
            ],
            failure: vec![],
        };
        let batch = Command::Batch(vec![create("a"), create("taken"), invalid, create("b")]);
        let (result, events) = m.apply(&batch);
        let CommandResult::Batch(results) = result else {
            panic!("a batch answers with a batch: {result:?}");
        };
        assert_eq!(results.len(), 4);
        // The first creates "a" at the next revision; the second finds "taken" and writes
        // nothing; the third is refused alone; the fourth creates "b" at the revision after.
        let revision = |r: &CommandResult| match r {
            CommandResult::Txn(t) => Some((t.succeeded, t.header.revision)),
            _ => None,
        };
        assert_eq!(revision(&results[0]), Some((true, base + 1)));
        assert_eq!(revision(&results[1]), Some((false, base + 1)));
        assert!(matches!(
            results[2],
            CommandResult::Error(StoreError::InvalidRequest { .. })
        ));
        assert_eq!(revision(&results[3]), Some((true, base + 2)));
        let revisions: Vec<(Bytes, Revision)> = events
            .iter()
            .map(|e| (e.kv.key.clone(), e.kv.mod_revision))
            .collect();
        assert_eq!(revisions, vec![(b("a"), base + 1), (b("b"), base + 2)]);
        assert_eq!(m.current_revision(), base + 2);
        assert!(get(&m, "d").is_none());
    }

    #[test]
    fn txn_rejects_duplicate_keys_and_unknown_leases() {
        let mut m = Mvcc::new();
        let dup = TxnRequest {
            compare: vec![],
            success: vec![
                RequestOp::Put(put_req("a", "1")),
                RequestOp::Put(put_req("a", "2")),
            ],
            failure: vec![],
        };
        assert!(matches!(
            expect_error(&mut m, Command::Txn(dup)),
            StoreError::InvalidRequest { .. }
        ));
        let put_in_delete = TxnRequest {
            compare: vec![],
            success: vec![],
            failure: vec![
                RequestOp::DeleteRange(DeleteRangeRequest {
                    range: KeyRange::prefix(b("a")),
                    prev_kv: false,
                }),
                RequestOp::Put(put_req("ab", "2")),
            ],
        };
        assert!(matches!(
            expect_error(&mut m, Command::Txn(put_in_delete)),
            StoreError::InvalidRequest { .. }
        ));
        // The two branches of a nested txn may put the same key.
        let nested_ok = TxnRequest {
            compare: vec![],
            success: vec![RequestOp::Txn(TxnRequest {
                compare: vec![],
                success: vec![RequestOp::Put(put_req("a", "1"))],
                failure: vec![RequestOp::Put(put_req("a", "2"))],
            })],
            failure: vec![],
        };
        let (r, events) = txn(&mut m, nested_ok);
        assert!(r.succeeded);
        assert_eq!(events.len(), 1);

        let bad_lease = TxnRequest {
            compare: vec![],
            success: vec![
                RequestOp::Put(put_req("b", "1")),
                RequestOp::Put(PutRequest {
                    lease: 9,
                    ..put_req("c", "1")
                }),
            ],
            failure: vec![],
        };
        assert_eq!(
            expect_error(&mut m, Command::Txn(bad_lease)),
            StoreError::LeaseNotFound { id: 9 }
        );
        assert_eq!(get(&m, "b"), None);
        assert_eq!(
            expect_error(
                &mut m,
                Command::Put(PutRequest {
                    lease: 9,
                    ..put_req("c", "1")
                })
            ),
            StoreError::LeaseNotFound { id: 9 }
        );
    }

    #[test]
    fn compare_semantics_on_missing_and_ranged_keys() {
        let mut m = Mvcc::new();
        put(&mut m, "/r/a", "x"); // 2
        put(&mut m, "/r/b", "y"); // 3
        let holds = |m: &Mvcc, range: KeyRange, result: CompareResult, target: CompareTarget| {
            m.compare_holds(&Compare {
                range,
                result,
                target,
            })
        };
        let missing = || KeyRange::single(b("/missing"));
        assert!(holds(
            &m,
            missing(),
            CompareResult::Equal,
            CompareTarget::Version(0)
        ));
        assert!(holds(
            &m,
            missing(),
            CompareResult::Equal,
            CompareTarget::CreateRevision(0)
        ));
        assert!(holds(
            &m,
            missing(),
            CompareResult::Equal,
            CompareTarget::ModRevision(0)
        ));
        assert!(holds(
            &m,
            missing(),
            CompareResult::Equal,
            CompareTarget::Lease(0)
        ));
        assert!(holds(
            &m,
            missing(),
            CompareResult::Less,
            CompareTarget::ModRevision(5)
        ));
        assert!(!holds(
            &m,
            missing(),
            CompareResult::Greater,
            CompareTarget::Version(0)
        ));
        // etcd: a value compare on a missing key always fails, whatever the operator.
        assert!(!holds(
            &m,
            missing(),
            CompareResult::Equal,
            CompareTarget::Value(Bytes::new())
        ));
        assert!(!holds(
            &m,
            missing(),
            CompareResult::NotEqual,
            CompareTarget::Value(b("z"))
        ));

        let single = || KeyRange::single(b("/r/a"));
        assert!(holds(
            &m,
            single(),
            CompareResult::Equal,
            CompareTarget::Value(b("x"))
        ));
        assert!(holds(
            &m,
            single(),
            CompareResult::NotEqual,
            CompareTarget::Value(b("y"))
        ));
        assert!(holds(
            &m,
            single(),
            CompareResult::Greater,
            CompareTarget::Value(b("w"))
        ));
        assert!(holds(
            &m,
            single(),
            CompareResult::Less,
            CompareTarget::Value(b("xa"))
        ));
        assert!(holds(
            &m,
            single(),
            CompareResult::Equal,
            CompareTarget::Version(1)
        ));
        assert!(holds(
            &m,
            single(),
            CompareResult::NotEqual,
            CompareTarget::ModRevision(3)
        ));

        // Over a range every key must satisfy the compare.
        let prefix = || KeyRange::prefix(b("/r/"));
        assert!(holds(
            &m,
            prefix(),
            CompareResult::Greater,
            CompareTarget::ModRevision(1)
        ));
        assert!(!holds(
            &m,
            prefix(),
            CompareResult::Equal,
            CompareTarget::ModRevision(2)
        ));
        assert!(holds(
            &m,
            prefix(),
            CompareResult::Equal,
            CompareTarget::Version(1)
        ));
        // An empty range compares like a missing key.
        assert!(holds(
            &m,
            KeyRange::prefix(b("/none/")),
            CompareResult::Equal,
            CompareTarget::Version(0)
        ));
    }
}
