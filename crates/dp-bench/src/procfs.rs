//! What Linux's `/proc` says about a process and the machine: a process's
//! CPU seconds and state (`/proc/PID/stat`, proc(5)), its peak resident
//! set (`VmHWM` of `/proc/PID/status`) and the load average
//! (`/proc/loadavg`). The benchmarks report these beside their timings;
//! every reader returns `None` where the file is absent or unreadable
//! (not Linux, or the process is gone).

/// Which process: this one, or another by its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pid {
    /// `/proc/self`.
    Current,
    /// `/proc/PID`.
    Of(u32),
}

impl Pid {
    fn file(self, name: &str) -> String {
        match self {
            Self::Current => format!("/proc/self/{name}"),
            Self::Of(pid) => format!("/proc/{pid}/{name}"),
        }
    }
}

/// A process's state and CPU time, from `/proc/PID/stat`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stat {
    /// The state letter (`R`, `S`, `Z` for exited but not yet reaped, …).
    pub state: char,
    /// User + system CPU seconds of all its threads (`utime + stime`, in
    /// clock ticks of 1/100 s).
    pub cpu_seconds: f64,
}

/// The state and CPU seconds of `pid`.
pub fn stat(pid: Pid) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(pid.file("stat")).ok()?)
}

/// User + system CPU seconds `pid` has used.
pub fn cpu_seconds(pid: Pid) -> Option<f64> {
    stat(pid).map(|s| s.cpu_seconds)
}

/// `/proc/PID/stat`'s state and `utime + stime`. The command name (field
/// 2) is parenthesized and may hold spaces and parentheses, so the fields
/// are counted after its last `)`: the state is the first of them, utime
/// and stime the 12th and 13th (fields 14 and 15 of proc(5)).
fn parse_stat(text: &str) -> Option<Stat> {
    let fields: Vec<&str> = text.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        cpu_seconds: (ticks(11)? + ticks(12)?) / 100.0,
    })
}

/// Peak resident set size of `pid` in bytes (`VmHWM`).
pub fn peak_rss_bytes(pid: Pid) -> Option<f64> {
    parse_peak_rss(&std::fs::read_to_string(pid.file("status")).ok()?)
}

/// Resets this process's peak resident set size to its current one
/// (`5` into `clear_refs`, Linux ≥ 4.0), so that a later
/// [`peak_rss_bytes`] is the peak of what ran since; false when refused.
pub fn reset_peak_rss() -> bool {
    std::fs::write(Pid::Current.file("clear_refs"), "5").is_ok()
}

/// The `VmHWM:   1234 kB` line of a status file, in bytes.
fn parse_peak_rss(status: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}

/// The load averages over 1, 5 and 15 minutes.
pub fn load_averages() -> Option<[f64; 3]> {
    parse_loadavg(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

/// The load average over one minute: timings are printed with it, since
/// only ratios from one run compare.
pub fn load_average() -> Option<f64> {
    load_averages().map(|l| l[0])
}

/// The three load averages as `/proc/loadavg` shows them, or `?`.
pub fn load_averages_text() -> String {
    load_averages().map_or("?".into(), |[a, b, c]| format!("{a:.2} {b:.2} {c:.2}"))
}

fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Instant;

    use super::*;

    /// proc(5)'s layouts, with a command name holding spaces and `)`:
    /// utime 250 + stime 50 ticks are 3 s; `VmHWM` in kB; three averages.
    #[test]
    fn parses_the_proc_formats() {
        let stat = "4242 (a b) c) Z 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1";
        assert_eq!(
            parse_stat(stat),
            Some(Stat {
                state: 'Z',
                cpu_seconds: 3.0
            })
        );
        assert_eq!(parse_stat("4242 (cut) R 1 2"), None);
        let status = "Name:\tx\nVmPeak:\t  9000 kB\nVmHWM:\t  2048 kB\nVmRSS:\t 1024 kB\n";
        assert_eq!(parse_peak_rss(status), Some(2048.0 * 1024.0));
        assert_eq!(parse_peak_rss("Name:\tx\n"), None);
        assert_eq!(
            parse_loadavg("0.70 1.23 1.71 1/83 29015\n"),
            Some([0.70, 1.23, 1.71])
        );
        assert_eq!(parse_loadavg("0.70"), None);
    }

    /// On Linux this process's CPU clock advances with work done on this
    /// thread (a wrong field would stay put or fail to parse), its state
    /// is read, and it has a peak resident set.
    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read() {
        let before = cpu_seconds(Pid::Current).unwrap();
        let started = Instant::now();
        let mut x = 0u64;
        while cpu_seconds(Pid::Current).unwrap() < before + 0.02 {
            for i in 0..100_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
            assert!(
                started.elapsed().as_secs() < 60,
                "CPU clock did not advance"
            );
        }
        assert!("RSD".contains(stat(Pid::Current).unwrap().state));
        assert!(peak_rss_bytes(Pid::Current).unwrap() > 0.0);
        assert!(load_average().unwrap() >= 0.0);
        let own = Pid::Of(std::process::id());
        assert!(peak_rss_bytes(own).unwrap() > 0.0);
    }
}
