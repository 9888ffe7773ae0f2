//! # verifier: the client side of Evidence Ledger
//!
//! What the promotion gate, an auditor or an operator runs against a
//! ledger, trusting nothing but the log's verifier key: the wire types the
//! server answers with ([`wire`]), a blocking HTTP client ([`client`]),
//! the checks of write receipts, projections and offline bundles, and the
//! bundle format itself, which the server signs with the same code
//! ([`check`]), the walk that re-hashes every entry into a signed root
//! ([`entries`]), the audit ([`audit`]) and its replay of the log that
//! checks projections for completeness ([`replay`]), the check of a
//! class's committed state, complete without replay ([`state`]), backup and verified restore
//! ([`backup`]), posting signed events with every receipt checked
//! ([`post`]), and reading key files ([`keys`]).
//!
//! It has no HTTP server and no storage of its own: the `api` crate's
//! server serializes the same [`wire`] types, and its `ledger` program
//! calls these checks.

#![forbid(unsafe_code)]

pub mod audit;
pub mod backup;
pub mod check;
pub mod client;
pub mod entries;
pub mod keys;
pub mod post;
pub mod replay;
pub mod state;
pub mod watch;
pub mod wire;

pub use check::{parse_hash, parse_proof};
pub use client::Client;
pub use entries::entries_verified;

/// Why a check of a server's answers did not pass.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// The answers contradict what the server signed, or a proof or a
    /// receipt does not verify: the message names what and where.
    #[error("{0}")]
    Disproved(String),
    /// The server could not be asked (network, status, a body that does not
    /// parse), or writing what was read failed.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}
