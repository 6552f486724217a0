//! The chaos report: `chaos-report.json`, an HTML section (`chaos-section.html`) the load
//! report can include or that stands alone, and the raw register history
//! (`chaos-history.json`) for re-checking a failure.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::actions::{ActionRecord, ScheduledAction};
use super::availability::AvailabilityReport;
use super::convergence::ConvergenceReport;
use super::history::Operation;
use super::linearizability::{LinearizabilityReport, Verdict};
use super::service::{ServerProbes, ServiceReport};
use super::watch_check::WatchCheckReport;
use load::accounting::AccountingReport;

pub const SCHEMA_ID: &str = "kemu.dev/chaos-report/v1";

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AcknowledgedWrites {
    pub passed: bool,
    pub checked: usize,
    pub missing: usize,
    pub examples: Vec<String>,
}

/// Counts of the register history.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HistorySummary {
    pub operations: usize,
    pub reads: usize,
    pub writes: usize,
    pub cas: usize,
    /// Operations without an answer (possibly applied).
    pub ambiguous: usize,
    /// Operations left after narrowing the ambiguous ones with the store's history.
    pub after_narrowing: usize,
}

impl HistorySummary {
    pub fn of(history: &[Operation], after_narrowing: usize) -> HistorySummary {
        use super::history::RegisterInput;
        let count = |f: &dyn Fn(&Operation) -> bool| history.iter().filter(|o| f(o)).count();
        HistorySummary {
            operations: history.len(),
            reads: count(&|o| matches!(o.input, RegisterInput::Read)),
            writes: count(&|o| matches!(o.input, RegisterInput::Write { .. })),
            cas: count(&|o| matches!(o.input, RegisterInput::Cas { .. })),
            ambiguous: count(&|o| o.is_ambiguous()),
            after_narrowing,
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChaosReport {
    pub schema: String,
    pub started_at: String,
    pub duration_s: f64,
    pub passed: bool,
    /// A stop signal (SIGINT/SIGTERM) ended the run before its duration (or, under `kemu run`,
    /// cut the load short): the actions and checks cover the run until then, and `passed` is
    /// false.
    #[serde(default)]
    pub interrupted: bool,
    pub prefix: String,
    pub schedule: Vec<ScheduledAction>,
    /// What was done, timestamped (seconds since the run's start).
    pub actions: Vec<ActionRecord>,
    pub history: HistorySummary,
    /// Timed-out operations as possibly applied (return time +∞, output unknown).
    pub linearizability: LinearizabilityReport,
    /// The same history with timed-out operations narrowed by the store's verified history.
    pub linearizability_narrowed: LinearizabilityReport,
    pub watch: WatchCheckReport,
    pub acknowledged_writes: AcknowledgedWrites,
    pub convergence: ConvergenceReport,
    pub availability: AvailabilityReport,
    /// Recovery of API writes (and, with a load, of scheduling and pods Running) after each
    /// action; absent for a store-only run.
    #[serde(default)]
    pub service: Option<ServiceReport>,
    /// The load's pods, when a load ran alongside.
    pub accounting: Option<AccountingReport>,
    /// The load's pod watches (through the API server's watch cache, which its store watch
    /// feeds) against the store's history of the same pods, when a load ran alongside.
    #[serde(default)]
    pub load_watch: Option<WatchCheckReport>,
    /// Time each checker took.
    pub checker_ms: BTreeMap<String, f64>,
    #[serde(skip)]
    pub register_history: Vec<Operation>,
    /// Every API server's probes, for [`ServiceReport`] once the load's pods are known.
    #[serde(skip)]
    pub api_probes: Vec<ServerProbes>,
}

/// The files [`ChaosReport::write`] produced.
pub struct ReportFiles {
    pub json: PathBuf,
    pub html: PathBuf,
    pub history: PathBuf,
}

impl ChaosReport {
    /// One line per check.
    pub fn summary(&self) -> String {
        let mark = |ok: bool| if ok { "pass" } else { "FAIL" };
        let mut s = String::new();
        let lin_ok = self.linearizability.passed || self.linearizability_narrowed.passed;
        let _ = writeln!(
            s,
            "chaos: {} actions over {:.0}s{}; {} register ops ({} ambiguous)",
            self.actions.iter().filter(|a| a.disruptive).count(),
            self.duration_s,
            if self.interrupted {
                " (INTERRUPTED by a stop signal)"
            } else {
                ""
            },
            self.history.operations,
            self.history.ambiguous
        );
        let _ = writeln!(
            s,
            "  linearizability   {}  ({:.0} ms; narrowed {})",
            mark(lin_ok),
            self.linearizability.duration_ms,
            mark(self.linearizability_narrowed.passed)
        );
        let _ = writeln!(
            s,
            "  watch             {}  ({} events, {} missing, {} duplicated, {} out of order)",
            mark(self.watch.passed),
            self.watch.recorded_events,
            self.watch.missing,
            self.watch.duplicates,
            self.watch.out_of_order
        );
        let _ = writeln!(
            s,
            "  acknowledged      {}  ({} writes, {} missing)",
            mark(self.acknowledged_writes.passed),
            self.acknowledged_writes.checked,
            self.acknowledged_writes.missing
        );
        let _ = writeln!(
            s,
            "  convergence       {}  {}",
            mark(self.convergence.passed),
            self.convergence.detail
        );
        let recover = self
            .availability
            .recover
            .as_ref()
            .map(|r| {
                format!(
                    "recover p50 {:.2}s p99 {:.2}s max {:.2}s over {}",
                    r.p50_s, r.p99_s, r.max_s, r.count
                )
            })
            .unwrap_or_else(|| "no disruptive actions".into());
        let _ = writeln!(
            s,
            "  availability      {}  (error rate {:.2}%; {recover})",
            mark(self.availability.passed),
            self.availability.error_rate * 100.0
        );
        if let Some(service) = &self.service {
            let _ = writeln!(
                s,
                "  service           {}  (API probe error rate {:.2}%{}; {})",
                mark(service.passed),
                service.api_error_rate * 100.0,
                service.errors_line(),
                service.stats_line()
            );
        }
        if let Some(a) = &self.accounting {
            let _ = writeln!(
                s,
                "  accounting        {}  ({} creates, {} deletes acknowledged: {} lost, {} resurrected, {} duplicated, {} not running)",
                mark(a.passed),
                a.acknowledged_creates,
                a.acknowledged_deletes,
                a.lost,
                a.resurrected,
                a.duplicated,
                a.not_running
            );
        }
        if let Some(w) = &self.load_watch {
            let _ = writeln!(
                s,
                "  load watches      {}  ({} watches, {} events, {} missing, {} duplicated, {} out of order, {} phantom)",
                mark(w.passed),
                w.watches.len(),
                w.recorded_events,
                w.missing,
                w.duplicates,
                w.out_of_order,
                w.phantom
            );
        }
        let _ = write!(
            s,
            "chaos: {}",
            if self.interrupted {
                "INTERRUPTED"
            } else if self.passed {
                "PASSED"
            } else {
                "FAILED"
            }
        );
        s
    }

    /// Writes the JSON report, the HTML section and the history into `dir`.
    pub fn write(&self, dir: &Path) -> anyhow::Result<ReportFiles> {
        std::fs::create_dir_all(dir)?;
        let files = ReportFiles {
            json: dir.join("chaos-report.json"),
            html: dir.join("chaos-section.html"),
            history: dir.join("chaos-history.json"),
        };
        std::fs::write(&files.json, serde_json::to_vec_pretty(self)?)?;
        std::fs::write(&files.html, self.html_section())?;
        std::fs::write(&files.history, serde_json::to_vec(&self.register_history)?)?;
        Ok(files)
    }

    /// This report as a section of the load's report (`kemu run`): its JSON under `chaos`, its
    /// HTML section, and its disruptive actions marked on the load's charts. The two runs'
    /// clocks start at different moments; `load_started_at` (the load's wall-clock start,
    /// RFC 3339) gives the offset.
    pub fn as_load_section(
        &self,
        load_started_at: &str,
    ) -> anyhow::Result<load::report::AttachedSection> {
        let offset = load::report::seconds_between(load_started_at, &self.started_at);
        let markers = self
            .actions
            .iter()
            .filter(|a| a.disruptive)
            .map(|a| ((a.at_s + offset).max(0.0), a.describe()))
            .collect();
        Ok(load::report::AttachedSection {
            key: "chaos".into(),
            json: serde_json::to_value(self)?,
            html: format!(
                "<p>Red dashed lines on the charts below mark the chaos actions (details in the Chaos section).</p>{}",
                self.html_section()
            ),
            markers,
            summary: self.summary(),
        })
    }

    /// A self-contained `<section>`: the checks, the actions, and the probe error rate over
    /// time with every action marked.
    pub fn html_section(&self) -> String {
        let mut h = String::new();
        let mark = |ok: bool| {
            if ok {
                "<td class=pass>pass</td>"
            } else {
                "<td class=fail>FAIL</td>"
            }
        };
        let _ = writeln!(h, "<section id=chaos><h2>Chaos</h2>");
        let _ = writeln!(
            h,
            "<style>#chaos td.pass{{color:#070}}#chaos td.fail{{color:#b00;font-weight:bold}}#chaos table{{border-collapse:collapse}}#chaos td,#chaos th{{padding:2px 8px;border-bottom:1px solid #ddd;text-align:left}}</style>"
        );
        let _ = writeln!(
            h,
            "<table><tr><th>check</th><th>result</th><th>detail</th></tr>"
        );
        let lin_detail = self
            .linearizability
            .keys
            .iter()
            .filter_map(|k| match &k.verdict {
                Verdict::Violation { explanation, .. } => Some(explanation.clone()),
                Verdict::Undecided { steps } => {
                    Some(format!("{}: undecided after {steps} steps", k.key))
                }
                Verdict::Linearizable => None,
            })
            .collect::<Vec<_>>()
            .join("; ");
        let rows = [
            (
                "linearizability",
                self.linearizability.passed || self.linearizability_narrowed.passed,
                format!(
                    "{} ops on {} keys, {} ambiguous, {:.0} ms. {}",
                    self.history.operations,
                    self.linearizability.keys.len(),
                    self.history.ambiguous,
                    self.linearizability.duration_ms,
                    lin_detail
                ),
            ),
            (
                "watch (ordered, unique, gap-free)",
                self.watch.passed,
                format!(
                    "{} events, revisions {}..{}; {}",
                    self.watch.recorded_events,
                    self.watch.from_revision,
                    self.watch.to_revision,
                    self.watch.examples.join("; ")
                ),
            ),
            (
                "acknowledged writes in the store's history",
                self.acknowledged_writes.passed,
                format!(
                    "{} checked, {} missing",
                    self.acknowledged_writes.checked, self.acknowledged_writes.missing
                ),
            ),
            (
                "members converge",
                self.convergence.passed,
                format!(
                    "{} {}",
                    self.convergence
                        .members
                        .iter()
                        .map(|m| format!("{}@{}={:016x}", m.name, m.revision, m.hash))
                        .collect::<Vec<_>>()
                        .join(" "),
                    self.convergence.detail
                ),
            ),
            (
                "availability",
                self.availability.passed,
                match &self.availability.recover {
                    Some(r) => format!(
                        "time to recover p50 {:.2}s, p99 {:.2}s, max {:.2}s; error rate {:.2}%",
                        r.p50_s,
                        r.p99_s,
                        r.max_s,
                        self.availability.error_rate * 100.0
                    ),
                    None => "no disruptive action".into(),
                },
            ),
        ];
        for (name, ok, detail) in rows {
            let _ = writeln!(
                h,
                "<tr><td>{name}</td>{}<td>{}</td></tr>",
                mark(ok),
                escape(&detail)
            );
        }
        if let Some(a) = &self.accounting {
            let _ = writeln!(
                h,
                "<tr><td>pods accounted for</td>{}<td>{} lost, {} resurrected, {} duplicated, {} not Running</td></tr>",
                mark(a.passed),
                a.lost,
                a.resurrected,
                a.duplicated,
                a.not_running
            );
        }
        if let Some(w) = &self.load_watch {
            let _ = writeln!(
                h,
                "<tr><td>load's pod watches against the store</td>{}<td>{}</td></tr>",
                mark(w.passed),
                escape(&format!(
                    "{} watches, {} events, revisions {}..{}, {} missing, {} duplicated, {} out of order, {} phantom; {}; {}",
                    w.watches.len(),
                    w.recorded_events,
                    w.from_revision,
                    w.to_revision,
                    w.missing,
                    w.duplicates,
                    w.out_of_order,
                    w.phantom,
                    w.watches.join("; "),
                    w.examples.join("; ")
                ))
            );
        }
        if let Some(service) = &self.service {
            let _ = writeln!(
                h,
                "<tr><td>service recovery (API writes, scheduling, pods Running)</td>{}<td>{}</td></tr>",
                mark(service.passed),
                escape(&format!(
                    "API probe error rate {:.2}% over {} writes; {}",
                    service.api_error_rate * 100.0,
                    service.api_probes,
                    service.stats_line()
                ))
            );
        }
        let _ = writeln!(h, "</table>");
        let _ = writeln!(h, "{}", self.timeline_svg());
        let _ = writeln!(
            h,
            "<h3>Actions</h3><table><tr><th>t (s)</th><th>action</th><th>target</th><th>store writes back after (s)</th><th>service back after (s)</th><th>detail</th></tr>"
        );
        for a in &self.actions {
            let recovered = self
                .availability
                .recoveries
                .iter()
                .find(|r| a.disruptive && (r.at_s - a.at_s).abs() < 1e-9)
                .and_then(|r| r.recover_s)
                .map(|s| format!("{s:.2}"))
                .unwrap_or_default();
            let service = self
                .service
                .iter()
                .flat_map(|s| s.recoveries.iter())
                .find(|r| a.disruptive && (r.at_s - a.at_s).abs() < 1e-9)
                .map(|r| {
                    r.measures
                        .iter()
                        .map(|m| match (m.recover_s, &m.note) {
                            (Some(t), _) => format!("{} {t:.2}", m.measure),
                            (None, Some(note)) => format!("{}: {note}", m.measure),
                            (None, None) => format!("{}: NEVER", m.measure),
                        })
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .unwrap_or_default();
            let _ = writeln!(
                h,
                "<tr><td>{:.2}</td><td>{}</td><td>{}</td><td>{recovered}</td><td>{}</td><td>{}</td></tr>",
                a.at_s,
                a.kind.as_str(),
                escape(&a.target),
                escape(&service),
                escape(&a.detail)
            );
        }
        let _ = writeln!(h, "</table></section>");
        h
    }

    /// The probe error rate per second as bars, with a red line at each disruptive action.
    fn timeline_svg(&self) -> String {
        let (w, ht) = (800.0, 120.0);
        let timeline = &self.availability.timeline;
        let end = (timeline.len() as f64 * self.availability.bucket_s)
            .max(self.duration_s)
            .max(1.0);
        let x = |t: f64| t / end * w;
        let mut s = format!(
            "<h3>Probe write error rate (per {:.0}s) and actions</h3><svg width={w} height={} style='background:#fafafa'>",
            self.availability.bucket_s,
            ht + 20.0
        );
        for b in timeline {
            let bh = b.error_rate * ht;
            let _ = write!(
                s,
                "<rect x={:.1} y={:.1} width={:.1} height={bh:.1} fill='#e88'><title>{:.0}s: {}/{} failed</title></rect>",
                x(b.t),
                ht - bh,
                (x(self.availability.bucket_s) - 1.0).max(1.0),
                b.t,
                b.failed,
                b.sent
            );
        }
        for a in self.actions.iter() {
            let colour = if a.disruptive { "#c00" } else { "#090" };
            let _ = write!(
                s,
                "<line x1={0:.1} x2={0:.1} y1=0 y2={ht} stroke='{colour}'><title>{1}</title></line>",
                x(a.at_s),
                escape(&a.describe())
            );
        }
        let _ = write!(
            s,
            "<text x=0 y={} font-size=11>0 s</text><text x={} y={} font-size=11 text-anchor=end>{end:.0} s</text></svg>",
            ht + 15.0,
            w,
            ht + 15.0
        );
        s
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
