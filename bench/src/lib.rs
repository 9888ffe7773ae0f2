//! Shared helpers for the benchmarks.
#![forbid(unsafe_code)]

/// A leaf shaped like a score record, about 200 bytes.
pub fn score_leaf(i: u64) -> Vec<u8> {
    format!(
        "{{\"kind\":\"score.recorded\",\"task_class\":\"migration-chainguard-distroless\",\"case_id\":\"case-{:05}\",\"case_digest\":\"blake3:{:064x}\",\"score\":0.{:03},\"passed\":true}}",
        i % 150,
        i,
        (i * 37) % 1000
    )
    .into_bytes()
}

/// CPU time process `pid` has used, user and system (`/proc/<pid>/stat`
/// fields 14 and 15, in clock ticks of 1/100 s); 0 where `/proc` is not
/// there to read.
pub fn cpu_seconds(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            // Fields after the command name, which is in parentheses.
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
            Some(ticks as f64 / 100.0)
        })
        .unwrap_or(0.0)
}

pub mod load;
pub mod scale;
