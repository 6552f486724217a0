//! Tuning sets: when each of a phase's actions starts. The schedule is a pure function of the
//! tuning set, the number of actions and a seeded RNG ([`Pacing::offsets`]); the two that
//! depend on the run itself — a parallelism limit and a QPS shared by every phase using the
//! set — are carried out by [`run_actions`].

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use rand::Rng;
use tokio::sync::{Mutex, Semaphore};
use tokio::time::Instant;

use super::config::TuningSet;

/// How a tuning set spaces its actions.
#[derive(Clone, Debug, PartialEq)]
pub enum Pacing {
    /// Action `i` at `i / qps`.
    Qps(f64),
    /// Each action at a uniformly random moment of `n / average_qps` seconds.
    Randomized(f64),
    /// `burst` actions every `delay`.
    Stepped { burst: u32, delay: Duration },
    /// Spread evenly over `limit`.
    TimeLimited(Duration),
    /// Each at a uniformly random moment of `limit`.
    RandomizedTimeLimited(Duration),
    /// As fast as possible, `limit` at a time.
    ParallelismLimited(u32),
    /// A token bucket shared by every phase that uses the set.
    GlobalQps { qps: f64, burst: u32 },
    /// Exponential gaps with mean `1 / rate`.
    Poisson(f64),
}

const KINDS: &str = "qpsLoad, randomizedLoad, steppedLoad, timeLimitedLoad, \
                     randomizedTimeLimitedLoad, parallelismLimitedLoad, globalQPSLoad, poissonLoad";

impl Pacing {
    /// The set's one load kind, checked.
    pub fn from_config(set: &TuningSet) -> Result<Pacing, String> {
        let name = &set.name;
        let mut kinds = Vec::new();
        if let Some(l) = &set.qpsload {
            kinds.push(Pacing::Qps(l.qps));
        }
        if let Some(l) = &set.randomizedload {
            kinds.push(Pacing::Randomized(l.averageqps));
        }
        if let Some(l) = &set.steppedload {
            kinds.push(Pacing::Stepped {
                burst: l.burstsize,
                delay: l.stepdelay.0,
            });
        }
        if let Some(l) = &set.timelimitedload {
            kinds.push(Pacing::TimeLimited(l.timelimit.0));
        }
        if let Some(l) = &set.randomizedtimelimitedload {
            kinds.push(Pacing::RandomizedTimeLimited(l.timelimit.0));
        }
        if let Some(l) = &set.parallelismlimitedload {
            kinds.push(Pacing::ParallelismLimited(l.parallelismlimit));
        }
        if let Some(l) = &set.globalqpsload {
            kinds.push(Pacing::GlobalQps {
                qps: l.qps,
                burst: l.burst.max(1),
            });
        }
        if let Some(l) = &set.poissonload {
            kinds.push(Pacing::Poisson(l.expectedactionspersecond));
        }
        if kinds.len() != 1 {
            return Err(format!(
                "tuning set {name:?} must have exactly one of {KINDS} (it has {})",
                kinds.len()
            ));
        }
        let pacing = kinds.remove(0);
        let positive = |v: f64, what: &str| {
            if v.is_finite() && v > 0.0 {
                Ok(())
            } else {
                Err(format!("tuning set {name:?}: {what} must be positive"))
            }
        };
        match &pacing {
            Pacing::Qps(q) | Pacing::GlobalQps { qps: q, .. } => positive(*q, "qps")?,
            Pacing::Randomized(q) => positive(*q, "averageQps")?,
            Pacing::Poisson(q) => positive(*q, "expectedActionsPerSecond")?,
            Pacing::Stepped { burst, .. } => positive(*burst as f64, "burstSize")?,
            Pacing::ParallelismLimited(p) => positive(*p as f64, "parallelismLimit")?,
            Pacing::TimeLimited(_) | Pacing::RandomizedTimeLimited(_) => {}
        }
        Ok(pacing)
    }

    /// When each of `n` actions starts, from the phase's start; `None` for the two kinds that
    /// [`run_actions`] paces as it goes.
    pub fn offsets(&self, n: usize, rng: &mut impl Rng) -> Option<Vec<Duration>> {
        let secs = Duration::from_secs_f64;
        Some(match *self {
            Pacing::Qps(qps) => (0..n).map(|i| secs(i as f64 / qps)).collect(),
            Pacing::Randomized(avg) => {
                let total = n as f64 / avg;
                sorted((0..n).map(|_| secs(rng.gen::<f64>() * total)).collect())
            }
            Pacing::Stepped { burst, delay } => {
                (0..n).map(|i| delay * (i as u32 / burst)).collect()
            }
            Pacing::TimeLimited(limit) => (0..n)
                .map(|i| limit.mul_f64(i as f64 / n.max(1) as f64))
                .collect(),
            Pacing::RandomizedTimeLimited(limit) => {
                sorted((0..n).map(|_| limit.mul_f64(rng.gen::<f64>())).collect())
            }
            Pacing::Poisson(rate) => {
                let mut t = 0.0;
                (0..n)
                    .map(|_| {
                        let u: f64 = rng.gen_range(f64::EPSILON..1.0);
                        t += -u.ln() / rate;
                        secs(t)
                    })
                    .collect()
            }
            Pacing::ParallelismLimited(_) | Pacing::GlobalQps { .. } => return None,
        })
    }
}

fn sorted(mut v: Vec<Duration>) -> Vec<Duration> {
    v.sort();
    v
}

/// The token bucket of a `globalQPSLoad` set, shared by the phases that use it.
#[derive(Debug)]
pub struct GlobalBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl GlobalBucket {
    pub fn new(qps: f64, burst: u32) -> Arc<GlobalBucket> {
        Arc::new(GlobalBucket {
            qps,
            burst: burst as f64,
            state: Mutex::new((burst as f64, Instant::now())),
        })
    }

    /// Waits for a token.
    async fn take(&self) {
        loop {
            let wait = {
                let mut state = self.state.lock().await;
                let now = Instant::now();
                let tokens = (state.0 + (now - state.1).as_secs_f64() * self.qps).min(self.burst);
                if tokens >= 1.0 {
                    *state = (tokens - 1.0, now);
                    return;
                }
                *state = (tokens, now);
                Duration::from_secs_f64((1.0 - tokens) / self.qps)
            };
            tokio::time::sleep(wait).await;
        }
    }
}

/// Runs `actions` as `pacing` spaces them (after `initial_delay`), all of them to their end.
pub async fn run_actions(
    pacing: &Pacing,
    initial_delay: Duration,
    bucket: Option<Arc<GlobalBucket>>,
    actions: Vec<BoxFuture<'static, ()>>,
    seed: u64,
) {
    tokio::time::sleep(initial_delay).await;
    let n = actions.len();
    let start = Instant::now();
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    let mut handles = Vec::with_capacity(n);
    match pacing.offsets(n, &mut rng) {
        Some(offsets) => {
            for (action, offset) in actions.into_iter().zip(offsets) {
                tokio::time::sleep_until(start + offset).await;
                handles.push(tokio::spawn(action));
            }
        }
        None => {
            let limit = match pacing {
                Pacing::ParallelismLimited(p) => *p as usize,
                _ => Semaphore::MAX_PERMITS,
            };
            let permits = Arc::new(Semaphore::new(limit));
            for action in actions {
                if let Some(bucket) = &bucket {
                    bucket.take().await;
                }
                let Ok(permit) = permits.clone().acquire_owned().await else {
                    break;
                };
                handles.push(tokio::spawn(async move {
                    action.await;
                    drop(permit);
                }));
            }
        }
    }
    for h in handles {
        let _ = h.await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use rand::SeedableRng;

    use super::*;

    fn rng() -> rand::rngs::StdRng {
        rand::rngs::StdRng::seed_from_u64(7)
    }

    #[test]
    fn schedules() {
        let ms = |v: Vec<Duration>| v.iter().map(|d| d.as_millis() as u64).collect::<Vec<_>>();
        assert_eq!(
            ms(Pacing::Qps(4.0).offsets(3, &mut rng()).unwrap()),
            [0, 250, 500]
        );
        let stepped = Pacing::Stepped {
            burst: 2,
            delay: Duration::from_secs(1),
        };
        assert_eq!(
            ms(stepped.offsets(5, &mut rng()).unwrap()),
            [0, 0, 1000, 1000, 2000]
        );
        let limited = Pacing::TimeLimited(Duration::from_secs(2));
        assert_eq!(
            ms(limited.offsets(4, &mut rng()).unwrap()),
            [0, 500, 1000, 1500]
        );
        let random = Pacing::Randomized(10.0).offsets(100, &mut rng()).unwrap();
        assert!(random.iter().all(|d| *d <= Duration::from_secs(10)));
        assert!(random.windows(2).all(|w| w[0] <= w[1]));
        let poisson = Pacing::Poisson(100.0).offsets(1000, &mut rng()).unwrap();
        let last = poisson.last().unwrap().as_secs_f64();
        assert!((8.0..12.0).contains(&last), "{last}");
        assert!(Pacing::ParallelismLimited(3)
            .offsets(3, &mut rng())
            .is_none());
    }

    #[test]
    fn a_tuning_set_needs_exactly_one_kind() {
        let none = TuningSet {
            name: "Empty".into(),
            ..Default::default()
        };
        let e = Pacing::from_config(&none).unwrap_err();
        assert!(e.contains("exactly one of"), "{e}");
        let zero = TuningSet {
            name: "Z".into(),
            qpsload: Some(crate::cl2::config::QpsLoad { qps: 0.0 }),
            ..Default::default()
        };
        assert!(Pacing::from_config(&zero)
            .unwrap_err()
            .contains("qps must be positive"));
    }

    #[tokio::test(start_paused = true)]
    async fn parallelism_is_limited() {
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let actions = (0..10)
            .map(|_| {
                let (running, peak) = (running.clone(), peak.clone());
                let action: BoxFuture<'static, ()> = Box::pin(async move {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    running.fetch_sub(1, Ordering::SeqCst);
                });
                action
            })
            .collect();
        run_actions(
            &Pacing::ParallelismLimited(3),
            Duration::ZERO,
            None,
            actions,
            1,
        )
        .await;
        assert_eq!(peak.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn a_global_bucket_keeps_its_rate() {
        let bucket = GlobalBucket::new(10.0, 1);
        let start = Instant::now();
        let actions = (0..11)
            .map(|_| Box::pin(async {}) as BoxFuture<'static, ()>)
            .collect();
        let pacing = Pacing::GlobalQps {
            qps: 10.0,
            burst: 1,
        };
        run_actions(&pacing, Duration::ZERO, Some(bucket), actions, 1).await;
        let took = start.elapsed().as_secs_f64();
        assert!((0.95..1.1).contains(&took), "{took}");
    }
}
