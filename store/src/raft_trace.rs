//! raft-rs logs through `slog`; this drain hands its records to `tracing` under the target
//! `store::raft`, so elections (pre-vote, votes ignored inside a leader's lease, terms) show up
//! in a member's log at the level `RUST_LOG` asks for, like the rest of the store.

use std::fmt::{self, Write as _};

use slog::{Drain, Key, Level, OwnedKVList, Record, Serializer, KV};

/// A `slog` drain that re-emits every record as a `tracing` event.
pub struct TracingDrain;

/// The logger to give `RawNode::new`: raft-rs's records, with `member` attached.
pub fn raft_logger(member: &str) -> slog::Logger {
    slog::Logger::root(
        TracingDrain.fuse(),
        slog::o!("member" => member.to_string()),
    )
}

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        if !enabled(record.level()) {
            return Ok(());
        }
        let mut fields = Fields(String::new());
        // A field that cannot be written is left out; the message itself still goes through.
        let _ = record.kv().serialize(record, &mut fields);
        let _ = values.serialize(record, &mut fields);
        let message = record.msg().to_string();
        let fields = fields.0;
        // raft-rs reports every proposal or read it drops for want of a leader at info: during an
        // election under load that is thousands of lines saying one thing, so they go to debug.
        let level = match record.level() {
            Level::Info if message.contains("dropping") => Level::Debug,
            level => level,
        };
        if !enabled(level) {
            return Ok(());
        }
        match level {
            Level::Critical | Level::Error => {
                tracing::error!(target: "store::raft", "{message}{fields}")
            }
            Level::Warning => tracing::warn!(target: "store::raft", "{message}{fields}"),
            Level::Info => tracing::info!(target: "store::raft", "{message}{fields}"),
            Level::Debug => tracing::debug!(target: "store::raft", "{message}{fields}"),
            Level::Trace => tracing::trace!(target: "store::raft", "{message}{fields}"),
        }
        Ok(())
    }
}

/// Whether `tracing` would keep a record of this level, so raft-rs's many debug records cost
/// nothing when nobody reads them.
fn enabled(level: Level) -> bool {
    match level {
        Level::Critical | Level::Error => {
            tracing::enabled!(target: "store::raft", tracing::Level::ERROR)
        }
        Level::Warning => tracing::enabled!(target: "store::raft", tracing::Level::WARN),
        Level::Info => tracing::enabled!(target: "store::raft", tracing::Level::INFO),
        Level::Debug => tracing::enabled!(target: "store::raft", tracing::Level::DEBUG),
        Level::Trace => tracing::enabled!(target: "store::raft", tracing::Level::TRACE),
    }
}

/// Key-value pairs written as ` key=value` after the message.
struct Fields(String);

impl Serializer for Fields {
    fn emit_arguments(&mut self, key: Key, value: &fmt::Arguments<'_>) -> slog::Result {
        // Writing to a String cannot fail.
        let _ = write!(self.0, " {key}={value}");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::fmt::MakeWriter;

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .map_err(|_| std::io::ErrorKind::Other)?
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    #[test]
    fn raft_records_reach_tracing_with_their_fields_and_level() {
        let out = Captured::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(out.clone())
            .with_max_level(tracing::Level::INFO)
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, || {
            let logger = raft_logger("s1");
            slog::info!(logger, "became pre-candidate at term {}", 7; "remaining ticks" => 3);
            slog::debug!(logger, "a debug record nobody asked for");
            slog::info!(logger, "no leader at term {}; dropping proposal", 7);
        });
        let text = String::from_utf8(out.0.lock().expect("not poisoned").clone())
            .expect("the log is UTF-8");
        assert!(text.contains("INFO store::raft"), "{text}");
        assert!(text.contains("became pre-candidate at term 7"), "{text}");
        assert!(text.contains("remaining ticks=3"), "{text}");
        assert!(text.contains("member=s1"), "{text}");
        assert!(!text.contains("debug record"), "{text}");
        assert!(!text.contains("dropping proposal"), "{text}");
    }
}
