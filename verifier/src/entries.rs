//! Every entry of a remote log, proven: the one walk that `ledger verify
//! --server`, `ledger export --server` and `ledger backup` share.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ledger::merkle::Frontier;
use ledger::Hash;

use crate::client::Client;
use crate::wire::{EntryPage, EntryView};
use crate::CheckError;

/// How many entries one page request asks for.
pub const PAGE: u64 = 1000;

/// Reads entries `0..size` from `client`'s server, page by page, and proves
/// them against the signed checkpoint `(size, root)`: each comes at its
/// index, its leaf re-hashes to the leaf hash served, its chain hash is the
/// one the chain from the first entry gives, and all of them hash into
/// `root`. Each entry is handed to `each` with its leaf bytes as soon
/// as its own hash is checked, which is before the root is: a caller that
/// writes entries out must discard what it wrote when this fails.
/// `progress` gets (entries done, size).
pub fn entries_verified(
    client: &Client,
    size: u64,
    root: &Hash,
    each: &mut dyn FnMut(&EntryView, &[u8]) -> anyhow::Result<()>,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<(), CheckError> {
    let mut frontier = Frontier::new();
    let mut chain = ledger::GENESIS_CHAIN;
    let mut next = 0;
    while next < size {
        let page: EntryPage = client.get_json(&format!("/v1/entries?start={next}&limit={PAGE}"))?;
        if page.entries.is_empty() {
            return Err(CheckError::Disproved(format!(
                "the server returned no entries at {next} below its checkpoint size {size}"
            )));
        }
        for e in page.entries.iter().take((size - next) as usize) {
            if e.index != next {
                return Err(CheckError::Disproved(format!(
                    "the server returned entry {} where {next} was expected",
                    e.index
                )));
            }
            let leaf = B64.decode(&e.leaf).map_err(|_| {
                CheckError::Disproved(format!("entry {next}: the leaf is not base64"))
            })?;
            let lh = ledger::leaf_hash(&leaf);
            if ledger::hash::to_hex(&lh) != e.leaf_hash {
                return Err(CheckError::Disproved(format!(
                    "first bad index {next}: the leaf does not hash to the leaf hash served"
                )));
            }
            chain = ledger::chain_hash(&chain, &leaf);
            if ledger::hash::to_hex(&chain) != e.chain_hash {
                return Err(CheckError::Disproved(format!(
                    "first bad index {next}: the chain hash served is not the chain of the entries"
                )));
            }
            each(e, &leaf)?;
            frontier.push(lh);
            next += 1;
        }
        progress(next, size);
    }
    if frontier.root() != *root {
        return Err(CheckError::Disproved(format!(
            "the {size} entries served do not hash to the signed root"
        )));
    }
    Ok(())
}
