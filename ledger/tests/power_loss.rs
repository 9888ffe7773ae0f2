//! Power loss under concurrent appends: every acknowledged append survives.
//!
//! A SIGKILL (`crash.rs`) cannot see a missing fsync: the kernel's page cache
//! outlives the process. Here the storage under redb is a model disk, plugged
//! in at redb's `StorageBackend` seam ([`ledger::store::BackendFactory`]):
//! - writes and length changes go to a volatile cache over an in-memory
//!   platter, and reach the platter only on `sync_data`; reads see the cache
//!   over the platter, as they would through the kernel's page cache;
//! - at a random backend operation the power is cut: that operation and
//!   every one after it fails (and the backend cannot be opened again), as on
//!   a machine that is off. If the operation that cuts the power is a
//!   `sync_data`, it completes before it fails half the time (the flush
//!   finished, the reply was lost).
//!
//! Four threads append through one `Arc<Ledger>`; the cut comes at a random
//! point of their backend operations. Two disks are then rebuilt from what
//! the cut left:
//! - **faithful**: the platter alone; every unsynced write is lost;
//! - **written back**: the platter plus some unsynced writes, as if the
//!   kernel had written back some dirty pages, in any order, before the cut.
//!   Each 4 KiB page keeps a random prefix of the writes that touched it
//!   since the last sync (one of the contents it had, never a mix of two),
//!   independently of every other page; the file length keeps a random
//!   prefix of its changes since the last sync.
//!
//! Each disk must open as a ledger, hold every acknowledged append at its
//! index with its bytes, hold nothing twice and nothing that was never
//! submitted, take a new append at the next index, and pass a full verify.
//!
//! What this does not model:
//! - a disk that acknowledges a flush it has not made durable (nothing
//!   above the disk can survive that);
//! - a write torn inside a 4 KiB page (sector-level tearing), including a
//!   torn redb header page;
//! - bit rot and misdirected writes (the tamper tests and `ledger verify`
//!   cover damage);
//! - anything above the file: the model is one file's contents and length,
//!   so the loss of the file itself (its directory entry) is not modelled.
//!   The ledger fsyncs the data directory after creating the data file, but
//!   this test does not show that a new data file survives a power cut;
//! - a power cut while the ledger is being created: the cut window starts
//!   once it is open.
//!
//! The length persisted by `sync_data` is part of the model (`fdatasync`
//! persists the length the data needs). The seed fixes the cut points and
//! the write-back choices; thread interleaving is not fixed, so a failing
//! seed may need a few runs to fail again.
//!
//! `POWER_LOSS_CUTS` sets the number of cuts (default 40), `POWER_LOSS_SEED`
//! the seed.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ledger::store::{BackendFactory, DB_FILE};
use ledger::{Config, Ledger};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redb::StorageBackend;

const DEFAULT_CUTS: u32 = 40;
const DEFAULT_SEED: u64 = 0x5eed_d15c;
const THREADS: u64 = 4;
/// Appends per thread in the run that measures the cut window.
const MEASURED: u64 = 50;
/// The most appends each thread makes before a cut: room past the measured
/// window, so that the cut nearly always comes while they append.
const PER_THREAD: u64 = 4 * MEASURED;
/// The longest the appenders run per cut; they normally stop at the cut.
const APPEND_BUDGET: Duration = Duration::from_secs(20);
/// The page the kernel writes back as a unit.
const PAGE: u64 = 4096;

/// A change not yet synced.
enum Pending {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

/// Whether the power is on, for the operation asking.
enum Power {
    On,
    /// This operation cuts it.
    Cutting,
    Off,
}

struct Disk {
    /// What reads see: the platter with every unsynced change over it.
    cache: Vec<u8>,
    /// What survives the cut.
    platter: Vec<u8>,
    /// Changes since the last sync, in order.
    pending: Vec<Pending>,
    /// Backend operations so far; the one numbered `cut_at` cuts the power.
    ops: u64,
    cut_at: u64,
    off: bool,
    /// Whether a `sync_data` that cuts the power completes first.
    sync_at_cut: bool,
    syncs: u64,
}

impl Disk {
    fn new() -> Disk {
        Disk {
            cache: Vec::new(),
            platter: Vec::new(),
            pending: Vec::new(),
            ops: 0,
            cut_at: u64::MAX,
            off: false,
            sync_at_cut: false,
            syncs: 0,
        }
    }

    fn power(&mut self) -> Power {
        if self.off {
            return Power::Off;
        }
        self.ops += 1;
        if self.ops >= self.cut_at {
            self.off = true;
            return Power::Cutting;
        }
        Power::On
    }

    fn sync(&mut self) {
        for p in std::mem::take(&mut self.pending) {
            apply(&mut self.platter, &p);
        }
        self.syncs += 1;
    }
}

fn apply(image: &mut Vec<u8>, change: &Pending) {
    match change {
        Pending::Write(offset, data) => write_at(image, *offset, data),
        Pending::SetLen(len) => image.resize(to_usize(*len), 0),
    }
}

fn write_at(image: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let start = to_usize(offset);
    let end = start + data.len();
    if image.len() < end {
        image.resize(end, 0);
    }
    image[start..end].copy_from_slice(data);
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).expect("the model disk fits in memory")
}

fn power_off() -> std::io::Error {
    std::io::Error::other("the power is off")
}

#[derive(Clone)]
struct PowerCut(Arc<Mutex<Disk>>);

impl std::fmt::Debug for PowerCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PowerCut")
    }
}

impl PowerCut {
    fn disk(&self) -> MutexGuard<'_, Disk> {
        self.0.lock().expect("the model disk's lock")
    }

    /// The disk, if the power is on for this operation.
    fn on(&self) -> Result<MutexGuard<'_, Disk>, std::io::Error> {
        let mut d = self.disk();
        match d.power() {
            Power::On => Ok(d),
            Power::Cutting | Power::Off => Err(power_off()),
        }
    }
}

impl StorageBackend for PowerCut {
    fn len(&self) -> Result<u64, std::io::Error> {
        Ok(self.on()?.cache.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        let d = self.on()?;
        let start = to_usize(offset);
        let src = d.cache.get(start..start + out.len()).ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "read past the end")
        })?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        let mut d = self.on()?;
        d.cache.resize(to_usize(len), 0);
        d.pending.push(Pending::SetLen(len));
        Ok(())
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        let mut d = self.disk();
        match d.power() {
            Power::On => {
                d.sync();
                Ok(())
            }
            Power::Cutting => {
                if d.sync_at_cut {
                    d.sync();
                }
                Err(power_off())
            }
            Power::Off => Err(power_off()),
        }
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let mut d = self.on()?;
        write_at(&mut d.cache, offset, data);
        d.pending.push(Pending::Write(offset, data.to_vec()));
        Ok(())
    }
}

/// A ledger config whose data file is the model disk. Opening fails once
/// the power is off.
fn on_disk(disk: &PowerCut) -> Config {
    let disk = disk.clone();
    Config {
        backend: Some(BackendFactory(Arc::new(move |_: &Path| {
            if disk.disk().off {
                return Err(power_off());
            }
            Ok(Box::new(disk.clone()) as Box<dyn StorageBackend>)
        }))),
        ..Config::default()
    }
}

/// The pages a write of `len` bytes at `offset` touches.
fn pages(offset: u64, len: usize) -> std::ops::Range<u64> {
    let end = offset + len as u64;
    offset / PAGE..end.div_ceil(PAGE)
}

/// The platter after a cut at which the kernel had written back some dirty
/// pages: each page keeps a random prefix of the writes that touched it
/// since the last sync, the length a random prefix of its changes.
fn written_back(d: &Disk, rng: &mut StdRng) -> Vec<u8> {
    let mut touches: HashMap<u64, u32> = HashMap::new();
    let mut lengths = 0u32;
    for p in &d.pending {
        match p {
            Pending::Write(offset, data) => {
                for page in pages(*offset, data.len()) {
                    *touches.entry(page).or_default() += 1;
                }
            }
            Pending::SetLen(_) => lengths += 1,
        }
    }
    let keep: HashMap<u64, u32> = touches
        .iter()
        .map(|(&page, &n)| (page, rng.random_range(0..=n)))
        .collect();
    let keep_lengths = rng.random_range(0..=lengths);
    let mut image = d.platter.clone();
    let mut len = image.len() as u64;
    let mut seen: HashMap<u64, u32> = HashMap::new();
    let mut lengths_seen = 0u32;
    for p in &d.pending {
        match p {
            Pending::SetLen(n) => {
                if lengths_seen < keep_lengths {
                    apply(&mut image, p);
                    len = *n;
                }
                lengths_seen += 1;
            }
            Pending::Write(offset, data) => {
                for page in pages(*offset, data.len()) {
                    let k = seen.entry(page).or_default();
                    if *k < keep[&page] {
                        let from = (page * PAGE).max(*offset);
                        let to = ((page + 1) * PAGE).min(offset + data.len() as u64);
                        let part = &data[to_usize(from - offset)..to_usize(to - offset)];
                        write_at(&mut image, from, part);
                    }
                    *k += 1;
                }
            }
        }
    }
    image.resize(to_usize(len), 0);
    image
}

fn leaf(cut: u32, thread: u64, i: u64) -> Vec<u8> {
    format!("{{\"cut\":{cut},\"thread\":{thread},\"append\":{i}}}").into_bytes()
}

/// What the appenders saw.
struct Appends {
    /// (index, leaf) of every acknowledged append.
    acked: Vec<(u64, Vec<u8>)>,
    /// Every leaf submitted, acknowledged or not.
    submitted: HashSet<Vec<u8>>,
}

/// Appends from [`THREADS`] threads until each has made `per_thread`
/// appends or seen one fail, then cuts the power if it is still on.
fn append_until_the_cut(log: Ledger, disk: &PowerCut, cut: u32, per_thread: u64) -> Appends {
    let log = Arc::new(log);
    let stop = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + APPEND_BUDGET;
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let log = Arc::clone(&log);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut acked = Vec::new();
                let mut submitted = Vec::new();
                for i in 0..per_thread {
                    if stop.load(Ordering::SeqCst) || Instant::now() > deadline {
                        break;
                    }
                    let bytes = leaf(cut, t, i);
                    submitted.push(bytes.clone());
                    match log.append(bytes.clone()) {
                        Ok(a) => acked.push((a.index, bytes)),
                        Err(_) => {
                            stop.store(true, Ordering::SeqCst);
                            break;
                        }
                    }
                }
                (acked, submitted)
            })
        })
        .collect();
    let mut appends = Appends {
        acked: Vec::new(),
        submitted: HashSet::new(),
    };
    for w in workers {
        let (acked, submitted) = w.join().expect("an appender panicked");
        appends.acked.extend(acked);
        appends.submitted.extend(submitted);
    }
    disk.disk().off = true;
    drop(Arc::try_unwrap(log).ok().expect("the appenders are done"));
    appends
}

/// Opens `image` as a fresh data directory and checks it against what was
/// acknowledged. Returns the number of entries in it.
fn check(image: &[u8], appends: &Appends, what: &str) -> u64 {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join(DB_FILE), image).expect("write the image");
    let log = Ledger::open(dir.path(), Config::default())
        .unwrap_or_else(|e| panic!("{what}: the ledger does not open after the cut: {e}"));
    let size = log.head().size;
    let mut seen = HashSet::new();
    for i in 0..size {
        let e = log
            .entry(i)
            .unwrap_or_else(|e| panic!("{what}: entry {i} unreadable: {e}"));
        assert!(
            appends.submitted.contains(&e.leaf),
            "{what}: entry {i} was never submitted"
        );
        assert!(seen.insert(e.leaf), "{what}: entry {i} is in the log twice");
    }
    assert!(
        size >= appends.acked.len() as u64,
        "{what}: {size} entries, {} acknowledged",
        appends.acked.len()
    );
    for (index, bytes) in &appends.acked {
        assert!(
            *index < size,
            "{what}: acknowledged entry {index} lost (size {size})"
        );
        let e = log
            .entry(*index)
            .unwrap_or_else(|e| panic!("{what}: acknowledged entry {index} unreadable: {e}"));
        assert_eq!(
            &e.leaf, bytes,
            "{what}: acknowledged entry {index} has other bytes"
        );
    }
    let next = log
        .append(b"after the power came back".to_vec())
        .unwrap_or_else(|e| panic!("{what}: no append after the cut: {e}"));
    assert_eq!(next.index, size, "{what}: the next append's index");
    drop(log);
    let v = ledger::verify_dir(dir.path(), &mut |_, _| {})
        .unwrap_or_else(|e| panic!("{what}: verify fails after the cut: {e}"));
    assert_eq!(v.size, size + 1, "{what}: verified size");
    size
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} does not parse")),
        Err(_) => default,
    }
}

#[test]
fn power_cut_during_concurrent_appends_loses_no_acknowledged_write() {
    let cuts: u32 = env_or("POWER_LOSS_CUTS", DEFAULT_CUTS);
    let seed: u64 = env_or("POWER_LOSS_SEED", DEFAULT_SEED);
    let mut rng = StdRng::seed_from_u64(seed);
    let started = Instant::now();
    // A first run without a cut counts the backend operations of
    // `MEASURED` appends per thread; each cut then comes at a random one of
    // that many operations into a workload of up to `PER_THREAD` each.
    let workload_ops = {
        let disk = PowerCut(Arc::new(Mutex::new(Disk::new())));
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Ledger::open(dir.path(), on_disk(&disk)).expect("open on the model disk");
        let before = disk.disk().ops;
        let appends = append_until_the_cut(log, &disk, 0, MEASURED);
        assert_eq!(appends.acked.len() as u64, THREADS * MEASURED);
        let ops = disk.disk().ops;
        ops - before
    };
    let (mut acked, mut unacked_present, mut syncs, mut extra_pages) = (0usize, 0u64, 0u64, 0u64);
    let mut mid_workload = 0u32;
    for cut in 1..=cuts {
        let what = format!("seed {seed:#x}, cut {cut} of {cuts}");
        let disk = PowerCut(Arc::new(Mutex::new(Disk::new())));
        let dir = tempfile::tempdir().expect("tempdir");
        let log = Ledger::open(dir.path(), on_disk(&disk)).expect("open on the model disk");
        {
            let mut d = disk.disk();
            d.cut_at = d.ops + rng.random_range(1..=workload_ops.max(1));
            d.sync_at_cut = rng.random_bool(0.5);
        }
        let appends = append_until_the_cut(log, &disk, cut, PER_THREAD);
        let d = disk.disk();
        if d.ops >= d.cut_at {
            mid_workload += 1;
        }
        // The model: the platter with every pending change is what reads saw.
        let mut everything = d.platter.clone();
        for p in &d.pending {
            apply(&mut everything, p);
        }
        assert!(
            everything == d.cache,
            "{what}: the model disk is inconsistent"
        );
        let faithful = d.platter.clone();
        let back = written_back(&d, &mut rng);
        syncs += d.syncs;
        extra_pages += back
            .chunks(to_usize(PAGE))
            .zip(faithful.chunks(to_usize(PAGE)))
            .filter(|(a, b)| a != b)
            .count() as u64;
        drop(d);
        let size = check(&faithful, &appends, &format!("{what}, faithful"));
        check(&back, &appends, &format!("{what}, written back"));
        acked += appends.acked.len();
        unacked_present += size - appends.acked.len() as u64;
    }
    println!(
        "power loss: {cuts} cuts (seed {seed:#x}; window: {workload_ops} backend operations, \
         measured over {} appends), {mid_workload} while the appenders ran; {acked} appends \
         acknowledged, all present in both disks; {syncs} syncs; {unacked_present} \
         unacknowledged appends persisted (faithful disk); {extra_pages} pages differed in the \
         written-back disk; {:.1} s",
        THREADS * MEASURED,
        started.elapsed().as_secs_f64()
    );
}
