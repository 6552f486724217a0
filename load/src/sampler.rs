//! Samples the CPU and memory of the cluster's processes (and of the load generator itself)
//! every second from `/proc/<pid>/stat` and `/proc/<pid>/status`.

use std::time::Duration;

use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

use super::SampledProcess;

/// `/proc` reports CPU time in USER_HZ, which Linux fixes at 100 for user space.
const TICKS_PER_SECOND: f64 = 100.0;

#[derive(Clone, Debug, Serialize)]
pub struct ResourceSample {
    /// Seconds since the run's start.
    pub t: f64,
    /// Percent of one core over the last interval (200 = two cores busy).
    pub cpu_percent: f64,
    pub rss_bytes: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ProcessSamples {
    pub name: String,
    pub pid: u32,
    pub samples: Vec<ResourceSample>,
}

/// CPU ticks (user + system) of a process.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    // The command name in parentheses may hold spaces: fields count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Resident set size of a process, from the `VmRSS:` line.
pub fn rss_bytes(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn read(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some((cpu_ticks(&stat)?, rss_bytes(&status)?))
}

/// Samples every process each second until `stop` turns true, then once more (so a run cut
/// short still ends with every process's state at its end), and returns the samples.
/// A process that exits stops being sampled.
pub async fn sample(
    processes: Vec<SampledProcess>,
    run_start: Instant,
    stop: watch::Receiver<bool>,
) -> Vec<ProcessSamples> {
    sample_every(Duration::from_secs(1), processes, run_start, stop).await
}

/// [`sample`] every `period`: each sample's CPU is the average over the period before it.
pub async fn sample_every(
    period: Duration,
    processes: Vec<SampledProcess>,
    run_start: Instant,
    mut stop: watch::Receiver<bool>,
) -> Vec<ProcessSamples> {
    let mut out: Vec<ProcessSamples> = processes
        .iter()
        .map(|p| ProcessSamples {
            name: p.name.clone(),
            pid: p.pid,
            samples: Vec::new(),
        })
        .collect();
    let mut last: Vec<Option<(Instant, u64)>> = processes
        .iter()
        .map(|p| read(p.pid).map(|(ticks, _)| (Instant::now(), ticks)))
        .collect();
    let mut tick = tokio::time::interval(period);
    tick.tick().await;
    loop {
        let last_round = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => true,
            _ = tick.tick() => false,
        };
        let now = Instant::now();
        for (i, p) in processes.iter().enumerate() {
            let Some((before_at, before_ticks)) = last[i] else {
                continue;
            };
            match read(p.pid) {
                Some((ticks, rss)) => {
                    let seconds = (now - before_at).as_secs_f64().max(1e-3);
                    let cpu = ticks.saturating_sub(before_ticks) as f64 / TICKS_PER_SECOND;
                    // The last round may come milliseconds after a tick: too short a span for
                    // 10 ms ticks to say anything, so it repeats the CPU figure before it.
                    let cpu_percent = if seconds >= 0.2 {
                        100.0 * cpu / seconds
                    } else {
                        out[i].samples.last().map_or(0.0, |s| s.cpu_percent)
                    };
                    out[i].samples.push(ResourceSample {
                        t: (now - run_start).as_secs_f64(),
                        cpu_percent,
                        rss_bytes: rss,
                    });
                    last[i] = Some((now, ticks));
                }
                None => last[i] = None,
            }
        }
        if last_round {
            break;
        }
    }
    out
}

/// The kemu processes whose command line names `dir` (a cluster's processes keep their data
/// there), named by subcommand and pid.
pub fn kemu_processes_naming(dir: &std::path::Path) -> Vec<SampledProcess> {
    let Ok(dir) = dir.canonicalize() else {
        return Vec::new();
    };
    let needle = dir.display().to_string();
    let me = std::process::id();
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let is_kemu = args
            .first()
            .is_some_and(|a| a.rsplit('/').next() == Some("kemu"));
        if is_kemu && args.iter().any(|a| a.contains(&needle)) {
            let sub = args.get(1).cloned().unwrap_or_default();
            out.push(SampledProcess {
                name: format!("{sub}-{pid}"),
                pid,
            });
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_stat_and_status() {
        let stat = "1234 (kemu (api) x) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 100 1000000 2000 18446744073709551615";
        assert_eq!(cpu_ticks(stat), Some(300));
        let status = "Name:\tkemu\nVmPeak:\t 9000 kB\nVmRSS:\t    2048 kB\nThreads:\t8\n";
        assert_eq!(rss_bytes(status), Some(2048 * 1024));
    }

    #[test]
    fn reads_this_process() {
        let (ticks, rss) = read(std::process::id()).expect("own /proc entry");
        assert!(rss > 0);
        let _ = ticks;
    }
}
