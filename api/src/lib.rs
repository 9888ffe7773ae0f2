//! # api: the HTTP server and the `ledger` program
//!
//! The server answers with the wire types of `verifier::wire` and turns
//! errors into `application/problem+json` in exactly one place ([`error`]).
//! The checks a client runs on those answers live in `verifier`; the bytes
//! that are hashed and signed belong to `ledger` and `events`.

#![forbid(unsafe_code)]

pub mod anchor;
pub mod config;
pub mod demo;
pub mod error;
pub mod init;
pub mod listen;
pub mod metrics;
pub mod readers;
pub mod rekor;
pub mod server;
pub mod tiles;
pub mod witness;
