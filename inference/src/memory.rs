//! How much memory this process holds: its peak resident set, as the kernel counts it, for
//! `ember bench` and `ember generate --verbose`.

/// The process's peak resident set size in bytes (`VmHWM` in `/proc/self/status`), where the
/// platform reports it (Linux); `None` elsewhere.
pub fn peak_resident_bytes() -> Option<u64> {
    status_field("VmHWM:")
}

/// The process's current resident set size in bytes (`VmRSS`).
pub fn resident_bytes() -> Option<u64> {
    status_field("VmRSS:")
}

fn status_field(name: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(name))?;
    let kib: u64 = line[name.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// `1.23 GiB` / `456.7 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    let mib = bytes as f64 / (1024.0 * 1024.0);
    if mib >= 1024.0 {
        format!("{:.2} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn linux_reports_a_peak_at_least_the_current_size() {
        if cfg!(target_os = "linux") {
            let peak = super::peak_resident_bytes().expect("VmHWM on Linux");
            let now = super::resident_bytes().expect("VmRSS on Linux");
            assert!(peak >= now && now > 0, "peak {peak}, now {now}");
        }
    }
}
