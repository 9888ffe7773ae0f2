//! # events: signed domain events on the log
//!
//! The catalogue ([`model`]), canonical bytes ([`canonical`]), DSSE
//! envelopes and leaf records ([`envelope`]), sensitive values as
//! commitments ([`disclose`]) and the door's index of handles
//! ([`handles`]), strict Ed25519 verification
//! ([`ed25519`]), refusals and their codes ([`reject`]), the rules, one
//! module per aggregate ([`state`]), their place in the committer
//! ([`sequencer`]), and the sample bench the demo, tests and benchmarks
//! build on ([`sample`]). docs/EVENTS.md documents every event, who may
//! write it and its rules.

pub mod canonical;
pub mod disclose;
pub mod ed25519;
pub mod envelope;
pub mod handles;
pub mod model;
pub mod reject;
pub mod sample;
pub mod sequencer;
pub mod state;

pub use envelope::{
    anchor_published_envelope, cosign, decode_envelope, decode_leaf, decode_logged_leaf,
    generate_key, key_id, sign_envelope,
};
pub use model::{Event, Kind, Payload, Role, Tier};
pub use reject::{RejectCode, Rejection};
pub use sequencer::{
    genesis_envelopes, Accepted, Clock, EventLog, EventSequencer, HeldDoor, ManualClock,
    SystemClock,
};
pub use state::{sigstore_principal_id, sigstore_statement, State, StateDelta};
