//! The HTML report: one self-contained file, charts drawn as inline SVG here (no scripts, no
//! external styles).

use std::fmt::Write as _;

use super::report::{AttachedSection, LoadReport, Percentiles, PhaseStatus, LATENCIES};

const PALETTE: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

const WIDTH: f64 = 860.0;
const HEIGHT: f64 = 280.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 160.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 40.0;

/// One line of a chart.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A round step giving about `target` ticks over `span`.
fn nice_step(span: f64, target: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / target;
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    let nice = if fraction < 1.5 {
        1.0
    } else if fraction < 3.0 {
        2.0
    } else if fraction < 7.0 {
        5.0
    } else {
        10.0
    };
    nice * magnitude
}

fn label(v: f64) -> String {
    if v.abs() >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if v.abs() >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v.abs() >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A line chart with axes, ticks, a legend and shaded phase spans `(start, end, name)`.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    spans: &[(f64, f64, String)],
) -> String {
    line_chart_marked(title, x_label, y_label, series, spans, &[])
}

/// [`line_chart`] with vertical markers `(x, what)`: what an attached section marks (a chaos
/// run's actions).
pub fn line_chart_marked(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    spans: &[(f64, f64, String)],
    markers: &[(f64, String)],
) -> String {
    let mut svg = String::new();
    let all = series.iter().flat_map(|s| s.points.iter());
    let (mut x_max, mut y_max) = (1e-9f64, 1e-9f64);
    for &(x, y) in all {
        x_max = x_max.max(x);
        y_max = y_max.max(y);
    }
    for (_, end, _) in spans {
        x_max = x_max.max(*end);
    }
    for (x, _) in markers {
        x_max = x_max.max(*x);
    }
    let x_step = nice_step(x_max, 8.0);
    let y_step = nice_step(y_max, 5.0);
    let x_top = (x_max / x_step).ceil().max(1.0) * x_step;
    let y_top = (y_max / y_step).ceil().max(1.0) * y_step;
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let px = |x: f64| LEFT + x / x_top * plot_w;
    let py = |y: f64| TOP + plot_h - y / y_top * plot_h;
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="11">"#
    );
    let _ = write!(
        svg,
        r#"<text x="{LEFT}" y="18" font-size="13" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for (i, (start, end, name)) in spans.iter().enumerate() {
        let fill = if i % 2 == 0 { "#f3f3f3" } else { "#e8eef6" };
        let _ = write!(
            svg,
            r#"<rect x="{:.1}" y="{TOP}" width="{:.1}" height="{plot_h}" fill="{fill}"><title>{}</title></rect>"#,
            px(*start),
            (px(*end) - px(*start)).max(0.5),
            escape(name)
        );
    }
    for (x, what) in markers {
        let _ = write!(
            svg,
            r##"<line x1="{x:.1}" x2="{x:.1}" y1="{TOP}" y2="{:.1}" stroke="#c00" stroke-dasharray="4 3"><title>{}</title></line><text x="{x:.1}" y="{:.1}" fill="#c00" text-anchor="middle">✕<title>{}</title></text>"##,
            TOP + plot_h,
            escape(what),
            TOP - 2.0,
            escape(what),
            x = px(*x)
        );
    }
    let mut y = 0.0;
    while y <= y_top + y_step * 0.01 {
        let _ = write!(
            svg,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            LEFT + plot_w,
            py(y),
            py(y),
            LEFT - 6.0,
            py(y) + 4.0,
            label(y)
        );
        y += y_step;
    }
    let mut x = 0.0;
    while x <= x_top + x_step * 0.01 {
        let _ = write!(
            svg,
            r##"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#999"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            px(x),
            px(x),
            TOP + plot_h,
            TOP + plot_h + 4.0,
            px(x),
            TOP + plot_h + 16.0,
            label(x)
        );
        x += x_step;
    }
    let _ = write!(
        svg,
        r##"<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#999"/><text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text><text x="14" y="{:.1}" text-anchor="middle" transform="rotate(-90 14 {:.1})">{}</text>"##,
        LEFT + plot_w / 2.0,
        HEIGHT - 6.0,
        escape(x_label),
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(y_label)
    );
    for (i, s) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        if s.points.len() == 1 {
            let (x, y) = s.points[0];
            let _ = write!(
                svg,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px(x),
                py(y)
            );
        } else if !s.points.is_empty() {
            let points: Vec<String> = s
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{color}" stroke-width="1.6" points="{}"/>"#,
                points.join(" ")
            );
        }
        let ly = TOP + 10.0 + i as f64 * 16.0;
        let lx = WIDTH - RIGHT + 12.0;
        let _ = write!(
            svg,
            r#"<rect x="{lx}" y="{:.1}" width="12" height="3" fill="{color}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            ly - 3.0,
            lx + 16.0,
            ly + 1.0,
            escape(&s.name)
        );
    }
    svg.push_str("</svg>");
    svg
}

/// Horizontal stacked bars: one row per `(label, [(segment, value)])`.
fn stacked_bars(title: &str, unit: &str, rows: &[(String, Vec<(String, f64)>)]) -> String {
    let row_h = 26.0;
    let height = TOP + rows.len() as f64 * (row_h + 10.0) + BOTTOM;
    let left = 120.0;
    let plot_w = WIDTH - left - RIGHT;
    let max = rows
        .iter()
        .map(|(_, segs)| segs.iter().map(|(_, v)| v.max(0.0)).sum::<f64>())
        .fold(1e-9, f64::max);
    let mut svg = String::new();
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11"><text x="{left}" y="18" font-size="13" font-weight="bold">{}</text>"#,
        escape(title)
    );
    for (r, (name, segments)) in rows.iter().enumerate() {
        let y = TOP + r as f64 * (row_h + 10.0);
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            left - 8.0,
            y + row_h / 2.0 + 4.0,
            escape(name)
        );
        let mut x = left;
        for (i, (segment, value)) in segments.iter().enumerate() {
            let w = value.max(0.0) / max * plot_w;
            // A segment named "_…" only positions the next one.
            let color = if segment.starts_with('_') {
                "none"
            } else {
                PALETTE[i % PALETTE.len()]
            };
            let _ = write!(
                svg,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{w:.1}" height="{row_h}" fill="{color}"><title>{}: {value:.1} {unit}</title></rect>"#,
                escape(segment)
            );
            if w > 50.0 && !segment.starts_with('_') {
                let _ = write!(
                    svg,
                    r##"<text x="{:.1}" y="{:.1}" fill="#fff">{value:.0}</text>"##,
                    x + 4.0,
                    y + row_h / 2.0 + 4.0
                );
            }
            x += w;
        }
    }
    if let Some((_, segments)) = rows.first() {
        let shown = segments
            .iter()
            .enumerate()
            .filter(|(_, (s, _))| !s.starts_with('_'));
        for (row, (i, (segment, _))) in shown.enumerate() {
            let ly = TOP + 10.0 + row as f64 * 16.0;
            let lx = WIDTH - RIGHT + 12.0;
            let _ = write!(
                svg,
                r#"<rect x="{lx}" y="{:.1}" width="12" height="8" fill="{}"/><text x="{:.1}" y="{:.1}">{} ({unit})</text>"#,
                ly - 7.0,
                PALETTE[i % PALETTE.len()],
                lx + 16.0,
                ly + 1.0,
                escape(segment)
            );
        }
    }
    svg.push_str("</svg>");
    svg
}

fn percentile_row(name: &str, p: &Percentiles) -> String {
    format!(
        "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td></tr>",
        escape(name),
        p.count,
        p.p50,
        p.p90,
        p.p99,
        p.max,
        p.mean
    )
}

fn phase_name(kind: &str, cycle: u32) -> String {
    if cycle > 0 {
        format!("churn {cycle} {kind}")
    } else {
        kind.to_string()
    }
}

/// The whole report page, with the sections other tools attached (after the SLO table, their
/// markers on the charts).
pub fn render(report: &LoadReport, summary: &str, attached: &[AttachedSection]) -> String {
    let mut h = String::new();
    let verdict = super::report::verdict(report);
    let _ = write!(
        h,
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>kemu load {} — {verdict}</title><style>\
body{{font-family:sans-serif;margin:24px;color:#222}}table{{border-collapse:collapse;margin:8px 0 20px}}\
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}td:first-child,th:first-child{{text-align:left}}\
.ok{{color:#2a7d2a}}.bad{{color:#b00}}pre{{background:#f6f6f6;padding:10px;overflow:auto}}svg{{display:block;margin:8px 0 24px}}\
</style></head><body>",
        escape(&report.run_id)
    );
    let _ = write!(
        h,
        "<h1>kemu load <code>{}</code>: <span class=\"{}\">{verdict}</span></h1><p>Server {} · started {} · {:.1} s · {} pods at {}/s over {} namespace(s)</p>",
        escape(&report.run_id),
        if report.passed { "ok" } else { "bad" },
        escape(&report.server),
        escape(&report.started_at),
        report.duration_s,
        report.plan.pods,
        report.plan.rate,
        report.plan.namespaces
    );
    if report.interrupted {
        let _ = write!(
            h,
            "<p class=\"bad\"><b>Interrupted</b> at {:.1} s by a stop signal: this report holds what was measured until then; the phases the signal kept from starting are marked not started.</p>",
            report.interrupted_at_s.unwrap_or(report.duration_s)
        );
    }
    h.push_str("<h2>SLO</h2><table><tr><th>check</th><th>observed</th><th>threshold</th><th>result</th></tr>");
    for c in &report.slo {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td class=\"{}\">{}</td></tr>",
            escape(&c.name),
            c.observed
                .map(|o| format!("{o:.1}"))
                .unwrap_or_else(|| "-".into()),
            c.threshold,
            if c.passed { "ok" } else { "bad" },
            if c.passed { "ok" } else { "FAILED" }
        );
    }
    h.push_str("</table>");

    let spans: Vec<(f64, f64, String)> = report
        .phases
        .iter()
        .filter(|p| p.status != PhaseStatus::NotStarted)
        .map(|p| (p.start_s, p.end_s, phase_name(&p.kind, p.cycle)))
        .collect();
    let markers: Vec<(f64, String)> = attached
        .iter()
        .flat_map(|s| s.markers.iter().cloned())
        .collect();
    for section in attached {
        h.push_str(&section.html);
    }

    h.push_str("<h2>Pod startup latency over time</h2><p>pod_startup (create sent → Running seen on the watch) of the pods that reached Running in each second. Shaded bands are the run's phases.</p>");
    let pick = |f: fn(&Percentiles) -> f64| -> Vec<(f64, f64)> {
        report
            .timeline
            .iter()
            .filter_map(|b| Some((b.t, f(b.pod_startup_ms.as_ref()?))))
            .collect()
    };
    h.push_str(&line_chart_marked(
        "pod_startup percentiles",
        "seconds since start",
        "ms",
        &[
            Series {
                name: "p50".into(),
                points: pick(|p| p.p50),
            },
            Series {
                name: "p90".into(),
                points: pick(|p| p.p90),
            },
            Series {
                name: "p99".into(),
                points: pick(|p| p.p99),
            },
            Series {
                name: "max".into(),
                points: pick(|p| p.max),
            },
        ],
        &spans,
        &markers,
    ));

    h.push_str("<h2>Throughput over time</h2>");
    let counts = |f: fn(&super::report::TimelineBucket) -> u64| -> Vec<(f64, f64)> {
        report.timeline.iter().map(|b| (b.t, f(b) as f64)).collect()
    };
    h.push_str(&line_chart_marked(
        "per second",
        "seconds since start",
        "pods / s",
        &[
            Series {
                name: "creates sent".into(),
                points: counts(|b| b.creates_sent),
            },
            Series {
                name: "reached Running".into(),
                points: counts(|b| b.running),
            },
            Series {
                name: "deletes sent".into(),
                points: counts(|b| b.deletes_sent),
            },
            Series {
                name: "gone".into(),
                points: counts(|b| b.gone),
            },
        ],
        &spans,
        &markers,
    ));

    h.push_str("<h2>Phase breakdown</h2><p>Where a pod's startup goes, client clock: create sent → bound seen on the watch (create_to_schedule) → Running seen on the watch (schedule_to_run). run_to_watch (node's container start → seen) is part of schedule_to_run.</p>");
    let lat = |name: &str| report.latency_ms.get(name).cloned().unwrap_or_default();
    let (c2s, s2r) = (lat("create_to_schedule"), lat("schedule_to_run"));
    let rows: Vec<(String, Vec<(String, f64)>)> = [
        ("p50", c2s.p50, s2r.p50),
        ("p90", c2s.p90, s2r.p90),
        ("p99", c2s.p99, s2r.p99),
    ]
    .iter()
    .map(|(q, a, b)| {
        (
            q.to_string(),
            vec![
                ("create_to_schedule".to_string(), *a),
                ("schedule_to_run".to_string(), *b),
            ],
        )
    })
    .collect();
    h.push_str(&stacked_bars("pod startup by stage", "ms", &rows));
    let phase_rows: Vec<(String, Vec<(String, f64)>)> = report
        .phases
        .iter()
        .filter(|p| p.status != PhaseStatus::NotStarted)
        .map(|p| {
            (
                phase_name(&p.kind, p.cycle),
                vec![
                    ("_before".to_string(), p.start_s),
                    ("duration".to_string(), p.end_s - p.start_s),
                ],
            )
        })
        .collect();
    h.push_str(&stacked_bars("run phases", "s", &phase_rows));
    h.push_str("<table><tr><th>phase</th><th>start s</th><th>seconds</th><th>ops</th><th>target/s</th><th>achieved/s</th><th>send lag p99 ms</th><th>status</th></tr>");
    for p in &report.phases {
        let opt = |v: Option<f64>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
            escape(&phase_name(&p.kind, p.cycle)),
            p.start_s,
            p.end_s - p.start_s,
            p.ops.map(|o| o.to_string()).unwrap_or_else(|| "-".into()),
            opt(p.target_rate),
            opt(p.achieved_rate),
            opt(p.send_lag_ms.as_ref().map(|l| l.p99)),
            if p.status == PhaseStatus::Completed && p.completed { "ok" } else { "bad" },
            match p.status {
                PhaseStatus::Completed if !p.completed => "timed out",
                other => other.as_str(),
            }
        );
    }
    h.push_str("</table>");

    h.push_str("<h2>Latencies</h2><table><tr><th>client clock (ms)</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>mean</th></tr>");
    for name in LATENCIES {
        h.push_str(&percentile_row(name, &lat(name)));
    }
    let s = &report.server_stamped_latency_ms;
    let _ = write!(
        h,
        "</table><table><tr><th>server-stamped, resolution {} ms</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>mean</th></tr>",
        s.resolution_ms
    );
    for (name, p) in [
        ("create_to_schedule", &s.create_to_schedule),
        ("schedule_to_run", &s.schedule_to_run),
        ("run_to_watch", &s.run_to_watch),
        ("pod_startup", &s.pod_startup),
    ] {
        h.push_str(&percentile_row(name, p));
    }
    h.push_str("</table>");
    if !report.workloads.is_empty() {
        h.push_str("<h2>Workloads</h2><p>Per kind: objects rolled out of those created, pods Running of those expected; pod_startup is a pod's first sight on the watch → Running seen, rollout an object's create sent → its last expected pod Running.</p><table><tr><th>kind (ms)</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>mean</th></tr>");
        for k in &report.workloads {
            let kind = k.kind.as_str();
            let _ = write!(
                h,
                "<tr><th colspan=7>{kind}: {} of {} objects rolled out, {} of {} pods Running</th></tr>",
                k.rolled_out, k.objects, k.pods_running, k.pods_expected
            );
            h.push_str(&percentile_row(
                &format!("{kind} pod_startup"),
                &k.pod_startup_ms,
            ));
            h.push_str(&percentile_row(&format!("{kind} rollout"), &k.rollout_ms));
        }
        h.push_str("</table>");
    }
    if let Some(c) = &report.claims {
        let left = |v: Option<u64>| v.map_or("not listed".to_string(), |v| v.to_string());
        let _ = write!(
            h,
            "<h2>Claims</h2><p>Bare pods: {} claims sent, {} created, {} Bound, {} attached, {} deleted, {} gone; left at the end: {} claims, {} volumes. bind is a claim's create sent → Bound seen, attach Bound seen → its volume seen attached.</p><table><tr><th>latency (ms)</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>mean</th></tr>",
            c.sent, c.created, c.bound, c.attached, c.deleted, c.gone, left(c.left), left(c.volumes_left)
        );
        h.push_str(&percentile_row("bind", &c.bind_ms));
        h.push_str(&percentile_row("attach", &c.attach_ms));
        h.push_str(&percentile_row(
            "pod_startup with a claim",
            &c.pod_startup_with_claims_ms,
        ));
        h.push_str(&percentile_row(
            "pod_startup without",
            &c.pod_startup_without_claims_ms,
        ));
        for k in &c.workloads {
            let kind = k.kind.as_str();
            let _ = write!(
                h,
                "<tr><th colspan=7>{kind}: {} claims seen, {} Bound, {} attached, {} deleted with their object, {} gone; bind from the claim's first sight</th></tr>",
                k.seen, k.bound, k.attached, k.deleted, k.gone
            );
            h.push_str(&percentile_row(&format!("{kind} bind"), &k.bind_ms));
            h.push_str(&percentile_row(&format!("{kind} attach"), &k.attach_ms));
        }
        h.push_str("</table>");
    }
    h.push_str("<h2>API calls</h2><table><tr><th>call</th><th>count</th><th>errors</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>max ms</th><th>codes</th></tr>");
    for c in &report.api_calls {
        let codes: Vec<String> = c.codes.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let _ = write!(
            h,
            "<tr><td>{} {}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td></tr>",
            escape(&c.verb),
            escape(&c.resource),
            c.count,
            c.errors,
            c.latency_ms.p50,
            c.latency_ms.p90,
            c.latency_ms.p99,
            c.latency_ms.max,
            escape(&codes.join(", "))
        );
    }
    h.push_str("</table>");

    h.push_str("<h2>Components</h2>");
    if report.processes.is_empty() {
        h.push_str("<p>No process was sampled.</p>");
    } else {
        let cpu: Vec<Series> = report
            .processes
            .iter()
            .map(|p| Series {
                name: p.name.clone(),
                points: p.samples.iter().map(|s| (s.t, s.cpu_percent)).collect(),
            })
            .collect();
        h.push_str(&line_chart_marked(
            "CPU (100 = one core)",
            "seconds since start",
            "%",
            &cpu,
            &spans,
            &markers,
        ));
        let rss: Vec<Series> = report
            .processes
            .iter()
            .map(|p| Series {
                name: p.name.clone(),
                points: p
                    .samples
                    .iter()
                    .map(|s| (s.t, s.rss_bytes as f64 / (1024.0 * 1024.0)))
                    .collect(),
            })
            .collect();
        h.push_str(&line_chart_marked(
            "resident memory",
            "seconds since start",
            "MiB",
            &rss,
            &spans,
            &markers,
        ));
    }
    let _ = writeln!(
        h,
        "<h2>Summary</h2><pre>{}</pre></body></html>",
        escape(summary)
    );
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(nice_step(100.0, 5.0), 20.0);
        assert_eq!(nice_step(7.0, 8.0), 1.0);
        assert_eq!(nice_step(0.0, 5.0), 1.0);
    }

    #[test]
    fn a_chart_is_one_svg_with_a_line_per_series() {
        let svg = line_chart(
            "t <x>",
            "s",
            "ms",
            &[
                Series {
                    name: "a".into(),
                    points: vec![(0.0, 1.0), (1.0, 3.0)],
                },
                Series {
                    name: "b".into(),
                    points: vec![(0.5, 2.0)],
                },
            ],
            &[(0.0, 1.0, "create".into())],
        );
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(svg.contains("t &lt;x&gt;"));
    }
}
