//! Signed checkpoints and the log key.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ledger::Hash;
use signed_note::{Note, Signer as _, StandardSigner, StandardVerifier, VerifierList};

/// Why a checkpoint or key was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error("malformed key: {0}")]
    MalformedKey(String),
    #[error("malformed signed note: {0}")]
    MalformedNote(String),
    #[error("no signature by the trusted key `{0}` verifies")]
    BadSignature(String),
    #[error("malformed checkpoint body")]
    MalformedCheckpoint,
    #[error("checkpoint origin `{found}` is not the log's origin `{expected}`")]
    WrongOrigin { expected: String, found: String },
}

/// The parts of a note signer key `PRIVATE+KEY+name+hash+base64(type‖seed)`.
pub(crate) struct PrivateKey<'a> {
    pub name: &'a str,
    pub hash: &'a str,
    /// The base64 text, as written.
    pub key: &'a str,
    pub seed: [u8; 32],
}

/// Splits a note signer key of signature type `ty` (`kind` names the type
/// in errors) into its parts; the caller checks the hash.
pub(crate) fn parse_private<'a>(
    skey: &'a str,
    ty: u8,
    kind: &str,
) -> Result<PrivateKey<'a>, CheckpointError> {
    let bad = |m: &str| CheckpointError::MalformedKey(m.to_owned());
    let rest = skey
        .trim()
        .strip_prefix("PRIVATE+KEY+")
        .ok_or_else(|| bad("missing PRIVATE+KEY+ prefix"))?;
    // Names never contain '+'; the base64 key may.
    let mut parts = rest.splitn(3, '+');
    let (Some(name), Some(hash), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("expected name+hash+key"));
    };
    let typed = B64.decode(key).map_err(|_| bad("key is not base64"))?;
    let seed = match typed.split_first() {
        Some((t, seed)) if *t == ty => seed,
        _ => return Err(bad(&format!("not {kind} key"))),
    };
    let seed: [u8; 32] = seed
        .try_into()
        .map_err(|_| bad("Ed25519 seed must be 32 bytes"))?;
    Ok(PrivateKey {
        name,
        hash,
        key,
        seed,
    })
}

/// The log's signing key: signs checkpoints, and derives the key the ledger
/// signs its own events with.
pub struct LogKey {
    origin: String,
    seed: [u8; 32],
    signer: StandardSigner,
    verifier_key: String,
}

impl std::fmt::Debug for LogKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogKey")
            .field("verifier_key", &self.verifier_key)
            .finish_non_exhaustive()
    }
}

fn key_hash(name: &str, public: &[u8; 32]) -> u32 {
    let mut typed = vec![0x01];
    typed.extend_from_slice(public);
    signed_note::key_id(name, &typed)
}

impl LogKey {
    /// A log key from a 32-byte Ed25519 seed. `origin` is the checkpoint
    /// origin line and the note key name (a schemaless URL by convention).
    pub fn from_seed(origin: &str, seed: [u8; 32]) -> Result<LogKey, CheckpointError> {
        if !signed_note::is_key_name_valid(origin) {
            return Err(CheckpointError::MalformedKey(format!(
                "`{origin}` is not a valid key name"
            )));
        }
        let public = ed25519_dalek::SigningKey::from_bytes(&seed)
            .verifying_key()
            .to_bytes();
        let hash = key_hash(origin, &public);
        let mut typed_seed = vec![0x01];
        typed_seed.extend_from_slice(&seed);
        let private = format!(
            "PRIVATE+KEY+{origin}+{hash:08x}+{}",
            B64.encode(&typed_seed)
        );
        let signer = StandardSigner::new(&private)
            .map_err(|e| CheckpointError::MalformedKey(e.to_string()))?;
        let mut typed_public = vec![0x01];
        typed_public.extend_from_slice(&public);
        Ok(LogKey {
            origin: origin.to_owned(),
            seed,
            signer,
            verifier_key: format!("{origin}+{hash:08x}+{}", B64.encode(&typed_public)),
        })
    }

    /// A new random log key.
    pub fn generate(origin: &str) -> Result<LogKey, CheckpointError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed)
            .map_err(|e| CheckpointError::MalformedKey(format!("no randomness: {e}")))?;
        LogKey::from_seed(origin, seed)
    }

    /// Parses a note signer key `PRIVATE+KEY+name+hash+base64(0x01‖seed)`.
    pub fn from_private(skey: &str) -> Result<LogKey, CheckpointError> {
        let p = parse_private(skey, 0x01, "an Ed25519 (type 0x01)")?;
        let key = LogKey::from_seed(p.name, p.seed)?;
        if !key
            .private_key()
            .ends_with(&format!("+{}+{}", p.hash, p.key))
        {
            return Err(CheckpointError::MalformedKey(
                "key hash does not match the name and key".into(),
            ));
        }
        Ok(key)
    }

    /// The note signer key string (keep it secret).
    pub fn private_key(&self) -> String {
        let mut typed_seed = vec![0x01];
        typed_seed.extend_from_slice(&self.seed);
        let hash = self.verifier_key.split('+').nth(1).unwrap_or_default();
        format!(
            "PRIVATE+KEY+{}+{hash}+{}",
            self.origin,
            B64.encode(&typed_seed)
        )
    }

    /// The note verifier key `name+hash+base64(0x01‖pubkey)`.
    pub fn verifier_key(&self) -> &str {
        &self.verifier_key
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The key itself as an Ed25519 signing key: how a principal's key file
    /// (same format) is used to sign envelopes.
    pub fn signing_key(&self) -> ed25519_dalek::SigningKey {
        ed25519_dalek::SigningKey::from_bytes(&self.seed)
    }

    /// The Ed25519 key the ledger signs its own events with (enrolled with
    /// the `ledger` role), derived from the log key's seed with BLAKE3's
    /// key derivation under a fixed context, so that one secret backs both
    /// and neither signature can stand for the other.
    pub fn event_signing_key(&self) -> ed25519_dalek::SigningKey {
        ed25519_dalek::SigningKey::from_bytes(&blake3::derive_key(
            "evidence-ledger/v1 event signing key",
            &self.seed,
        ))
    }

    /// The signed note of the checkpoint `(size, root)`.
    pub fn sign_checkpoint(&self, size: u64, root: &Hash) -> Result<String, CheckpointError> {
        let body = tlog_tiles::Checkpoint::new(&self.origin, size, *root, "")
            .map_err(|_| CheckpointError::MalformedCheckpoint)?
            .to_bytes();
        self.sign_text(&body)
    }

    /// Signs arbitrary note text (ends in a newline).
    pub fn sign_text(&self, text: &[u8]) -> Result<String, CheckpointError> {
        let mut note =
            Note::new(text, &[]).map_err(|e| CheckpointError::MalformedNote(e.to_string()))?;
        note.add_sigs(&[&self.signer])
            .map_err(|e| CheckpointError::MalformedNote(e.to_string()))?;
        String::from_utf8(note.to_bytes())
            .map_err(|e| CheckpointError::MalformedNote(e.to_string()))
    }

    /// The key name the signer signs as.
    pub fn name(&self) -> &str {
        self.signer.name()
    }
}

/// A checkpoint whose signature verified.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifiedCheckpoint {
    pub origin: String,
    pub size: u64,
    pub root: Hash,
}

/// Opens a checkpoint with the first of `keys` that verifies it (old keys
/// stay trusted after a rotation), and returns the key that did. A key that
/// does not parse is passed over like one that does not verify (a list of
/// trusted keys from a configuration keeps working when one entry is
/// wrong). With no key that verifies it, the error is the last key's.
pub fn open_checkpoint_any<'k>(
    note: &[u8],
    keys: &'k [String],
) -> Result<(VerifiedCheckpoint, &'k str), CheckpointError> {
    let mut last = CheckpointError::BadSignature("no trusted keys".into());
    for k in keys {
        match open_checkpoint(note, k) {
            Ok(cp) => return Ok((cp, k)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The text of a signed note (any statement, not only a checkpoint) signed
/// by the first of `keys` that verifies it, and that key. Unlike
/// [`open_checkpoint_any`], a key that does not parse is an error: the keys
/// are the ones a user typed to check one document.
pub fn open_note_any<'k>(
    note: &[u8],
    keys: &'k [String],
) -> Result<(Vec<u8>, &'k str), CheckpointError> {
    let n = Note::from_bytes(note).map_err(|e| CheckpointError::MalformedNote(e.to_string()))?;
    let mut last = CheckpointError::BadSignature("no trusted keys".into());
    for k in keys {
        let verifier =
            StandardVerifier::new(k).map_err(|e| CheckpointError::MalformedKey(e.to_string()))?;
        match n.verify(&VerifierList::new(vec![Box::new(verifier)])) {
            Ok((ok, _)) if !ok.is_empty() => return Ok((n.text().to_vec(), k)),
            _ => {
                last = CheckpointError::BadSignature(
                    k.split('+').next().unwrap_or_default().to_owned(),
                )
            }
        }
    }
    Err(last)
}

/// Verifies `note` with the verifier key `vkey` and parses its checkpoint
/// body. The origin must equal the key's name.
pub fn open_checkpoint(note: &[u8], vkey: &str) -> Result<VerifiedCheckpoint, CheckpointError> {
    let verifier =
        StandardVerifier::new(vkey).map_err(|e| CheckpointError::MalformedKey(e.to_string()))?;
    let name = vkey.split('+').next().unwrap_or_default().to_owned();
    let n = Note::from_bytes(note).map_err(|e| CheckpointError::MalformedNote(e.to_string()))?;
    let (verified, _) = n
        .verify(&VerifierList::new(vec![Box::new(verifier)]))
        .map_err(|_| CheckpointError::BadSignature(name.clone()))?;
    if verified.is_empty() {
        return Err(CheckpointError::BadSignature(name));
    }
    let cp = tlog_tiles::Checkpoint::from_bytes(n.text())
        .map_err(|_| CheckpointError::MalformedCheckpoint)?;
    if cp.origin() != name {
        return Err(CheckpointError::WrongOrigin {
            expected: name,
            found: cp.origin().to_owned(),
        });
    }
    Ok(VerifiedCheckpoint {
        origin: cp.origin().to_owned(),
        size: cp.size(),
        root: *cp.hash(),
    })
}
