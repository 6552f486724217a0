//! [`ProcessCollector`]: the standard `process_*` metrics every Prometheus client exposes, read
//! from `/proc/self` on each scrape (Linux; nothing elsewhere).

use std::time::{SystemTime, UNIX_EPOCH};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

/// Clock ticks per second of `/proc/self/stat`'s CPU times (`_SC_CLK_TCK`, 100 on Linux).
const TICKS_PER_SECOND: f64 = 100.0;
/// `/proc/self/statm` counts pages of this size (every Linux kemu runs on).
const PAGE_SIZE: u64 = 4096;

#[derive(Debug)]
pub struct ProcessCollector {
    start_time_seconds: f64,
}

impl ProcessCollector {
    pub fn new() -> ProcessCollector {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        ProcessCollector {
            start_time_seconds: start_time().unwrap_or(now),
        }
    }
}

impl Default for ProcessCollector {
    fn default() -> ProcessCollector {
        ProcessCollector::new()
    }
}

/// This process's resident set size in bytes (Linux), 0 elsewhere.
pub fn resident_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * PAGE_SIZE)
}

/// The fields of `/proc/self/stat` after the command name (which may hold spaces).
fn stat_fields() -> Option<Vec<String>> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// User plus system CPU time, in seconds.
fn cpu_seconds() -> Option<f64> {
    let fields = stat_fields()?;
    // utime and stime are fields 14 and 15 of stat(5); `fields` starts at field 3.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / TICKS_PER_SECOND)
}

/// When the process started, in seconds since the epoch: boot time plus field 22 of stat(5).
fn start_time() -> Option<f64> {
    let ticks: f64 = stat_fields()?.get(19)?.parse().ok()?;
    let boot = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: f64 = boot
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(btime + ticks / TICKS_PER_SECOND)
}

fn open_fds() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        if let Some(cpu) = cpu_seconds() {
            encoder
                .encode_descriptor(
                    "process_cpu_seconds",
                    "Total user and system CPU time spent in seconds.",
                    None,
                    MetricType::Counter,
                )?
                .encode_counter::<prometheus_client::encoding::NoLabelSet, _, f64>(&cpu, None)?;
        }
        let resident = resident_bytes();
        if resident > 0 {
            encoder
                .encode_descriptor(
                    "process_resident_memory_bytes",
                    "Resident memory size in bytes.",
                    None,
                    MetricType::Gauge,
                )?
                .encode_gauge(&(resident as i64))?;
        }
        if let Some(fds) = open_fds() {
            encoder
                .encode_descriptor(
                    "process_open_fds",
                    "Number of open file descriptors.",
                    None,
                    MetricType::Gauge,
                )?
                .encode_gauge(&(fds as i64))?;
        }
        encoder
            .encode_descriptor(
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&self.start_time_seconds)?;
        Ok(())
    }
}
