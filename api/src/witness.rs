//! A C2SP tlog-witness (`POST /add-checkpoint`): it cosigns a log's
//! checkpoint only when it is consistent with the last one it cosigned for
//! that log, so that a log cannot show two parties two different trees and
//! have both cosigned.
//!
//! For each known log (by origin) the witness keeps the latest checkpoint
//! it cosigned, in a file of its state directory. Checking the old size
//! against it and persisting the new one happen under one lock, and the new
//! state is fsynced and renamed into place before the cosignature is
//! returned: a witness killed at any point, then restarted, never cosigns
//! a tree that rolls back or forks one it has cosigned.
//!
//! Answers, as the protocol sets them: 200 with cosignature lines; 400 a
//! malformed request or an old size above the checkpoint's; 403 no
//! signature by a key trusted for the origin; 404 an unknown origin; 409
//! (`Content-Type: text/x.tlog.size`, the size it holds) the old size is not
//! the one it holds, or the same size with another root; 422 the
//! consistency proof does not verify.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anchors::CosignerKey;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ledger::Hash;

/// Consistency proof lines a request may carry (C2SP: at most 63).
pub const MAX_PROOF_LINES: usize = 63;

/// Why a checkpoint was not cosigned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WitnessError {
    #[error("malformed request: {0}")]
    BadRequest(String),
    #[error("no trusted key for the origin `{0}`")]
    UnknownLog(String),
    #[error("no signature by a key trusted for `{0}` verifies")]
    Forbidden(String),
    #[error("the witness holds size {0}")]
    Conflict(u64),
    #[error("the consistency proof does not verify: {0}")]
    BadProof(String),
    #[error("the witness could not persist its state: {0}")]
    Storage(String),
}

impl WitnessError {
    pub fn status(&self) -> StatusCode {
        match self {
            WitnessError::BadRequest(_) => StatusCode::BAD_REQUEST,
            WitnessError::UnknownLog(_) => StatusCode::NOT_FOUND,
            WitnessError::Forbidden(_) => StatusCode::FORBIDDEN,
            WitnessError::Conflict(_) => StatusCode::CONFLICT,
            WitnessError::BadProof(_) => StatusCode::UNPROCESSABLE_ENTITY,
            WitnessError::Storage(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            WitnessError::BadRequest(_) => "witness_bad_request",
            WitnessError::UnknownLog(_) => "witness_unknown_log",
            WitnessError::Forbidden(_) => "witness_untrusted_signature",
            WitnessError::Conflict(_) => "witness_size_conflict",
            WitnessError::BadProof(_) => "witness_inconsistent",
            WitnessError::Storage(_) => "witness_storage_unavailable",
        }
    }
}

impl IntoResponse for WitnessError {
    fn into_response(self) -> Response {
        if let WitnessError::Conflict(size) = self {
            return (
                StatusCode::CONFLICT,
                [(header::CONTENT_TYPE, "text/x.tlog.size")],
                format!("{size}\n"),
            )
                .into_response();
        }
        let status = self.status();
        let body = serde_json::json!({
            "type": format!("urn:evidence-ledger:problem:{}", self.code()),
            "title": status.canonical_reason().unwrap_or(""),
            "status": status.as_u16(),
            "detail": self.to_string(),
            "code": self.code(),
        });
        (
            status,
            [(header::CONTENT_TYPE, "application/problem+json")],
            body.to_string(),
        )
            .into_response()
    }
}

/// A witness: its cosigning key, the logs it follows and its state.
pub struct Witness {
    key: CosignerKey,
    /// Origin → the verifier keys trusted to sign its checkpoints.
    logs: BTreeMap<String, Vec<String>>,
    dir: PathBuf,
    lock: Mutex<()>,
    now: Box<dyn Fn() -> u64 + Send + Sync>,
}

/// A parsed `add-checkpoint` body.
struct Request<'a> {
    old: u64,
    proof: Vec<Hash>,
    note: &'a [u8],
}

fn parse_request(body: &[u8]) -> Result<Request<'_>, WitnessError> {
    let bad = |m: &str| WitnessError::BadRequest(m.to_owned());
    let mut rest = body;
    let mut line = || -> Result<&[u8], WitnessError> {
        let end = rest
            .iter()
            .position(|b| *b == b'\n')
            .ok_or_else(|| bad("every line ends with a newline"))?;
        let (l, r) = rest.split_at(end);
        rest = &r[1..];
        Ok(l)
    };
    let first = line()?;
    let old = std::str::from_utf8(first)
        .ok()
        .and_then(|l| l.strip_prefix("old "))
        .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
        .filter(|d| *d == "0" || !d.starts_with('0'))
        .and_then(|d| d.parse::<u64>().ok())
        .ok_or_else(|| {
            bad("the first line must be `old <size>`, a decimal without leading zeros")
        })?;
    let mut proof = Vec::new();
    loop {
        let l = line()?;
        if l.is_empty() {
            break;
        }
        if proof.len() == MAX_PROOF_LINES {
            return Err(bad("more than 63 consistency proof lines"));
        }
        let h: [u8; 32] = B64
            .decode(l)
            .ok()
            .and_then(|v| v.try_into().ok())
            .ok_or_else(|| bad("a proof line is not the base64 of a 32-byte hash"))?;
        proof.push(Hash(h));
    }
    Ok(Request {
        old,
        proof,
        note: rest,
    })
}

/// The origin line of a note, unverified (to find its keys).
fn origin_of(note: &[u8]) -> Option<&str> {
    let end = note.iter().position(|b| *b == b'\n')?;
    std::str::from_utf8(&note[..end]).ok()
}

impl Witness {
    /// A witness cosigning with `key` the logs whose verifier keys are
    /// `log_keys` (several keys may share an origin: a rotation), keeping
    /// its state in `dir`.
    pub fn open(key: CosignerKey, log_keys: &[String], dir: &Path) -> anyhow::Result<Witness> {
        let mut logs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for k in log_keys {
            signed_note::StandardVerifier::new(k)
                .map_err(|e| anyhow::anyhow!("log key `{k}`: {e}"))?;
            let origin = k.split('+').next().unwrap_or_default().to_owned();
            logs.entry(origin).or_default().push(k.clone());
        }
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("creating {}: {e}", dir.display()))?;
        Ok(Witness {
            key,
            logs,
            dir: dir.to_path_buf(),
            lock: Mutex::new(()),
            now: Box::new(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs())
            }),
        })
    }

    /// The witness's verifier key (`name+hash+base64(0x04‖key)`).
    pub fn verifier_key(&self) -> String {
        self.key.verifier_key()
    }

    fn state_path(&self, origin: &str) -> PathBuf {
        use sha2::Digest as _;
        let h = sha2::Sha256::digest(origin.as_bytes());
        self.dir.join(format!("{}.checkpoint", hex::encode(h)))
    }

    /// The latest checkpoint cosigned for `origin`: its size and root.
    pub fn latest(&self, origin: &str) -> Result<Option<(u64, Hash)>, WitnessError> {
        let path = self.state_path(origin);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(WitnessError::Storage(format!("{}: {e}", path.display()))),
        };
        let cp = tlog_tiles::Checkpoint::from_bytes(&text).map_err(|_| {
            WitnessError::Storage(format!("{} is not a checkpoint", path.display()))
        })?;
        if cp.origin() != origin {
            return Err(WitnessError::Storage(format!(
                "{} holds the origin `{}`",
                path.display(),
                cp.origin()
            )));
        }
        Ok(Some((cp.size(), *cp.hash())))
    }

    /// Handles one `add-checkpoint` body: the cosignature lines, or why not.
    pub fn add_checkpoint(&self, body: &[u8]) -> Result<String, WitnessError> {
        let req = parse_request(body)?;
        let origin = origin_of(req.note)
            .ok_or_else(|| WitnessError::BadRequest("the checkpoint has no origin line".into()))?
            .to_owned();
        let keys = self
            .logs
            .get(&origin)
            .ok_or_else(|| WitnessError::UnknownLog(origin.clone()))?;
        let cp = match anchors::open_checkpoint_any(req.note, keys) {
            Ok((cp, _)) => cp,
            Err(anchors::CheckpointError::MalformedNote(m)) => {
                return Err(WitnessError::BadRequest(format!("the checkpoint: {m}")))
            }
            Err(anchors::CheckpointError::MalformedCheckpoint) => {
                return Err(WitnessError::BadRequest(
                    "the checkpoint body is malformed".into(),
                ))
            }
            Err(_) => return Err(WitnessError::Forbidden(origin)),
        };
        if req.old > cp.size {
            return Err(WitnessError::BadRequest(format!(
                "old size {} exceeds the checkpoint's {}",
                req.old, cp.size
            )));
        }
        let _guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let held = self.latest(&origin)?;
        let (held_size, held_root) = held.unwrap_or((0, Hash([0; 32])));
        if req.old != held_size {
            return Err(WitnessError::Conflict(held_size));
        }
        if held.is_some() && req.old == cp.size && held_root != cp.root {
            return Err(WitnessError::Conflict(held_size));
        }
        if held.is_some() || !req.proof.is_empty() {
            ledger::merkle::verify_consistency(
                held_size, &held_root, cp.size, &cp.root, &req.proof,
            )
            .map_err(|e| WitnessError::BadProof(e.to_string()))?;
        }
        let text_end = req
            .note
            .windows(2)
            .rposition(|w| w == b"\n\n")
            .ok_or_else(|| WitnessError::BadRequest("the note has no signature block".into()))?;
        let text = &req.note[..=text_end];
        write_state(&self.state_path(&origin), text)?;
        let now = (self.now)().min((1 << 63) - 1);
        Ok(self.key.cosign(text, now))
    }

    /// The witness's HTTP service: `POST /add-checkpoint`, `GET /healthz`.
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route(
                "/add-checkpoint",
                axum::routing::post(add_checkpoint_handler),
            )
            .route("/healthz", axum::routing::get(|| async { "ok\n" }))
            .layer(axum::extract::DefaultBodyLimit::max(64 * 1024))
            .with_state(self)
    }
}

fn write_state(path: &Path, text: &[u8]) -> Result<(), WitnessError> {
    use std::io::Write as _;
    let err = |e: std::io::Error| WitnessError::Storage(format!("{}: {e}", path.display()));
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut f = tempfile::NamedTempFile::new_in(dir).map_err(err)?;
    f.write_all(text).map_err(err)?;
    f.as_file().sync_all().map_err(err)?;
    f.persist(path).map_err(|e| err(e.error))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(err)
}

async fn add_checkpoint_handler(State(w): State<Arc<Witness>>, body: Bytes) -> Response {
    let w2 = Arc::clone(&w);
    match tokio::task::spawn_blocking(move || w2.add_checkpoint(&body)).await {
        Ok(Ok(lines)) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            lines,
        )
            .into_response(),
        Ok(Err(e)) => {
            tracing::info!(status = e.status().as_u16(), error = %e, "add-checkpoint refused");
            e.into_response()
        }
        Err(e) => WitnessError::Storage(format!("the handler failed: {e}")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anchors::LogKey;

    fn witness(dir: &Path, log: &LogKey) -> Witness {
        let key = CosignerKey::from_seed("witness.test/w", [9; 32]).expect("key");
        Witness::open(key, &[log.verifier_key().to_owned()], dir).expect("witness")
    }

    fn body(old: u64, proof: &[Hash], note: &str) -> Vec<u8> {
        let mut b = format!("old {old}\n");
        for h in proof {
            b.push_str(&B64.encode(h.0));
            b.push('\n');
        }
        b.push('\n');
        b.push_str(note);
        b.into_bytes()
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        let d = tempfile::tempdir().expect("dir");
        let log = LogKey::from_seed("log.test/a", [1; 32]).expect("key");
        let w = witness(d.path(), &log);
        let note = log.sign_checkpoint(1, &Hash([1; 32])).expect("note");
        for b in [
            b"".to_vec(),
            b"old 1".to_vec(),
            format!("old 01\n\n{note}").into_bytes(),
            format!("old -1\n\n{note}").into_bytes(),
            format!("new 0\n\n{note}").into_bytes(),
            format!("old 0\nnot base64!\n\n{note}").into_bytes(),
            format!("old 0\n{}\n\n{note}", B64.encode([0u8; 31])).into_bytes(),
            body(0, &vec![Hash([0; 32]); 64], &note),
            body(2, &[], &note),
        ] {
            let e = w.add_checkpoint(&b).expect_err("refused");
            assert_eq!(e.status(), StatusCode::BAD_REQUEST, "{e}");
        }
        let other = LogKey::from_seed("log.test/b", [2; 32]).expect("key");
        let e = w
            .add_checkpoint(&body(
                0,
                &[],
                &other.sign_checkpoint(1, &Hash([1; 32])).expect("n"),
            ))
            .expect_err("unknown");
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
        let impostor = LogKey::from_seed("log.test/a", [3; 32]).expect("key");
        let e = w
            .add_checkpoint(&body(
                0,
                &[],
                &impostor.sign_checkpoint(1, &Hash([1; 32])).expect("n"),
            ))
            .expect_err("forbidden");
        assert_eq!(e.status(), StatusCode::FORBIDDEN);
    }
}
