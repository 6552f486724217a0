//! What a clusterloader2 run writes: clusterloader2's own result files (one JSON summary per
//! measurement that has one, named `SUMMARY_CONFIG_TIMESTAMP.json` with the summary named as
//! clusterloader2 names it), and kemu's
//! `cl2-report.json` and `cl2-report.html` with the steps as phases and every measurement's
//! verdict (and, through [`super::junit`], clusterloader2's `junit.xml`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;

use super::measurements::{MeasurementResult, Verdict};

/// One step of the config, as a phase of the run.
#[derive(Clone, Debug, Serialize)]
pub struct StepReport {
    pub name: String,
    /// The config named the step (clusterloader2 names the others for its junit.xml).
    #[serde(skip)]
    pub named: bool,
    pub start_s: f64,
    pub end_s: f64,
    /// Creates, patches and deletes sent.
    pub object_operations: u64,
    pub errors: u64,
    pub first_errors: Vec<String>,
    pub measurements: u64,
    pub failed_measurements: u64,
}

/// `cl2-report.json`.
#[derive(Clone, Debug, Serialize)]
pub struct Cl2Report {
    pub schema: String,
    pub config: String,
    pub name: String,
    pub server: String,
    pub namespace_prefix: String,
    pub nodes: i64,
    pub started_at: String,
    pub duration_s: f64,
    /// No object operation failed and every measurement passed (not computed is not a pass).
    pub passed: bool,
    pub interrupted: bool,
    pub steps: Vec<StepReport>,
    pub measurements: Vec<MeasurementResult>,
    /// clusterloader2's result files written beside this report.
    pub result_files: Vec<String>,
}

pub const SCHEMA_ID: &str = "kemu.dev/cl2-report/v1";

impl Cl2Report {
    pub fn verdict(results: &[MeasurementResult], steps: &[StepReport], interrupted: bool) -> bool {
        !interrupted
            && steps.iter().all(|s| s.errors == 0)
            && results.iter().all(|r| r.verdict == Verdict::Passed)
    }
}

/// Writes the measurements' summaries as clusterloader2 names them; their file names.
pub fn write_result_files(
    dir: &Path,
    config_name: &str,
    timestamp: &str,
    results: &[MeasurementResult],
) -> anyhow::Result<Vec<String>> {
    let mut names = Vec::new();
    for result in results {
        for (stem, body) in &result.summaries {
            let name = format!("{stem}_{config_name}_{timestamp}.json");
            let path = dir.join(&name);
            std::fs::write(&path, serde_json::to_vec_pretty(body)?)
                .with_context(|| format!("writing {}", path.display()))?;
            names.push(name);
        }
    }
    Ok(names)
}

/// The terminal summary.
pub fn summary(report: &Cl2Report) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "clusterloader2 config {:?} on {} nodes: {} ({:.1} s)",
        report.name,
        report.nodes,
        if report.passed { "PASSED" } else { "FAILED" },
        report.duration_s
    );
    for s in &report.steps {
        let _ = writeln!(
            out,
            "  {:<40} {:>8.1} s  {:>6} ops  {:>4} errors",
            s.name,
            s.end_s - s.start_s,
            s.object_operations,
            s.errors
        );
    }
    for line in super::measurements::verdict_lines(&report.measurements) {
        let _ = writeln!(out, "  {line}");
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `cl2-report.html`: the steps and the measurements as tables.
pub fn html(report: &Cl2Report) -> String {
    let mut out = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>kemu clusterloader2 report</title>\
         <style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:4px 8px;text-align:left}.FAILED{color:#b00}\
         .passed{color:#070}</style></head><body>",
    );
    let _ = write!(
        out,
        "<h1>{}: <span class=\"{}\">{}</span></h1><p>{} against {} ({} nodes), {:.1} s, started {}</p>",
        escape(&report.name),
        if report.passed { "passed" } else { "FAILED" },
        if report.passed { "passed" } else { "FAILED" },
        escape(&report.config),
        escape(&report.server),
        report.nodes,
        report.duration_s,
        escape(&report.started_at)
    );
    out.push_str("<h2>Steps</h2><table><tr><th>step</th><th>start (s)</th><th>duration (s)</th><th>operations</th><th>errors</th></tr>");
    for s in &report.steps {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td></tr>",
            escape(&s.name),
            s.start_s,
            s.end_s - s.start_s,
            s.object_operations,
            s.errors
        );
    }
    out.push_str("</table><h2>Measurements</h2><table><tr><th>method</th><th>identifier</th><th>action</th><th>verdict</th><th>details</th></tr>");
    for m in &report.measurements {
        let (class, verdict) = match &m.verdict {
            Verdict::Passed => ("passed", "passed".to_string()),
            Verdict::Failed(why) => ("FAILED", format!("failed: {why}")),
            Verdict::NotComputed(why) => ("FAILED", format!("not computed: {why}")),
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td><code>{}</code></td></tr>",
            escape(&m.method),
            escape(&m.identifier),
            escape(&m.action),
            escape(&verdict),
            escape(&m.details.to_string())
        );
    }
    out.push_str("</table><h2>Result files</h2><ul>");
    for f in &report.result_files {
        let _ = write!(out, "<li>{}</li>", escape(f));
    }
    out.push_str("</ul></body></html>\n");
    out
}

/// Writes `cl2-report.json`, `cl2-report.html` and clusterloader2's `junit.xml`; the paths of
/// the first two.
pub fn write(report: &Cl2Report, dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let json = dir.join("cl2-report.json");
    let page = dir.join("cl2-report.html");
    let junit = dir.join("junit.xml");
    std::fs::write(&json, serde_json::to_vec_pretty(report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    std::fs::write(&page, html(report)).with_context(|| format!("writing {}", page.display()))?;
    std::fs::write(&junit, super::junit::junit(report))
        .with_context(|| format!("writing {}", junit.display()))?;
    Ok((json, page))
}
