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
) -> Result<Walked, CheckError> {
    let mut frontier = Frontier::new();
    let mut served = Served::from(0, ledger::GENESIS_CHAIN);
    while served.next < size {
        let next = served.next;
        let page: EntryPage = client.get_json(&format!("/v1/entries?start={next}&limit={PAGE}"))?;
        if page.entries.is_empty() {
            return Err(CheckError::Disproved(format!(
                "the server returned no entries at {next} below its checkpoint size {size}"
            )));
        }
        for e in page.entries.iter().take((size - next) as usize) {
            let (leaf, lh) = served.check(e)?;
            each(e, &leaf)?;
            frontier.push(lh);
        }
        progress(served.next, size);
    }
    if frontier.root() != *root {
        return Err(CheckError::Disproved(format!(
            "the {size} entries served do not hash to the signed root"
        )));
    }
    served.finish()?;
    Ok(Walked {
        disclosed: served.disclosed,
        redacted: served.redacted(),
    })
}

/// What a walk of a whole log found beside the entries, for a reader with
/// a role (docs/PRIVACY.md): disclosures checked against their leaves, and
/// committed fields answered as redacted, each recorded by a redaction.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Walked {
    pub disclosed: u64,
    pub redacted: u64,
}

/// Served entries checked one after another: each must come at its index,
/// its leaf re-hash to the leaf hash served, and its chain hash follow from
/// the entries before it. Shared by [`entries_verified`] and the replica
/// ([`crate::replay::Replica::follow`]).
pub(crate) struct Served {
    /// The index the next entry must have.
    pub next: u64,
    /// The chain value after the entry before it.
    chain: Hash,
    /// Committed fields the server answered as redacted: (entry, path).
    claimed: std::collections::BTreeSet<(u64, String)>,
    /// Redactions the walked entries record: (entry, path).
    recorded: std::collections::BTreeSet<(u64, String)>,
    /// Disclosures checked against their leaves.
    pub disclosed: u64,
    /// One value, one handle, over the entries this walk met (a walk that
    /// starts past entry 0 checks the handles given from there on).
    handles: events::handles::Audit,
}

impl Served {
    /// Entries from `next` on, after the chain value `chain`.
    pub(crate) fn from(next: u64, chain: Hash) -> Served {
        Served {
            next,
            chain,
            claimed: Default::default(),
            recorded: Default::default(),
            disclosed: 0,
            handles: Default::default(),
        }
    }

    /// Committed fields answered as redacted, each recorded by a
    /// `field.redacted` entry the walk met.
    pub(crate) fn redacted(&self) -> u64 {
        self.claimed.len() as u64
    }

    /// Once the walk is over: every field answered as redacted must be
    /// recorded as redacted by an entry of the walk (a redaction comes
    /// after the entry it redacts). Otherwise the server withholds a
    /// disclosure under a redaction that the log does not hold.
    pub(crate) fn finish(&self) -> Result<(), CheckError> {
        match self.claimed.iter().find(|c| !self.recorded.contains(*c)) {
            None => Ok(()),
            Some((entry, path)) => Err(CheckError::Disproved(format!(
                "entry {entry}: `{path}` is answered as redacted, but no `field.redacted` entry below {} records it (a redaction appended while this ran is past the checkpoint: run again)",
                self.next
            ))),
        }
    }

    /// Checks `e` as the next entry; its leaf bytes and leaf hash.
    pub(crate) fn check(&mut self, e: &EntryView) -> Result<(Vec<u8>, Hash), CheckError> {
        let next = self.next;
        if e.index != next {
            return Err(CheckError::Disproved(format!(
                "the server returned entry {} where {next} was expected",
                e.index
            )));
        }
        let leaf = B64
            .decode(&e.leaf)
            .map_err(|_| CheckError::Disproved(format!("entry {next}: the leaf is not base64")))?;
        let lh = ledger::leaf_hash(&leaf);
        if ledger::hash::to_hex(&lh) != e.leaf_hash {
            return Err(CheckError::Disproved(format!(
                "first bad index {next}: the leaf does not hash to the leaf hash served"
            )));
        }
        let chain = ledger::chain_hash(&self.chain, &leaf);
        if ledger::hash::to_hex(&chain) != e.chain_hash {
            return Err(CheckError::Disproved(format!(
                "first bad index {next}: the chain hash served is not the chain of the entries"
            )));
        }
        // The leaf is decoded when its disclosures are served (a reader
        // with a role), and for the kinds that give handles or redact: the
        // served kind picks those, and a server that mislabels one is
        // caught below, for a walk with a role, by the decoded leaf.
        let decoded = if e.disclosures.is_some() {
            Some(events::decode_logged_leaf(&leaf).map_err(|r| {
                CheckError::Disproved(format!("entry {next}: the leaf does not decode: {r}"))
            })?)
        } else if events::disclose::NAMING_KINDS
            .iter()
            .chain([&events::Kind::FieldRedacted])
            .any(|k| k.as_str() == e.kind)
        {
            // A leaf that does not decode is left to the proofs and the
            // replay, which say where it breaks.
            events::decode_logged_leaf(&leaf).ok()
        } else {
            None
        };
        let mut opened = None;
        if let (Some(disclosures), Some((d, _))) = (&e.disclosures, &decoded) {
            if d.payload.event.kind().as_str() != e.kind {
                return Err(CheckError::Disproved(format!(
                    "entry {next}: served as `{}`, but its leaf is a `{}`",
                    e.kind,
                    d.payload.event.kind().as_str()
                )));
            }
            let o = events::disclose::check_disclosed(&d.payload.event, disclosures)
                .map_err(|err| CheckError::Disproved(format!("entry {next}: {err}")))?;
            let redacted = e.redacted.clone().unwrap_or_default();
            for d in &o {
                let said = redacted.iter().any(|r| r == d.path);
                match (&d.value, said) {
                    (Some(_), false) => self.disclosed += 1,
                    (None, true) => {
                        self.claimed.insert((next, d.path.to_owned()));
                    }
                    (Some(_), true) => {
                        return Err(CheckError::Disproved(format!(
                            "entry {next}: `{}` is both disclosed and answered as redacted",
                            d.path
                        )))
                    }
                    (None, false) => {
                        return Err(CheckError::Disproved(format!(
                            "entry {next}: `{}` is neither disclosed nor answered as redacted",
                            d.path
                        )))
                    }
                }
            }
            if let Some(r) = redacted.iter().find(|r| !o.iter().any(|d| d.path == *r)) {
                return Err(CheckError::Disproved(format!(
                    "entry {next}: `{r}` is answered as redacted, but the entry commits to no such field"
                )));
            }
            opened = Some(o);
        }
        // One value, one handle (docs/PRIVACY.md, "Handles"): from the
        // disclosures served to a reader with a role, and from the values
        // in clear before a log's switch to schema 3.
        if let Some((d, _)) = &decoded {
            self.handles
                .see(next, &d.payload, opened.as_deref())
                .map_err(CheckError::Disproved)?;
        }
        // Only a redaction can answer for a field answered as redacted,
        // and it comes after that field's entry: leaves are decoded for it
        // only once there is something to answer for. The served kind only
        // picks which to decode; a server that hides a redaction's kind
        // leaves its claim unanswered, and the walk fails.
        if !self.claimed.is_empty() && e.kind == "field.redacted" {
            if let Ok((d, _)) = events::decode_logged_leaf(&leaf) {
                if let events::Event::FieldRedacted(r) = &d.payload.event {
                    self.recorded.insert((r.entry, r.field.clone()));
                }
            }
        }
        self.chain = chain;
        self.next += 1;
        Ok((leaf, lh))
    }
}

/// Checks the disclosures served with entry `index` against the
/// commitments in its leaf (docs/PRIVACY.md): each must open a committed
/// field of this entry, the one it names.
pub fn check_disclosures(
    index: u64,
    leaf: &[u8],
    disclosures: &[String],
) -> Result<(), CheckError> {
    open_disclosures(index, leaf, disclosures).map(|_| ())
}

/// [`check_disclosures`], returning each committed field of the entry with
/// its disclosed value, or none.
fn open_disclosures(
    index: u64,
    leaf: &[u8],
    disclosures: &[String],
) -> Result<Vec<events::disclose::Disclosed>, CheckError> {
    let (d, _) = events::decode_logged_leaf(leaf).map_err(|r| {
        CheckError::Disproved(format!("entry {index}: the leaf does not decode: {r}"))
    })?;
    events::disclose::check_disclosed(&d.payload.event, disclosures)
        .map_err(|e| CheckError::Disproved(format!("entry {index}: {e}")))
}
