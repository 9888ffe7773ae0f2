//! Readers with a role (docs/PRIVACY.md): who may receive the disclosures
//! of sensitive values. The readers file (`readers_file`) lists one per
//! line:
//!
//! ```text
//! # role  token digest                                                             name
//! auditor sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 audit-team
//! ```
//!
//! The server keeps only the SHA-256 of each token, so the file reveals no
//! token. A request whose `Authorization: Bearer` token hashes to a listed
//! digest is that reader: it may read what any reader may (it satisfies
//! `read_token`), and entries come to it with their disclosures.
//! `ledger reader-token --role R --name N` makes a token and its line.

use std::collections::HashMap;
use std::path::Path;

use sha2::{Digest, Sha256};

/// The roles a reader may hold. Each receives every disclosure; the roles
/// name who holds a token, for the access log and for revoking one.
pub const ROLES: [&str; 3] = ["auditor", "gate", "maintainer"];

/// A reader the file lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    pub role: String,
    pub name: String,
}

/// Every listed reader, by the SHA-256 of its token.
#[derive(Debug, Clone, Default)]
pub struct Readers {
    by_digest: HashMap<[u8; 32], Reader>,
}

impl Readers {
    /// Parses a readers file; a bad line is an error naming it.
    pub fn parse(text: &str) -> anyhow::Result<Readers> {
        let mut by_digest = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let parts: Vec<&str> = line.split_whitespace().collect();
            let [role, digest, name] = parts.as_slice() else {
                anyhow::bail!("line {n}: expected `<role> sha256:<64 hex digits> <name>`");
            };
            if !ROLES.contains(role) {
                anyhow::bail!("line {n}: role `{role}` is not one of {}", ROLES.join(", "));
            }
            let hex = digest
                .strip_prefix("sha256:")
                .filter(|h| {
                    h.len() == 64 && h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
                })
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "line {n}: the token digest must be sha256: and 64 lower-case hex digits"
                    )
                })?;
            let mut d = [0u8; 32];
            hex::decode_to_slice(hex, &mut d).map_err(|e| anyhow::anyhow!("line {n}: {e}"))?;
            let reader = Reader {
                role: (*role).to_owned(),
                name: (*name).to_owned(),
            };
            if by_digest.insert(d, reader).is_some() {
                anyhow::bail!("line {n}: this token digest is listed twice");
            }
        }
        Ok(Readers { by_digest })
    }

    /// Reads and parses the readers file at `path`.
    pub fn load(path: &Path) -> anyhow::Result<Readers> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
        Readers::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
    }

    /// The reader whose token is `token`, if any. The digest is compared
    /// by a map lookup: the token itself is never compared, and learning
    /// its digest's bytes does not help to forge a token.
    pub fn find(&self, token: &str) -> Option<&Reader> {
        if self.by_digest.is_empty() {
            return None;
        }
        self.by_digest.get(&token_digest(token))
    }

    pub fn is_empty(&self) -> bool {
        self.by_digest.is_empty()
    }
}

/// The SHA-256 of a token, as the readers file lists it.
pub fn token_digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A fresh token (256 random bits, base64url) and its readers-file line.
/// It never starts with `-`, so that `--token TOKEN` on a command line is
/// never read as an option (one base64url token in 64 would).
pub fn new_token(role: &str, name: &str) -> anyhow::Result<(String, String)> {
    use base64::Engine as _;
    if !ROLES.contains(&role) {
        anyhow::bail!("role `{role}` is not one of {}", ROLES.join(", "));
    }
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '#') {
        anyhow::bail!("the name must be one word without `#`");
    }
    let token = loop {
        let t = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
        if !t.starts_with('-') {
            break t;
        }
    };
    let line = format!("{role} sha256:{} {name}", hex::encode(token_digest(&token)));
    Ok((token, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_token_reads_as_a_command_line_option() {
        // One base64url token in 64 would start with `-`: 2,000 draws
        // would meet about 31 of them.
        for _ in 0..2000 {
            let (token, _) = new_token("auditor", "audit-team").expect("ok");
            assert!(!token.starts_with('-'), "{token}");
        }
    }

    #[test]
    fn a_listed_token_is_its_reader_and_no_other_is() {
        let (token, line) = new_token("auditor", "audit-team").expect("ok");
        let readers =
            Readers::parse(&format!("# readers\n\n{line}  # the auditors\n")).expect("ok");
        assert_eq!(
            readers.find(&token),
            Some(&Reader {
                role: "auditor".into(),
                name: "audit-team".into()
            })
        );
        assert_eq!(readers.find("another token"), None);
    }

    #[test]
    fn a_bad_line_is_refused_naming_it() {
        let e = Readers::parse("auditor sha256:00 x")
            .expect_err("refused")
            .to_string();
        assert!(e.starts_with("line 1:"), "{e}");
        let e = Readers::parse(&format!("root sha256:{} x", "0".repeat(64)))
            .expect_err("refused")
            .to_string();
        assert!(e.contains("role `root`"), "{e}");
        let dup = format!("gate sha256:{0} a\nmaintainer sha256:{0} b", "0".repeat(64));
        assert!(Readers::parse(&dup)
            .expect_err("refused")
            .to_string()
            .contains("line 2"));
    }
}
