//! # anchors: checkpoints, anchors, and checking a log against them
//!
//! A checkpoint is a C2SP `tlog-checkpoint` body (origin, tree size, base64
//! root) in a C2SP `signed-note` envelope, signed with the log's Ed25519 key.
//! Keys use the standard note formats (`name+hash+base64(0x01‖key)` for
//! verifiers, `PRIVATE+KEY+name+hash+base64(0x01‖seed)` for signers), so
//! standard note verifiers such as Go's `golang.org/x/mod/sumdb/note` accept
//! them unchanged. The note format and its verification come from the
//! `signed_note` crate; the checkpoint body from `tlog_tiles`.

#![forbid(unsafe_code)]

pub mod anchor;
pub mod checkpoint;
pub mod cosign;
pub mod git;

pub use anchor::{
    check_anchors, open_anchor, Anchor, AnchorError, AnchorTarget, DirTarget, LogAccess,
};
pub use checkpoint::{
    open_checkpoint, open_checkpoint_any, open_note_any, CheckpointError, LogKey,
    VerifiedCheckpoint,
};
pub use cosign::{CosignatureVerifier, CosignerKey, Policy, PolicyError, WitnessedCheckpoint};
pub use git::GitTarget;
