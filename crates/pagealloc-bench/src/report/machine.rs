//! The machine a run happened on, and whether it looked busy.
//!
//! Read from `/proc/cpuinfo` (model name), `/proc/sys/kernel/osrelease`,
//! `/proc/loadavg` and the CPUs this process may run on. A machine is called
//! busy when its one-minute load average is at least half its usable CPUs:
//! other work then competes with the measurement threads and the noise grows.

use serde::{Deserialize, Serialize};

/// Machine facts recorded in the report header and `results.json`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Default)]
pub struct Machine {
    /// CPU model name.
    pub cpu_model: String,
    /// CPUs this process may run on.
    pub cores: usize,
    /// Kernel release.
    pub kernel: String,
    /// Calibrated TSC rate in GHz.
    pub tsc_ghz: f64,
    /// `/proc/loadavg`'s 1, 5 and 15 minute averages at the start of the run.
    pub loadavg: [f64; 3],
    /// Whether the machine looked busy at the start.
    pub busy: bool,
}

impl Machine {
    /// Read the machine's facts now (the TSC rate is filled in by the caller).
    pub fn probe() -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_string())
            })
            .unwrap_or_else(|| std::env::consts::ARCH.to_string());
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let loadavg = read_loadavg().unwrap_or([0.0; 3]);
        Self { cpu_model, cores, kernel, tsc_ghz: 0.0, loadavg, busy: is_busy(loadavg[0], cores) }
    }

    /// The warning to print when the machine is busy.
    pub fn busy_warning(&self) -> Option<String> {
        self.busy.then(|| {
            format!(
                "warning: the machine looks busy (load average {:.2} on {} CPUs); expect more noise",
                self.loadavg[0], self.cores
            )
        })
    }
}

/// Load at or above half the CPUs counts as busy.
pub fn is_busy(load1: f64, cores: usize) -> bool {
    load1 >= cores as f64 * 0.5
}

/// The three load averages from `/proc/loadavg`.
pub fn read_loadavg() -> Option<[f64; 3]> {
    let s = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = s.split_whitespace().map(|w| w.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// The command line as typed, quoted for a POSIX shell where needed.
pub fn command_line() -> String {
    std::env::args().map(|a| shell_quote(&a)).collect::<Vec<_>>().join(" ")
}

/// Quote one word for a POSIX shell if it needs it.
pub fn shell_quote(a: &str) -> String {
    let plain = !a.is_empty() && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        a.to_string()
    } else {
        format!("'{}'", a.replace('\'', r"'\''"))
    }
}

/// Seconds since the epoch as an ISO 8601 UTC time (`2026-05-01T12:00:00Z`).
pub fn iso8601(secs: u64) -> String {
    // Days to civil date (Howard Hinnant's algorithm).
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_quoting() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(shell_quote("bench"), "bench");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert!(is_busy(1.0, 2) && !is_busy(0.9, 2));
    }
}
