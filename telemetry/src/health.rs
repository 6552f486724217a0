//! [`Health`]: named checks behind `/healthz`, `/livez` and `/readyz`, answered as
//! kube-apiserver answers them.
//!
//! - `GET /readyz` runs the endpoint's checks in the order they were added: `200 ok` when all
//!   pass; otherwise `500` with one line per check (`[+]etcd ok`, `[-]informer-sync failed:
//!   reason withheld`) and `readyz check failed`. The reason stays out of the public answer (it
//!   is logged, and the per-check path shows it).
//! - `?verbose` lists the checks on success too, ending `readyz check passed`.
//! - `?exclude=NAME` (repeatable) skips a check (`[+]NAME excluded: ok`); a name that matches
//!   none is warned about in the listing.
//! - `GET /readyz/NAME` runs one check: `200 ok`, or `500 internal server error: REASON`.
//!
//! Every endpoint starts with `ping` (always passes: the process answers HTTP). A liveness check
//! ([`Health::liveness`]) is on all three endpoints, as kube-apiserver's `etcd`; a readiness check
//! ([`Health::readiness`]) only on `/readyz`, as its `informer-sync`.
//!
//! Each check a whole endpoint runs is recorded, as component-base records its health checks
//! for `/metrics/slis` ([`Health::slis`]): `kubernetes_healthcheck{name,type}` (1 when its last
//! run passed) and `kubernetes_healthchecks_total{name,status,type}`.

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;

/// What a check says: `Err(reason)` when it fails.
pub type CheckResult = Result<(), String>;

/// A check's answer, to be awaited.
pub type CheckFuture = Pin<Box<dyn Future<Output = CheckResult> + Send>>;

/// Something that can tell whether a part of the process works. Plain closures returning a
/// [`CheckResult`] are checks; [`async_check`] makes one of an async closure.
pub trait Check: Send + Sync + 'static {
    fn check(&self) -> CheckFuture;
}

impl<F> Check for F
where
    F: Fn() -> CheckResult + Send + Sync + 'static,
{
    fn check(&self) -> CheckFuture {
        let result = self();
        Box::pin(std::future::ready(result))
    }
}

/// A check from an async closure (one that asks another process, say).
pub fn async_check<F, Fut>(f: F) -> impl Check
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = CheckResult> + Send + 'static,
{
    AsyncCheck(f)
}

struct AsyncCheck<F>(F);

impl<F, Fut> Check for AsyncCheck<F>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = CheckResult> + Send + 'static,
{
    fn check(&self) -> CheckFuture {
        Box::pin((self.0)())
    }
}

/// A condition some task sets when it holds (informers synced, a lease held): a check that
/// fails with `reason` until then. Cheap to clone; every clone is the same condition.
#[derive(Clone, Debug)]
pub struct Condition {
    holds: Arc<AtomicBool>,
    reason: Cow<'static, str>,
}

impl Condition {
    /// A condition that does not hold yet.
    pub fn new(reason: impl Into<Cow<'static, str>>) -> Condition {
        Condition {
            holds: Arc::new(AtomicBool::new(false)),
            reason: reason.into(),
        }
    }

    pub fn set(&self, holds: bool) {
        self.holds.store(holds, Ordering::Relaxed);
    }

    pub fn holds(&self) -> bool {
        self.holds.load(Ordering::Relaxed)
    }
}

impl Check for Condition {
    fn check(&self) -> CheckFuture {
        let result = if self.holds() {
            Ok(())
        } else {
            Err(self.reason.to_string())
        };
        Box::pin(std::future::ready(result))
    }
}

/// The three health endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Healthz,
    Livez,
    Readyz,
}

impl Endpoint {
    pub const ALL: [Endpoint; 3] = [Endpoint::Healthz, Endpoint::Livez, Endpoint::Readyz];

    /// The endpoint's name, as its path and its answers say it (`readyz check passed`).
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::Healthz => "healthz",
            Endpoint::Livez => "livez",
            Endpoint::Readyz => "readyz",
        }
    }

    /// The endpoint `path` is, or is under (`/readyz/etcd`), with the check's name if any.
    pub fn parse(path: &str) -> Option<(Endpoint, Option<&str>)> {
        let rest = path.strip_prefix('/')?;
        let (head, check) = match rest.split_once('/') {
            Some((head, check)) => (head, Some(check)),
            None => (rest, None),
        };
        let endpoint = Endpoint::ALL.into_iter().find(|e| e.name() == head)?;
        Some((endpoint, check))
    }
}

/// An HTTP answer of a health endpoint: status and plain-text body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthAnswer {
    pub status: u16,
    pub body: String,
}

struct Registered {
    name: Cow<'static, str>,
    check: Arc<dyn Check>,
    /// Also on `/healthz` and `/livez`, not only `/readyz`.
    liveness: bool,
}

/// What the runs of one check under one endpoint gave.
#[derive(Clone, Copy, Debug, Default)]
struct Outcomes {
    last_passed: bool,
    success: u64,
    error: u64,
}

/// A process's health checks. Cheap to clone; every clone shares the checks.
#[derive(Clone)]
pub struct Health {
    checks: Arc<RwLock<Vec<Registered>>>,
    /// By (check, endpoint): the runs of whole endpoints, for `/metrics/slis`.
    outcomes: Arc<Mutex<BTreeMap<(String, &'static str), Outcomes>>>,
    /// How long one check may take before it counts as failed.
    timeout: Duration,
}

impl Default for Health {
    fn default() -> Health {
        Health::new()
    }
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<_> = self.checks.read().iter().map(|c| c.name.clone()).collect();
        f.debug_struct("Health").field("checks", &names).finish()
    }
}

/// How long a check may take, unless [`Health::with_timeout`] says otherwise.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

impl Health {
    /// Checks with `ping` alone.
    pub fn new() -> Health {
        let health = Health {
            checks: Arc::default(),
            outcomes: Arc::default(),
            timeout: DEFAULT_CHECK_TIMEOUT,
        };
        health.liveness("ping", || Ok(()));
        health
    }

    pub fn with_timeout(mut self, timeout: Duration) -> Health {
        self.timeout = timeout;
        self
    }

    /// Adds a check to `/healthz`, `/livez` and `/readyz`: failing it means the process should
    /// be restarted.
    pub fn liveness(&self, name: impl Into<Cow<'static, str>>, check: impl Check) {
        self.add(name.into(), Arc::new(check), true);
    }

    /// Adds a check to `/readyz` only: failing it means the process should get no traffic yet.
    pub fn readiness(&self, name: impl Into<Cow<'static, str>>, check: impl Check) {
        self.add(name.into(), Arc::new(check), false);
    }

    fn add(&self, name: Cow<'static, str>, check: Arc<dyn Check>, liveness: bool) {
        let mut checks = self.checks.write();
        // A name says one check: adding it again replaces it.
        checks.retain(|c| c.name != name);
        checks.push(Registered {
            name,
            check,
            liveness,
        });
    }

    /// The names of an endpoint's checks, in the order they run.
    pub fn names(&self, endpoint: Endpoint) -> Vec<String> {
        self.on(endpoint)
            .into_iter()
            .map(|(n, _)| n.into_owned())
            .collect()
    }

    fn on(&self, endpoint: Endpoint) -> Vec<(Cow<'static, str>, Arc<dyn Check>)> {
        self.checks
            .read()
            .iter()
            .filter(|c| c.liveness || endpoint == Endpoint::Readyz)
            .map(|c| (c.name.clone(), c.check.clone()))
            .collect()
    }

    async fn run(&self, check: &Arc<dyn Check>) -> CheckResult {
        match tokio::time::timeout(self.timeout, check.check()).await {
            Ok(result) => result,
            Err(_) => Err(format!("timed out after {:?}", self.timeout)),
        }
    }

    /// The answer to `GET path?query` when `path` is a health endpoint or one of its checks;
    /// `None` when it is neither.
    pub async fn answer(&self, path: &str, query: Option<&str>) -> Option<HealthAnswer> {
        let (endpoint, check) = Endpoint::parse(path)?;
        Some(match check {
            None => self.answer_endpoint(endpoint, query.unwrap_or("")).await,
            Some(name) => self.answer_check(endpoint, name).await?,
        })
    }

    /// One check alone (`/readyz/etcd`); `None` when the endpoint has no such check.
    async fn answer_check(&self, endpoint: Endpoint, name: &str) -> Option<HealthAnswer> {
        let (_, check) = self.on(endpoint).into_iter().find(|(n, _)| n == name)?;
        Some(match self.run(&check).await {
            Ok(()) => HealthAnswer {
                status: 200,
                body: "ok".into(),
            },
            Err(reason) => HealthAnswer {
                status: 500,
                body: format!("internal server error: {reason}\n"),
            },
        })
    }

    fn record(&self, endpoint: Endpoint, name: &str, passed: bool) {
        let mut outcomes = self.outcomes.lock();
        let o = outcomes
            .entry((name.to_string(), endpoint.name()))
            .or_default();
        o.last_passed = passed;
        if passed {
            o.success += 1;
        } else {
            o.error += 1;
        }
    }

    /// `/metrics/slis` in Prometheus' text format: the checks whole endpoints have run, as
    /// kube-apiserver and the other components report them.
    pub fn slis(&self) -> String {
        let outcomes = self.outcomes.lock();
        let mut out = String::from(
            "# HELP kubernetes_healthcheck [STABLE] This metric records the result of a single healthcheck.\n\
             # TYPE kubernetes_healthcheck gauge\n",
        );
        for ((name, kind), o) in outcomes.iter() {
            out.push_str(&format!(
                "kubernetes_healthcheck{{name=\"{name}\",type=\"{kind}\"}} {}\n",
                u8::from(o.last_passed)
            ));
        }
        out.push_str(
            "# HELP kubernetes_healthchecks_total [STABLE] This metric records the results of all healthcheck.\n\
             # TYPE kubernetes_healthchecks_total counter\n",
        );
        for ((name, kind), o) in outcomes.iter() {
            for (status, count) in [("error", o.error), ("success", o.success)] {
                if count > 0 {
                    out.push_str(&format!(
                        "kubernetes_healthchecks_total{{name=\"{name}\",status=\"{status}\",type=\"{kind}\"}} {count}\n"
                    ));
                }
            }
        }
        out
    }

    /// The whole endpoint, with `verbose` and `exclude` read from `query`.
    pub async fn answer_endpoint(&self, endpoint: Endpoint, query: &str) -> HealthAnswer {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).unwrap_or_default();
        let verbose = pairs.iter().any(|(k, _)| k == "verbose");
        let mut excluded: Vec<&str> = pairs
            .iter()
            .filter(|(k, _)| k == "exclude")
            .flat_map(|(_, v)| v.split(','))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .collect();
        let mut listing = String::new();
        let mut failed = Vec::new();
        for (name, check) in self.on(endpoint) {
            if let Some(i) = excluded.iter().position(|e| *e == name) {
                excluded.remove(i);
                listing.push_str(&format!("[+]{name} excluded: ok\n"));
                continue;
            }
            let result = self.run(&check).await;
            self.record(endpoint, &name, result.is_ok());
            match result {
                Ok(()) => listing.push_str(&format!("[+]{name} ok\n")),
                Err(reason) => {
                    listing.push_str(&format!("[-]{name} failed: reason withheld\n"));
                    failed.push(format!("[-]{name} failed: {reason}"));
                }
            }
        }
        if !excluded.is_empty() {
            let quoted: Vec<String> = excluded.iter().map(|e| format!("{e:?}")).collect();
            listing.push_str(&format!(
                "warn: some health checks cannot be excluded: no matches for {}\n",
                quoted.join(",")
            ));
        }
        let name = endpoint.name();
        if !failed.is_empty() {
            tracing::info!(endpoint = name, failed = %failed.join("; "), "health check failed");
            return HealthAnswer {
                status: 500,
                body: format!("{listing}{name} check failed\n"),
            };
        }
        let body = if verbose {
            format!("{listing}{name} check passed\n")
        } else {
            "ok".to_string()
        };
        HealthAnswer { status: 200, body }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health_with_bad() -> Health {
        let health = Health::new();
        health.readiness("bad", || Err("this will fail".to_string()));
        health
    }

    #[tokio::test]
    async fn endpoint_runs_are_recorded_for_slis() {
        let health = health_with_bad();
        get(&health, "/readyz").await;
        get(&health, "/readyz?exclude=bad").await;
        get(&health, "/livez").await;
        // A single check's path is not recorded, as in component-base.
        get(&health, "/readyz/ping").await;
        let text = health.slis();
        assert!(
            text.starts_with("# HELP kubernetes_healthcheck [STABLE]"),
            "{text}"
        );
        for line in [
            "kubernetes_healthcheck{name=\"bad\",type=\"readyz\"} 0",
            "kubernetes_healthcheck{name=\"ping\",type=\"livez\"} 1",
            "kubernetes_healthcheck{name=\"ping\",type=\"readyz\"} 1",
            "kubernetes_healthchecks_total{name=\"bad\",status=\"error\",type=\"readyz\"} 1",
            "kubernetes_healthchecks_total{name=\"ping\",status=\"success\",type=\"readyz\"} 2",
            "kubernetes_healthchecks_total{name=\"ping\",status=\"success\",type=\"livez\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
        assert!(!text.contains("type=\"healthz\""), "{text}");
    }

    async fn get(health: &Health, target: &str) -> (u16, String) {
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (target, None),
        };
        let answer = health.answer(path, query).await.expect("a health path");
        (answer.status, answer.body)
    }

    #[tokio::test]
    async fn answers_as_kube_apiserver_does() {
        let good = Health::new();
        assert_eq!(get(&good, "/readyz").await, (200, "ok".into()));
        assert_eq!(
            get(&good, "/readyz?verbose").await,
            (200, "[+]ping ok\nreadyz check passed\n".into())
        );
        assert_eq!(
            get(&good, "/livez?exclude=dontexist").await,
            (200, "ok".into())
        );
        assert_eq!(
            get(&good, "/healthz?verbose=true&exclude=dontexist").await,
            (
                200,
                "[+]ping ok\nwarn: some health checks cannot be excluded: no matches for \"dontexist\"\nhealthz check passed\n"
                    .into()
            )
        );
        assert_eq!(get(&good, "/readyz/ping").await, (200, "ok".into()));

        let bad = health_with_bad();
        assert_eq!(
            get(&bad, "/readyz").await,
            (
                500,
                "[+]ping ok\n[-]bad failed: reason withheld\nreadyz check failed\n".into()
            )
        );
        assert_eq!(
            get(&bad, "/readyz?verbose").await,
            (
                500,
                "[+]ping ok\n[-]bad failed: reason withheld\nreadyz check failed\n".into()
            )
        );
        assert_eq!(get(&bad, "/readyz?exclude=bad").await, (200, "ok".into()));
        assert_eq!(
            get(&bad, "/readyz?verbose=true&exclude=bad").await,
            (
                200,
                "[+]ping ok\n[+]bad excluded: ok\nreadyz check passed\n".into()
            )
        );
        assert_eq!(
            get(&bad, "/readyz/bad").await,
            (500, "internal server error: this will fail\n".into())
        );
        assert_eq!(get(&bad, "/readyz/ping").await, (200, "ok".into()));
    }

    #[tokio::test]
    async fn readiness_checks_stay_off_liveness_endpoints() {
        let bad = health_with_bad();
        assert_eq!(get(&bad, "/livez").await, (200, "ok".into()));
        assert_eq!(get(&bad, "/healthz").await, (200, "ok".into()));
        assert_eq!(bad.names(Endpoint::Livez), vec!["ping"]);
        assert_eq!(bad.names(Endpoint::Readyz), vec!["ping", "bad"]);
        // A readiness check is not one of /livez's.
        assert_eq!(bad.answer("/livez/bad", None).await, None);
        assert_eq!(bad.answer("/metrics", None).await, None);
        assert_eq!(bad.answer("/readyzz", None).await, None);
    }

    #[tokio::test]
    async fn a_liveness_check_is_on_every_endpoint() {
        let health = Health::new();
        health.liveness("etcd", || Err("no leader".to_string()));
        for endpoint in Endpoint::ALL {
            let answer = health.answer_endpoint(endpoint, "").await;
            assert_eq!(answer.status, 500, "{endpoint:?}");
            assert!(answer.body.contains("[-]etcd failed: reason withheld\n"));
            assert!(answer
                .body
                .ends_with(&format!("{} check failed\n", endpoint.name())));
        }
    }

    #[tokio::test]
    async fn conditions_and_async_checks() {
        let health = Health::new();
        let synced = Condition::new("informers not synced");
        health.readiness("informer-sync", synced.clone());
        let reachable = Arc::new(AtomicBool::new(false));
        let seen = reachable.clone();
        health.liveness(
            "etcd",
            async_check(move || {
                let up = seen.load(Ordering::Relaxed);
                async move {
                    tokio::task::yield_now().await;
                    if up {
                        Ok(())
                    } else {
                        Err("store unreachable".to_string())
                    }
                }
            }),
        );
        assert_eq!(
            get(&health, "/readyz/informer-sync").await,
            (500, "internal server error: informers not synced\n".into())
        );
        assert_eq!(get(&health, "/readyz").await.0, 500);
        synced.set(true);
        reachable.store(true, Ordering::Relaxed);
        assert_eq!(
            get(&health, "/readyz?verbose").await,
            (
                200,
                "[+]ping ok\n[+]informer-sync ok\n[+]etcd ok\nreadyz check passed\n".into()
            )
        );
    }

    #[tokio::test]
    async fn a_check_that_hangs_fails_after_the_timeout() {
        let health = Health::new().with_timeout(Duration::from_millis(50));
        health.readiness(
            "stuck",
            async_check(|| async {
                std::future::pending::<()>().await;
                Ok(())
            }),
        );
        assert_eq!(
            get(&health, "/readyz/stuck").await,
            (500, "internal server error: timed out after 50ms\n".into())
        );
    }
}
