//! The tiles of a log of 70,000 entries (the C2SP tlog-tiles example:
//! levels 0, 1 and 2, full and partial) checked against an independent
//! computation: SHA-256 over the leaves as RFC 6962 defines the tree, not
//! the stored hashes.

use ledger::tiles::{decode_bundle, tiles_between, Kind, TilePath};
use ledger::{Config, Error, Ledger};
use sha2::{Digest, Sha256};

fn leaf_hash(leaf: &[u8]) -> [u8; 32] {
    Sha256::new()
        .chain_update([0])
        .chain_update(leaf)
        .finalize()
        .into()
}

fn node(l: &[u8; 32], r: &[u8; 32]) -> [u8; 32] {
    Sha256::new()
        .chain_update([1])
        .chain_update(l)
        .chain_update(r)
        .finalize()
        .into()
}

/// RFC 6962 MTH over leaf hashes.
fn mth(hashes: &[[u8; 32]]) -> [u8; 32] {
    match hashes.len() {
        0 => Sha256::digest([]).into(),
        1 => hashes[0],
        n => {
            let k = 1 << (usize::BITS - (n - 1).leading_zeros() - 1);
            node(&mth(&hashes[..k]), &mth(&hashes[k..]))
        }
    }
}

fn leaf(i: u64) -> Vec<u8> {
    format!("entry {i} {}", "x".repeat((i % 7) as usize)).into_bytes()
}

#[test]
fn the_tiles_of_70000_entries_are_the_rfc6962_tree() {
    const N: u64 = 70_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let log = Ledger::open(dir.path(), Config::default()).expect("open");
    let pending: Vec<_> = (0..N)
        .map(|i| loop {
            match log.submit(leaf(i)) {
                Ok(p) => break p,
                Err(Error::Busy) => std::thread::sleep(std::time::Duration::from_millis(5)),
                Err(e) => panic!("{e}"),
            }
        })
        .collect();
    for p in pending {
        p.wait().expect("durable");
    }
    assert_eq!(log.head().size, N);

    let leaves: Vec<[u8; 32]> = (0..N).map(|i| leaf_hash(&leaf(i))).collect();
    // Level l's hashes are the MTH of each run of 256^l leaves.
    let level = |l: u32| -> Vec<[u8; 32]> {
        leaves
            .chunks(1 << (8 * l))
            .filter(|c| c.len() == 1 << (8 * l))
            .map(mth)
            .collect()
    };
    let levels = [level(0), level(1), level(2)];
    let tiles = tiles_between(0, N);
    assert_eq!(tiles.len(), 277 + 274);
    for t in &tiles {
        let bytes = log.tile(t).unwrap_or_else(|e| panic!("{t}: {e}"));
        let first = (t.index * 256) as usize;
        let width = t.width as usize;
        match t.kind {
            Kind::Hashes { level } => {
                let want: Vec<u8> = levels[usize::from(level)][first..first + width]
                    .iter()
                    .flatten()
                    .copied()
                    .collect();
                assert_eq!(bytes, want, "{t}");
            }
            Kind::Entries => {
                let got = decode_bundle(&bytes).expect("bundle decodes");
                assert_eq!(got.len(), width, "{t}");
                for (k, e) in got.iter().enumerate() {
                    assert_eq!(*e, leaf((first + k) as u64).as_slice(), "{t}");
                }
            }
        }
    }
    assert_eq!(mth(&leaves), log.head().root.0);
    // The next tiles are not there yet.
    for t in [
        TilePath::hashes(0, 273, 113),
        TilePath::hashes(0, 274, 1),
        TilePath::entries(273, 113),
        TilePath::hashes(1, 1, 18),
        TilePath::hashes(2, 0, 2),
        TilePath::hashes(3, 0, 1),
    ] {
        let t = t.expect("tile");
        assert!(
            matches!(log.tile(&t), Err(Error::TileNotInTree { size: N, .. })),
            "{t}"
        );
    }
}
