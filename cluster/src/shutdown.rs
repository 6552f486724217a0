//! The one way a long-running kemu process learns it should stop: SIGTERM or Ctrl-C.

/// Resolves on SIGTERM or SIGINT (Ctrl-C).
pub async fn signal() {
    match next_signal().await {
        SIGINT => tracing::info!("interrupted"),
        _ => tracing::info!("terminated"),
    }
}

const SIGINT: i32 = 2;
const SIGTERM: i32 = 15;

/// The number of the next SIGINT or SIGTERM this process gets.
async fn next_signal() -> i32 {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => SIGINT,
        _ = term => SIGTERM,
    }
}

/// SIGINT and SIGTERM as they arrive, counted, for a process that stops in steps: the first
/// asks the work to wind down (a load run writes its report), a second asks it to stop at once.
#[derive(Clone, Debug)]
pub struct Interrupt {
    rx: tokio::sync::watch::Receiver<Signals>,
}

/// The stop signals received so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Signals {
    pub count: u32,
    /// The first one's number (SIGINT 2, SIGTERM 15).
    pub first: Option<i32>,
}

/// Triggers an [`Interrupt`] by hand (the signal listener, and tests).
#[derive(Debug)]
pub struct InterruptSender {
    tx: tokio::sync::watch::Sender<Signals>,
}

impl InterruptSender {
    /// Counts one more stop signal `signo`.
    pub fn send(&self, signo: i32) {
        self.tx.send_modify(|s| {
            s.count += 1;
            s.first.get_or_insert(signo);
        });
    }
}

impl Interrupt {
    /// A pair: the sender triggers the interrupt.
    pub fn channel() -> (InterruptSender, Interrupt) {
        let (tx, rx) = tokio::sync::watch::channel(Signals::default());
        (InterruptSender { tx }, Interrupt { rx })
    }

    /// Starts counting this process's SIGINTs and SIGTERMs (from then on they no longer kill
    /// it: whoever holds the [`Interrupt`] must act on them). Needs a tokio runtime.
    pub fn listen() -> Interrupt {
        let (tx, rx) = Self::channel();
        tokio::spawn(async move {
            loop {
                let signo = next_signal().await;
                tx.send(signo);
                let count = tx.tx.borrow().count;
                if count == 1 {
                    tracing::info!(
                        signal = signo,
                        "stop signal: finishing up (again to stop at once)"
                    );
                } else {
                    tracing::warn!(signal = signo, "second stop signal: stopping at once");
                }
            }
        });
        rx
    }

    /// One that never fires.
    pub fn never() -> Interrupt {
        Self::channel().1
    }

    /// The signals so far.
    pub fn signals(&self) -> Signals {
        *self.rx.borrow()
    }

    /// Whether a stop signal came.
    pub fn requested(&self) -> bool {
        self.signals().count > 0
    }

    /// Resolves once `n` stop signals came (never, when the sender is gone first).
    pub async fn at_least(&self, n: u32) {
        let mut rx = self.rx.clone();
        if rx.wait_for(|s| s.count >= n).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Resolves on the first stop signal.
    pub async fn first(&self) {
        self.at_least(1).await
    }

    /// Resolves on the second stop signal.
    pub async fn second(&self) {
        self.at_least(2).await
    }

    /// The conventional exit status of a process a signal stopped: 128 + its number.
    pub fn exit_code(&self) -> std::process::ExitCode {
        std::process::ExitCode::from(
            128 + self.signals().first.unwrap_or(SIGINT).clamp(1, 127) as u8,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn counts_signals_and_wakes_the_waiters() {
        let (tx, interrupt) = Interrupt::channel();
        assert!(!interrupt.requested());
        let waiter = {
            let i = interrupt.clone();
            tokio::spawn(async move { i.second().await })
        };
        tx.send(15);
        interrupt.first().await;
        assert!(!waiter.is_finished());
        tx.send(2);
        waiter.await.unwrap();
        assert_eq!(
            interrupt.signals(),
            Signals {
                count: 2,
                first: Some(15)
            }
        );
        assert_eq!(interrupt.exit_code(), std::process::ExitCode::from(143));
        // A dropped sender never fires.
        let never = Interrupt::never();
        let r = tokio::time::timeout(std::time::Duration::from_millis(20), never.first()).await;
        assert!(r.is_err());
    }
}
