//! Child process for the crash test: appends from several threads until it is
//! killed, printing `ACK <index> <leaf>` only after each append is
//! acknowledged (durable).
//!
//! Usage: crash-writer DATA_DIR RUN_ID THREADS

use std::io::Write;
use std::sync::Arc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, run, threads] = args.as_slice() else {
        eprintln!("usage: crash-writer DATA_DIR RUN_ID THREADS");
        std::process::exit(2);
    };
    let threads: u32 = threads.parse().expect("THREADS");
    let log =
        Arc::new(ledger::Ledger::open(dir.as_ref(), ledger::Config::default()).expect("open"));
    println!("READY");
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let log = Arc::clone(&log);
            let run = run.clone();
            std::thread::spawn(move || {
                for seq in 0u64.. {
                    let leaf = format!("run{run}-t{t}-{seq}");
                    let a = log.append(leaf.clone().into_bytes()).expect("append");
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ACK {} {leaf}", a.index).expect("stdout");
                    out.flush().expect("flush");
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}
