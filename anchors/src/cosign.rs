//! Witness cosignatures (C2SP tlog-cosignature, Ed25519, signature type
//! 0x04) and witness policies (C2SP tlog-policy).
//!
//! A cosignature is a note signature line `— <name> base64(key ID ‖
//! timestamp ‖ signature)`: the key ID is `SHA-256(name ‖ "\n" ‖ 0x04 ‖
//! public key)[:4]`, the timestamp a big-endian u64 of POSIX seconds, and
//! the Ed25519 signature covers `cosignature/v1\ntime <timestamp>\n` followed
//! by the checkpoint's note text. It states that, at that time, this was the
//! largest tree the witness had seen of the log and that it was consistent
//! with every earlier one it had seen. It says nothing about the entries.
//!
//! `signed_note` verifies only type 0x01; [`CosignatureVerifier`] is the
//! type 0x04 verifier, plugged into its note verification.

use std::collections::{BTreeMap, BTreeSet};

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use signed_note::{Note, Verifier, VerifierList};

use crate::checkpoint::{CheckpointError, VerifiedCheckpoint};

/// The signature type byte of an Ed25519 cosignature.
pub const COSIGNATURE_TYPE: u8 = 0x04;

fn key_id(name: &str, public: &[u8; 32]) -> u32 {
    let mut typed = vec![COSIGNATURE_TYPE];
    typed.extend_from_slice(public);
    signed_note::key_id(name, &typed)
}

/// The message a cosignature signs.
pub fn cosigned_message(text: &[u8], timestamp: u64) -> Vec<u8> {
    let mut m = format!("cosignature/v1\ntime {timestamp}\n").into_bytes();
    m.extend_from_slice(text);
    m
}

/// A witness's cosigning key.
pub struct CosignerKey {
    name: String,
    seed: [u8; 32],
    id: u32,
}

impl std::fmt::Debug for CosignerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CosignerKey")
            .field("verifier_key", &self.verifier_key())
            .finish_non_exhaustive()
    }
}

impl CosignerKey {
    /// A cosigner key from a 32-byte Ed25519 seed; `name` is the witness's
    /// key name (a schemaless URL by convention).
    pub fn from_seed(name: &str, seed: [u8; 32]) -> Result<CosignerKey, CheckpointError> {
        if !signed_note::is_key_name_valid(name) {
            return Err(CheckpointError::MalformedKey(format!(
                "`{name}` is not a valid key name"
            )));
        }
        let public = SigningKey::from_bytes(&seed).verifying_key().to_bytes();
        Ok(CosignerKey {
            name: name.to_owned(),
            seed,
            id: key_id(name, &public),
        })
    }

    /// A new random cosigner key.
    pub fn generate(name: &str) -> Result<CosignerKey, CheckpointError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed)
            .map_err(|e| CheckpointError::MalformedKey(format!("no randomness: {e}")))?;
        CosignerKey::from_seed(name, seed)
    }

    /// Parses `PRIVATE+KEY+name+hash+base64(0x04‖seed)`.
    pub fn from_private(skey: &str) -> Result<CosignerKey, CheckpointError> {
        let p = crate::checkpoint::parse_private(
            skey,
            COSIGNATURE_TYPE,
            "an Ed25519 cosignature (type 0x04)",
        )?;
        let key = CosignerKey::from_seed(p.name, p.seed)?;
        if format!("{:08x}", key.id) != p.hash {
            return Err(CheckpointError::MalformedKey(
                "key hash does not match the name and key".into(),
            ));
        }
        Ok(key)
    }

    /// The signer key string (keep it secret).
    pub fn private_key(&self) -> String {
        let mut typed = vec![COSIGNATURE_TYPE];
        typed.extend_from_slice(&self.seed);
        format!(
            "PRIVATE+KEY+{}+{:08x}+{}",
            self.name,
            self.id,
            B64.encode(&typed)
        )
    }

    /// The verifier key `name+hash+base64(0x04‖public key)`.
    pub fn verifier_key(&self) -> String {
        let mut typed = vec![COSIGNATURE_TYPE];
        typed.extend_from_slice(
            &SigningKey::from_bytes(&self.seed)
                .verifying_key()
                .to_bytes(),
        );
        format!("{}+{:08x}+{}", self.name, self.id, B64.encode(&typed))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The cosignature line (with its newline) over note text `text` at
    /// `timestamp` (POSIX seconds, below 2^63).
    pub fn cosign(&self, text: &[u8], timestamp: u64) -> String {
        let sig = SigningKey::from_bytes(&self.seed).sign(&cosigned_message(text, timestamp));
        let mut blob = self.id.to_be_bytes().to_vec();
        blob.extend_from_slice(&timestamp.to_be_bytes());
        blob.extend_from_slice(&sig.to_bytes());
        format!("— {} {}\n", self.name, B64.encode(blob))
    }
}

/// Verifies type 0x04 cosignatures of one witness.
#[derive(Debug, Clone)]
pub struct CosignatureVerifier {
    name: String,
    id: u32,
    key: VerifyingKey,
    vkey: String,
}

impl CosignatureVerifier {
    /// Parses a verifier key `name+hash+base64(0x04‖public key)`.
    pub fn new(vkey: &str) -> Result<CosignatureVerifier, CheckpointError> {
        let bad = |m: &str| CheckpointError::MalformedKey(format!("`{vkey}`: {m}"));
        let mut parts = vkey.trim().splitn(3, '+');
        let (Some(name), Some(hash), Some(b64)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("expected name+hash+key"));
        };
        if !signed_note::is_key_name_valid(name) {
            return Err(bad("not a valid key name"));
        }
        let typed = B64.decode(b64).map_err(|_| bad("key is not base64"))?;
        let [COSIGNATURE_TYPE, public @ ..] = typed.as_slice() else {
            return Err(bad("not an Ed25519 cosignature (type 0x04) key"));
        };
        let public: [u8; 32] = public
            .try_into()
            .map_err(|_| bad("an Ed25519 key is 32 bytes"))?;
        let key = VerifyingKey::from_bytes(&public).map_err(|_| bad("not an Ed25519 point"))?;
        let id = key_id(name, &public);
        if format!("{id:08x}") != hash {
            return Err(bad("key hash does not match the name and key"));
        }
        Ok(CosignatureVerifier {
            name: name.to_owned(),
            id,
            key,
            vkey: vkey.trim().to_owned(),
        })
    }

    pub fn vkey(&self) -> &str {
        &self.vkey
    }

    /// The raw public key, to compare witnesses for duplicates.
    pub fn public_key(&self) -> [u8; 32] {
        self.key.to_bytes()
    }
}

impl Verifier for CosignatureVerifier {
    fn name(&self) -> &str {
        &self.name
    }

    fn key_id(&self) -> u32 {
        self.id
    }

    fn verify(&self, msg: &[u8], sig: &[u8]) -> bool {
        let Some((ts, sig)) = sig.split_first_chunk::<8>() else {
            return false;
        };
        let ts = u64::from_be_bytes(*ts);
        let Ok(sig) = <[u8; 64]>::try_from(sig) else {
            return false;
        };
        ts < 1 << 63
            && self
                .key
                .verify_strict(
                    &cosigned_message(msg, ts),
                    &ed25519_dalek::Signature::from_bytes(&sig),
                )
                .is_ok()
    }
}

/// A cosignature that verified: the witness's name and its timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cosigned {
    pub witness: String,
    pub timestamp: u64,
}

/// The cosignatures on `note` by any of `witnesses` that verify; lines by
/// other keys are ignored. A line that names a known witness's key but does
/// not verify is an error: the note was tampered with.
pub fn cosignatures(
    note: &[u8],
    witnesses: &[CosignatureVerifier],
) -> Result<Vec<Cosigned>, CheckpointError> {
    let n = Note::from_bytes(note).map_err(|e| CheckpointError::MalformedNote(e.to_string()))?;
    let list = VerifierList::new(
        witnesses
            .iter()
            .map(|w| Box::new(w.clone()) as Box<dyn Verifier>)
            .collect(),
    );
    match n.verify(&list) {
        Ok((verified, _)) => Ok(verified
            .iter()
            .filter_map(|s| {
                let ts = s.signature().first_chunk::<8>()?;
                Some(Cosigned {
                    witness: s.name().to_owned(),
                    timestamp: u64::from_be_bytes(*ts),
                })
            })
            .collect()),
        Err(signed_note::NoteError::UnverifiedNote) => Ok(Vec::new()),
        Err(e) => Err(CheckpointError::BadSignature(format!("a cosignature: {e}"))),
    }
}

/// A witness a policy names.
#[derive(Debug, Clone)]
pub struct Witness {
    /// The policy's name for it (not the key name).
    pub name: String,
    pub verifier: CosignatureVerifier,
    /// Its tlog-witness submission prefix, when given.
    pub url: Option<String>,
}

#[derive(Debug, Clone)]
enum Member {
    Witness(usize),
    Group(usize),
}

#[derive(Debug, Clone)]
struct Group {
    k: usize,
    members: Vec<Member>,
}

/// Why a policy file was refused, or a checkpoint fails it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("policy line {line}: {rule}")]
    Syntax { line: usize, rule: String },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("the policy does not list the log key `{0}`")]
    LogNotListed(String),
    #[error(
        "the checkpoint lacks a witness quorum: cosigned by {have:?}, the policy needs {needs}"
    )]
    NoQuorum { have: Vec<String>, needs: String },
}

/// A C2SP tlog-policy: the logs, the witnesses and the quorum a checkpoint
/// must meet.
#[derive(Debug, Clone)]
pub struct Policy {
    logs: Vec<String>,
    witnesses: Vec<Witness>,
    groups: Vec<(String, Group)>,
    quorum: Option<Member>,
    quorum_name: String,
}

/// A checkpoint signed by the log and cosigned by a quorum of witnesses.
#[derive(Debug, Clone, PartialEq)]
pub struct WitnessedCheckpoint {
    pub checkpoint: VerifiedCheckpoint,
    pub cosigned: Vec<Cosigned>,
}

impl Policy {
    /// Parses a policy file (C2SP tlog-policy).
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let mut logs: Vec<String> = Vec::new();
        let mut witnesses: Vec<Witness> = Vec::new();
        let mut groups: Vec<(String, Group)> = Vec::new();
        let mut quorum: Option<(Option<Member>, String)> = None;
        let mut names: BTreeMap<String, Member> = BTreeMap::new();
        for (i, raw) in text.split('\n').enumerate() {
            let line = i + 1;
            let err = |rule: String| PolicyError::Syntax { line, rule };
            if raw.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
                return Err(err("only tab and newline may be control characters".into()));
            }
            let words: Vec<&str> = raw.split([' ', '\t']).filter(|w| !w.is_empty()).collect();
            match words.as_slice() {
                [] => {}
                [first, ..] if first.starts_with('#') => {}
                ["log", vkey] | ["log", vkey, _] => {
                    signed_note::StandardVerifier::new(vkey)
                        .map_err(|e| err(format!("log key `{vkey}`: {e}")))?;
                    // Duplicates are the same public key, whatever the name.
                    let public = |k: &str| k.splitn(3, '+').nth(2).map(str::to_owned);
                    if logs.iter().any(|l| public(l) == public(vkey)) {
                        return Err(err(format!("log `{vkey}` repeats another log's key")));
                    }
                    logs.push((*vkey).to_owned());
                }
                ["witness", name, vkey] | ["witness", name, vkey, _] => {
                    let verifier = CosignatureVerifier::new(vkey)
                        .map_err(|e| err(format!("witness `{name}`: {e}")))?;
                    if *name == "none" || names.contains_key(*name) {
                        return Err(err(format!("the name `{name}` is already defined")));
                    }
                    if witnesses
                        .iter()
                        .any(|w| w.verifier.public_key() == verifier.public_key())
                    {
                        return Err(err(format!("witness `{name}` repeats another's key")));
                    }
                    // Two keys whose lines look alike (same key name and key
                    // ID) would make each other's cosignatures unreadable.
                    if witnesses.iter().any(|w| {
                        w.verifier.name == verifier.name && w.verifier.id == verifier.id
                    }) {
                        return Err(err(format!(
                            "witness `{name}` has another witness's key name and key ID"
                        )));
                    }
                    names.insert((*name).to_owned(), Member::Witness(witnesses.len()));
                    witnesses.push(Witness {
                        name: (*name).to_owned(),
                        verifier,
                        url: words.get(3).map(|u| u.trim_end_matches('/').to_owned()),
                    });
                }
                ["group", name, k, members @ ..] => {
                    if members.is_empty() {
                        return Err(err(format!("group `{name}` has no members")));
                    }
                    if *name == "none" || names.contains_key(*name) {
                        return Err(err(format!("the name `{name}` is already defined")));
                    }
                    let mut seen = BTreeSet::new();
                    let mut ms = Vec::new();
                    for m in members {
                        let Some(member) = names.get(*m) else {
                            return Err(err(format!(
                                "group `{name}`: `{m}` is not defined on an earlier line"
                            )));
                        };
                        if !seen.insert(*m) {
                            return Err(err(format!("group `{name}` lists `{m}` twice")));
                        }
                        ms.push(member.clone());
                    }
                    let n = ms.len();
                    let k = match *k {
                        "all" => n,
                        "any" => 1,
                        k => match k.parse::<usize>() {
                            Ok(v) if (1..=n).contains(&v) && v.to_string() == k => v,
                            _ => {
                                return Err(err(format!(
                                    "group `{name}`: the threshold must be all, any or 1 to {n}"
                                )))
                            }
                        },
                    };
                    names.insert((*name).to_owned(), Member::Group(groups.len()));
                    groups.push(((*name).to_owned(), Group { k, members: ms }));
                }
                ["quorum", name] => {
                    if quorum.is_some() {
                        return Err(err("a policy has exactly one quorum line".into()));
                    }
                    let member = if *name == "none" {
                        None
                    } else {
                        Some(names.get(*name).cloned().ok_or_else(|| {
                            err(format!("quorum `{name}` is not defined on an earlier line"))
                        })?)
                    };
                    quorum = Some((member, (*name).to_owned()));
                }
                [word, ..] => {
                    return Err(err(format!(
                        "`{word}` is not log, witness, group or quorum (or the line has the wrong number of items)"
                    )))
                }
            }
        }
        let (quorum, quorum_name) = quorum.ok_or(PolicyError::Syntax {
            line: 0,
            rule: "a policy needs a quorum line".into(),
        })?;
        Ok(Policy {
            logs,
            witnesses,
            groups,
            quorum,
            quorum_name,
        })
    }

    pub fn witnesses(&self) -> &[Witness] {
        &self.witnesses
    }

    /// Whether the quorum needs any cosignature at all.
    pub fn needs_witnesses(&self) -> bool {
        self.quorum.is_some()
    }

    /// Whether the witnesses named in `cosigned` (policy names) satisfy the
    /// quorum.
    pub fn satisfied_by(&self, cosigned: &BTreeSet<String>) -> bool {
        match &self.quorum {
            None => true,
            Some(m) => self.holds(m, cosigned),
        }
    }

    fn holds(&self, m: &Member, cosigned: &BTreeSet<String>) -> bool {
        match m {
            Member::Witness(i) => cosigned.contains(&self.witnesses[*i].name),
            Member::Group(g) => {
                let group = &self.groups[*g].1;
                group
                    .members
                    .iter()
                    .filter(|m| self.holds(m, cosigned))
                    .count()
                    >= group.k
            }
        }
    }

    /// Checks that `vkey` may sign checkpoints under this policy: listed,
    /// or the policy lists no log at all.
    pub fn allows_log(&self, vkey: &str) -> Result<(), PolicyError> {
        if self.logs.is_empty() || self.logs.iter().any(|l| l == vkey) {
            Ok(())
        } else {
            Err(PolicyError::LogNotListed(vkey.to_owned()))
        }
    }

    /// Opens `note`: signed by the log key `vkey` (which the policy must
    /// allow), and cosigned by witnesses that meet the quorum.
    pub fn open_checkpoint(
        &self,
        note: &[u8],
        vkey: &str,
    ) -> Result<WitnessedCheckpoint, PolicyError> {
        self.allows_log(vkey)?;
        let checkpoint = crate::checkpoint::open_checkpoint(note, vkey)?;
        // The quorum is in the policy's names: a witness counts when a
        // cosignature by its own key (name and key ID) verifies.
        let mut cosigned = Vec::new();
        let mut names = BTreeSet::new();
        for w in &self.witnesses {
            // A line that does not verify counts for nobody (it may be a
            // forgery, or another key's look-alike); it does not stop the
            // others from counting.
            let found = cosignatures(note, std::slice::from_ref(&w.verifier)).unwrap_or_default();
            if !found.is_empty() {
                names.insert(w.name.clone());
                cosigned.extend(found);
            }
        }
        if !self.satisfied_by(&names) {
            return Err(PolicyError::NoQuorum {
                have: names.into_iter().collect(),
                needs: self.quorum_name.clone(),
            });
        }
        Ok(WitnessedCheckpoint {
            checkpoint,
            cosigned,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::LogKey;

    fn body() -> &'static [u8] {
        b"example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"
    }

    #[test]
    fn the_spec_example_line_frames_a_timestamped_signature() {
        // c2sp.org/tlog-cosignature's example line: key ID ‖ u64 timestamp
        // ‖ 64-byte signature, with the timestamp of its message example.
        // The specification publishes no key for it.
        let line = "jWbPPwAAAABkGFDLEZMHwSRaJNiIDoe9DYn/zXcrtPHeolMI5OWXEhZCB9dlrDJsX3b2oyin1nPZqhf5nNo0xUe+mbIUBkBIfZ+qnA==";
        let blob = B64.decode(line).expect("base64");
        assert_eq!(blob.len(), 4 + 8 + 64);
        assert_eq!(&blob[..4], &[0x8d, 0x66, 0xcf, 0x3f]);
        assert_eq!(
            u64::from_be_bytes(blob[4..12].try_into().expect("8")),
            1_679_315_147
        );
        // And the message layout of the specification's example.
        assert_eq!(
            cosigned_message(body(), 1_679_315_147),
            b"cosignature/v1\ntime 1679315147\nexample.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n".to_vec()
        );
    }

    #[test]
    fn a_cosignature_verifies_and_every_change_is_refused() {
        let w = CosignerKey::from_seed("witness.example/w1", [7; 32]).expect("key");
        let v = CosignatureVerifier::new(&w.verifier_key()).expect("vkey");
        assert!(w.verifier_key().starts_with("witness.example/w1+"));
        let back = CosignerKey::from_private(&w.private_key()).expect("skey");
        assert_eq!(back.verifier_key(), w.verifier_key());
        let log = LogKey::from_seed("example.com/log", [1; 32]).expect("log key");
        let note = log
            .sign_checkpoint(5, &ledger::Hash([3; 32]))
            .expect("note");
        let text = note.split_once("\n\n").expect("text").0.to_owned() + "\n";
        let cosigned = format!("{note}{}", w.cosign(text.as_bytes(), 1_700_000_000));
        let got = cosignatures(cosigned.as_bytes(), std::slice::from_ref(&v)).expect("verifies");
        assert_eq!(
            got,
            [Cosigned {
                witness: "witness.example/w1".into(),
                timestamp: 1_700_000_000
            }]
        );
        // The log's own signature still opens the note.
        crate::checkpoint::open_checkpoint(cosigned.as_bytes(), log.verifier_key()).expect("log");
        // Another timestamp under the same signature, another body, another key.
        let line = w.cosign(text.as_bytes(), 1_700_000_000);
        let mut blob = B64
            .decode(line.trim_end().rsplit(' ').next().expect("b64"))
            .expect("base64");
        blob[11] ^= 1;
        let forged = format!("{note}— witness.example/w1 {}\n", B64.encode(&blob));
        assert!(cosignatures(forged.as_bytes(), std::slice::from_ref(&v)).is_err());
        let other = log
            .sign_checkpoint(6, &ledger::Hash([3; 32]))
            .expect("note");
        let moved = format!("{other}{line}");
        assert!(cosignatures(moved.as_bytes(), std::slice::from_ref(&v)).is_err());
        let stranger = CosignerKey::from_seed("witness.example/w1", [8; 32]).expect("key");
        let foreign = format!("{note}{}", stranger.cosign(text.as_bytes(), 1));
        assert_eq!(
            cosignatures(foreign.as_bytes(), std::slice::from_ref(&v)).expect("ignored"),
            []
        );
        // A type 0x01 key is not a cosigner key.
        assert!(CosignatureVerifier::new(log.verifier_key()).is_err());
    }

    fn policy_with(ws: &[&CosignerKey], tail: &str) -> String {
        let mut p = String::from("# test policy\n");
        for (i, w) in ws.iter().enumerate() {
            p.push_str(&format!("witness w{i} {}\n", w.verifier_key()));
        }
        p + tail
    }

    #[test]
    fn quorums_count_witnesses_through_groups() {
        let ws: Vec<CosignerKey> = (0..3)
            .map(|i| CosignerKey::from_seed(&format!("w.example/{i}"), [i + 10; 32]).expect("key"))
            .collect();
        let refs: Vec<&CosignerKey> = ws.iter().collect();
        let log = LogKey::from_seed("example.com/log", [1; 32]).expect("log key");
        let note = log
            .sign_checkpoint(5, &ledger::Hash([3; 32]))
            .expect("note");
        let text = note.split_once("\n\n").expect("text").0.to_owned() + "\n";
        let with = |idx: &[usize]| {
            let mut n = note.clone();
            for i in idx {
                n.push_str(&ws[*i].cosign(text.as_bytes(), 1_700_000_000));
            }
            n
        };
        let two_of_three =
            Policy::parse(&policy_with(&refs, "group g 2 w0 w1 w2\nquorum g\n")).expect("policy");
        assert!(two_of_three
            .open_checkpoint(with(&[0, 2]).as_bytes(), log.verifier_key())
            .is_ok());
        assert!(matches!(
            two_of_three.open_checkpoint(with(&[1]).as_bytes(), log.verifier_key()),
            Err(PolicyError::NoQuorum { .. })
        ));
        let nested = Policy::parse(&policy_with(
            &refs,
            "group a any w0 w1\ngroup b all a w2\nquorum b\n",
        ))
        .expect("policy");
        assert!(nested
            .open_checkpoint(with(&[1, 2]).as_bytes(), log.verifier_key())
            .is_ok());
        assert!(nested
            .open_checkpoint(with(&[0, 1]).as_bytes(), log.verifier_key())
            .is_err());
        let none = Policy::parse("quorum none\n").expect("policy");
        assert!(none
            .open_checkpoint(note.as_bytes(), log.verifier_key())
            .is_ok());
        let listed =
            Policy::parse(&format!("log {}\nquorum none\n", log.verifier_key())).expect("policy");
        assert!(listed.allows_log(log.verifier_key()).is_ok());
        let other = LogKey::from_seed("example.com/other", [2; 32]).expect("key");
        assert!(matches!(
            listed.allows_log(other.verifier_key()),
            Err(PolicyError::LogNotListed(_))
        ));
    }

    #[test]
    fn malformed_policies_are_refused_with_their_line() {
        let w = CosignerKey::from_seed("w.example/0", [1; 32]).expect("key");
        let v = w.verifier_key();
        for (text, line) in [
            ("witness a notakey\nquorum a\n".to_owned(), 1),
            (format!("witness a {v}\nwitness b {v}\nquorum a\n"), 2),
            (format!("witness a {v}\ngroup g 2 a\nquorum g\n"), 2),
            (format!("witness a {v}\ngroup g 01 a\nquorum g\n"), 2),
            (format!("witness a {v}\ngroup g any a a\nquorum g\n"), 2),
            ("group g any x\nquorum g\n".to_owned(), 1),
            (format!("witness a {v}\nquorum b\n"), 2),
            (format!("witness a {v}\nquorum a\nquorum a\n"), 3),
            (format!("witness a {v}\nfrobnicate a\nquorum a\n"), 2),
            (format!("witness none {v}\nquorum none\n"), 1),
            (format!("witness a {v}\n"), 0),
        ] {
            match Policy::parse(&text) {
                Err(PolicyError::Syntax { line: l, .. }) => assert_eq!(l, line, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
