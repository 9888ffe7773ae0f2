//! # api: the HTTP server and the `ledger` program
//!
//! JSON stays here: the server has its own request and response types, and
//! turns errors into `application/problem+json` in exactly one place
//! ([`error`]). The bytes that are hashed and signed belong to `ledger`.

#![forbid(unsafe_code)]

pub mod audit;
pub mod backup;
pub mod check;
pub mod client;
pub mod config;
pub mod demo;
pub mod error;
pub mod init;
pub mod listen;
pub mod metrics;
pub mod server;
