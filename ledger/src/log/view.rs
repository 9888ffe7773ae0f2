//! What a [`super::Sequencer`] may read while the committer decides a batch:
//! the committed log at one snapshot.

use crate::error::Error;
use crate::hash::Hash;
use crate::lookup::Lookups;
use crate::store::{Head, Reader, Snapshot};

use super::reads::{checked_entries, checked_entry};
use super::Entry;

/// The committed log, as the committer sees it between batches.
pub struct LogView<'a> {
    snap: &'a Snapshot,
    head: Head,
    lookups: Option<&'a Lookups>,
    private: Option<PrivateReader<'a>>,
}

/// Reads the private parts of a committed entry ([`crate::private`]):
/// `read(index, None)` every part, in order; `read(index, Some(p))` part
/// `p` alone (one item, or none when the entry has no part `p`), which on
/// PostgreSQL reads one key rather than one per part.
pub type PrivateReader<'a> =
    &'a dyn Fn(u64, Option<usize>) -> Result<Vec<crate::private::Part>, Error>;

impl<'a> LogView<'a> {
    /// A view of `snap` as of `head`, with the log's lookups.
    pub fn new(snap: &'a Snapshot, head: Head, lookups: &'a Lookups) -> Self {
        LogView {
            snap,
            head,
            lookups: Some(lookups),
            private: None,
        }
    }

    /// A view of `snap` as of `head` for a replay, which reads entries in
    /// order and never looks one up by key: it need not wait while a start
    /// opens the lookups. A lookup through it is an error.
    pub fn without_lookups(snap: &'a Snapshot, head: Head) -> Self {
        LogView {
            snap,
            head,
            lookups: None,
            private: None,
        }
    }

    /// This view, with the private parts of its entries readable through
    /// `read` ([`LogView::private_parts`]).
    pub fn with_private(mut self, read: PrivateReader<'a>) -> Self {
        self.private = Some(read);
        self
    }

    /// The private parts of committed entry `index`, as
    /// [`crate::Ledger::private_parts`] reads them; an error when this view
    /// was made without them.
    pub fn private_parts(&self, index: u64) -> Result<Vec<crate::private::Part>, Error> {
        self.read_private(index, None)
    }

    /// Private part `part` of committed entry `index`, alone: `None` when
    /// the entry has no such part.
    pub fn private_part(
        &self,
        index: u64,
        part: usize,
    ) -> Result<Option<crate::private::Part>, Error> {
        Ok(self.read_private(index, Some(part))?.into_iter().next())
    }

    fn read_private(
        &self,
        index: u64,
        only: Option<usize>,
    ) -> Result<Vec<crate::private::Part>, Error> {
        if index >= self.head.size {
            return Err(Error::IndexOutOfRange {
                index,
                size: self.head.size,
            });
        }
        match self.private {
            Some(read) => read(index, only),
            None => Err(crate::lookup::lookup_err(
                "this view of the log does not read private parts",
            )),
        }
    }

    fn lookups(&self) -> Result<&'a Lookups, Error> {
        self.lookups
            .ok_or_else(|| crate::lookup::lookup_err("a replay's view of the log has none"))
    }

    /// Whether the key lookup covers every committed entry. The ledger
    /// makes it so on open and after every commit; `false` (writing the
    /// lookups failed) means a lookup could miss a key.
    pub fn keys_complete(&self) -> Result<bool, Error> {
        Ok(self.lookups()?.keys_through() >= self.head.size)
    }

    /// The index and content digest recorded for an entry key, if any and
    /// committed. Derived data: check it against [`LogView::entry`].
    pub fn entry_key(&self, name: &str) -> Result<Option<(u64, [u8; 32])>, Error> {
        Ok(self
            .lookups()?
            .key(name)?
            .filter(|(index, _)| *index < self.head.size))
    }

    /// The committed head (entries of the batch being sequenced are not in it).
    pub fn head(&self) -> Head {
        self.head
    }

    /// The root of the committed tree at `size` (at most the head's size).
    pub fn root_at(&self, size: u64) -> Result<Hash, Error> {
        if size > self.head.size {
            return Err(Error::InvalidSize {
                size,
                rule: "must not exceed the committed tree size",
            });
        }
        let r = Reader::new(self.snap);
        tlog_tiles::tree_hash(size, &r).map_err(|e| r.take_err(e))
    }

    /// Derived state saved under `name` ([`Ledger::put_aux`]), if any.
    pub fn aux(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        self.snap.aux(name)
    }

    /// A checked committed entry.
    pub fn entry(&self, index: u64) -> Result<Entry, Error> {
        if index >= self.head.size {
            return Err(Error::IndexOutOfRange {
                index,
                size: self.head.size,
            });
        }
        checked_entry(self.snap, index)
    }

    /// The checked committed entries `start..end` (`end` clamped to the
    /// head), read in one pass: on PostgreSQL two queries for the run
    /// rather than two per entry, on the file each bundle decoded once.
    pub fn entries(&self, start: u64, end: u64) -> Result<Vec<Entry>, Error> {
        checked_entries(self.snap, start, end.min(self.head.size))
    }
}
