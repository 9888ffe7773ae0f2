//! Crash test: a child process appends from 4 threads and is killed with
//! SIGKILL at random moments, 25 times over one data directory. After each
//! kill every acknowledged index is present with the same bytes, no index was
//! acknowledged twice, and a full verify passes.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::Rng;

const KILLS: u32 = 25;

#[test]
fn sigkill_during_concurrent_appends_loses_no_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut acked: HashMap<u64, String> = HashMap::new();
    let mut rng = rand::rng();
    let mut total_acks = 0usize;
    for run in 0..KILLS {
        let mut child = Command::new(env!("CARGO_BIN_EXE_crash-writer"))
            .arg(dir.path())
            .arg(run.to_string())
            .arg("4")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn crash-writer");
        let stdout = child.stdout.take().expect("stdout");
        let (opened, is_open) = std::sync::mpsc::channel();
        // Only newline-terminated lines count: a line cut by the kill is dropped.
        let reader = std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut lines = Vec::new();
            let mut buf = Vec::new();
            while r.read_until(b'\n', &mut buf).unwrap_or(0) > 0 {
                if buf.last() == Some(&b'\n') {
                    lines.push(String::from_utf8_lossy(&buf[..buf.len() - 1]).into_owned());
                    if lines.len() == 1 {
                        let _ = opened.send(());
                    }
                }
                buf.clear();
            }
            lines
        });
        // The kill lands while appends run, not while a loaded machine is
        // still starting the child: wait for it to open the log first.
        let _ = is_open.recv_timeout(Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(rng.random_range(30..250)));
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
        let lines = reader.join().expect("reader");
        assert_eq!(
            lines.first().map(String::as_str),
            Some("READY"),
            "child never opened the log"
        );
        for line in &lines[1..] {
            let mut parts = line.splitn(3, ' ');
            let (Some("ACK"), Some(index), Some(leaf)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Ok(index) = index.parse::<u64>() else {
                continue;
            };
            if !leaf.starts_with(&format!("run{run}-t")) {
                continue;
            }
            let prev = acked.insert(index, leaf.to_string());
            assert!(prev.is_none(), "index {index} acknowledged twice");
            total_acks += 1;
        }

        let log = ledger::Ledger::open(dir.path(), ledger::Config::default())
            .unwrap_or_else(|e| panic!("reopen after kill {run}: {e}"));
        for (index, leaf) in &acked {
            let e = log
                .entry(*index)
                .unwrap_or_else(|e| panic!("acked index {index} lost after kill {run}: {e}"));
            assert_eq!(e.leaf, leaf.as_bytes(), "acked index {index} changed");
        }
        drop(log);
        ledger::verify_dir(dir.path(), &mut |_, _| {})
            .unwrap_or_else(|e| panic!("verify after kill {run}: {e}"));
    }
    assert!(
        total_acks > 0,
        "no writes were acknowledged in {KILLS} runs"
    );
    eprintln!("crash test: {KILLS} kills, {total_acks} acknowledged writes, 0 lost");
}
