//! The `process_*` metrics Prometheus' Go client exports for every Go program (kube-scheduler
//! included), read from `/proc/self` at scrape time. Dashboards join on them (CPU and memory
//! panels, `process_start_time_seconds` for restarts). Linux only: elsewhere [`read`] returns
//! nothing and the metrics stay absent.

/// Clock ticks per second of `/proc/<pid>/stat`'s times (`USER_HZ`; 100 on every Linux
/// architecture ferrosched builds for).
const USER_HZ: f64 = 100.0;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct ProcessStats {
    /// User plus system CPU time, seconds.
    pub(crate) cpu_seconds: f64,
    pub(crate) resident_bytes: u64,
    pub(crate) virtual_bytes: u64,
    /// Unix time the process started, seconds.
    pub(crate) start_time_seconds: f64,
    pub(crate) open_fds: u64,
    /// The soft limit on open files; `None` when unlimited.
    pub(crate) max_fds: Option<u64>,
}

/// From the texts of `/proc/self/stat`, `/proc/self/status`, `/proc/stat` and
/// `/proc/self/limits`, plus the count of `/proc/self/fd` entries.
pub(crate) fn parse(
    stat: &str,
    status: &str,
    proc_stat: &str,
    limits: &str,
    open_fds: u64,
) -> Option<ProcessStats> {
    // The command name (field 2) may hold spaces and ')': fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state): field n is fields[n - 3].
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let utime = field(14)?;
    let stime = field(15)?;
    let start_ticks = field(22)?;
    let virtual_bytes = field(23)?;
    let kb = |key: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(key))?;
        line[key.len()..].split_whitespace().next()?.parse().ok()
    };
    let resident_bytes = kb("VmRSS:")? * 1024;
    let boot: u64 = proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let max_fds = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|soft| soft.parse().ok());
    Some(ProcessStats {
        cpu_seconds: (utime + stime) as f64 / USER_HZ,
        resident_bytes,
        virtual_bytes,
        start_time_seconds: boot as f64 + start_ticks as f64 / USER_HZ,
        open_fds,
        max_fds,
    })
}

/// This process's figures now, or `None` off Linux (or if `/proc` cannot be read).
pub(crate) fn read() -> Option<ProcessStats> {
    let text = |p: &str| std::fs::read_to_string(p).ok();
    let open_fds = std::fs::read_dir("/proc/self/fd").ok()?.count() as u64;
    parse(
        &text("/proc/self/stat")?,
        &text("/proc/self/status")?,
        &text("/proc/stat")?,
        &text("/proc/self/limits").unwrap_or_default(),
        open_fds,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_proc_fields() {
        let stat = "4242 (ferro sched) (x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 75 0 0 20 0 9 0 1234 104857600 2000 18446744073709551615";
        let status = "Name:\tferrosched\nVmSize:\t  102400 kB\nVmRSS:\t    8000 kB\n";
        let proc_stat = "cpu  1 2 3\nbtime 1700000000\nprocesses 10\n";
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax open files            1048576              1048576              files\n";
        let s = parse(stat, status, proc_stat, limits, 17).unwrap();
        assert_eq!(s.cpu_seconds, 3.25);
        assert_eq!(s.resident_bytes, 8000 * 1024);
        assert_eq!(s.virtual_bytes, 104_857_600);
        assert!((s.start_time_seconds - 1_700_000_012.34).abs() < 1e-6);
        assert_eq!(s.open_fds, 17);
        assert_eq!(s.max_fds, Some(1_048_576));
        let unlimited = limits.replace("1048576              1048576", "unlimited unlimited");
        assert_eq!(
            parse(stat, status, proc_stat, &unlimited, 1)
                .unwrap()
                .max_fds,
            None
        );
        assert_eq!(parse("garbage", status, proc_stat, limits, 1), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_process() {
        let s = read().unwrap();
        assert!(s.resident_bytes > 0);
        assert!(s.open_fds > 0);
        assert!(s.start_time_seconds > 1_600_000_000.0);
    }
}
