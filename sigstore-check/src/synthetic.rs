//! A SYNTHETIC Sigstore instance that signs at run time: bundles over
//! messages that do not exist before a test or the demo runs (the ledger's
//! co-signed statements name the event's digest).
//!
//! **Not Sigstore, and test-only by design.** The keys are those of
//! `testdata/synthetic/gen.py`, derived from public labels, so anyone can
//! sign with them; the certificates are the ones gen.py issued
//! (`signers.json`), the trusted root is gen.py's (`trusted_root.json`).
//! A bundle made here verifies through [`crate::verify`] against that root
//! and no other: nothing in the verifier is mocked, and nothing here is
//! trusted unless an operator records this root in a log (the demo does,
//! and says so).
//!
//! Each bundle is a v0.3 message signature: the statement signed with the
//! certificate's leaf key, a `hashedrekord` v0.0.1 body for it, a small
//! RFC 6962 tree of its own (three dummy leaves, the entry, one more), a
//! checkpoint signed by the synthetic Rekor key, an inclusion proof and a
//! SET. [`Tamper`] breaks one of those on purpose, for the attack tests.

use std::collections::BTreeMap;

use aws_lc_rs::digest::{digest, SHA256};
use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair as _, ECDSA_P256_SHA256_ASN1_SIGNING};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;

use crate::{Code, Refusal};

/// The synthetic instance's trusted root (gen.py's `trusted_root.json`).
pub const TRUSTED_ROOT: &str = include_str!("../testdata/synthetic/trusted_root.json");
const SIGNERS: &str = include_str!("../testdata/synthetic/signers.json");

/// Whether `trusted_root` trusts any key or certificate of this synthetic
/// instance (its CA certificates, its CT log or Rekor key), however the
/// JSON is written: every `rawBytes` value is decoded and compared, and a
/// root that is not JSON counts as synthetic (nothing may trust it
/// anyway). Nothing but a demo or a test may trust such a root.
pub fn is_synthetic(trusted_root: &str) -> bool {
    fn raw_bytes(v: &serde_json::Value, out: &mut Vec<Vec<u8>>) {
        match v {
            serde_json::Value::Object(o) => {
                for (k, x) in o {
                    match (k.as_str(), x.as_str()) {
                        ("rawBytes", Some(b)) => {
                            let b = b.trim_end_matches('=');
                            for engine in [
                                base64::engine::general_purpose::STANDARD_NO_PAD,
                                base64::engine::general_purpose::URL_SAFE_NO_PAD,
                            ] {
                                if let Ok(d) = engine.decode(b) {
                                    out.push(d);
                                }
                            }
                        }
                        _ => raw_bytes(x, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| raw_bytes(x, out)),
            _ => {}
        }
    }
    let parse = |s: &str| serde_json::from_str::<serde_json::Value>(s);
    let (Ok(theirs), Ok(ours)) = (parse(trusted_root), parse(TRUSTED_ROOT)) else {
        return true;
    };
    let (mut a, mut b) = (Vec::new(), Vec::new());
    raw_bytes(&theirs, &mut a);
    raw_bytes(&ours, &mut b);
    a.iter().any(|x| b.contains(x))
}

/// The OIDC issuer every synthetic certificate names.
pub const ISSUER: &str = "https://issuer.example.test";
/// The SAN of the `curator` certificate.
pub const CURATOR: &str = "curator@example.org";
/// The SAN of the `curator-b` certificate.
pub const CURATOR_B: &str = "curator-b@example.org";

/// The certificates gen.py issued, by label: `curator`
/// (curator@example.org), `curator-b` (curator-b@example.org), `uri` (a
/// workflow URI), `bad-sct` (curator@example.org, its SCT signature
/// flipped), `rogue-ct` (curator@example.org, its SCT from a CT log the
/// root does not name).
pub const LABELS: [&str; 5] = ["curator", "curator-b", "uri", "bad-sct", "rogue-ct"];

/// One thing broken on purpose in a bundle, each aimed at one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tamper {
    /// Nothing: a bundle that verifies.
    None,
    /// Logged (SET and all, honestly) 20 minutes after the certificate's
    /// ten-minute validity ended.
    LoggedAfterExpiry,
    /// One byte of the SET flipped.
    SetFlipped,
    /// One byte of the checkpoint's signature flipped.
    CheckpointFlipped,
    /// One byte of an inclusion-proof hash flipped.
    InclusionFlipped,
}

struct Cert {
    der: Vec<u8>,
    key: EcdsaKeyPair,
    not_before: i64,
}

/// The synthetic CA's certificates and the synthetic Rekor log's key.
pub struct Synthetic {
    rekor_name: String,
    tree_id: String,
    rekor: EcdsaKeyPair,
    log_id: [u8; 32],
    certs: BTreeMap<String, Cert>,
}

impl std::fmt::Debug for Synthetic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Synthetic (TEST ONLY)")
            .field("labels", &self.certs.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

fn broken(detail: impl std::fmt::Display) -> Refusal {
    Refusal::new(
        Code::TrustRootInvalid,
        format!("synthetic signers: {detail}"),
    )
}

fn sha256(b: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, b).as_ref());
    out
}

fn key(pkcs8_b64: &serde_json::Value) -> Result<EcdsaKeyPair, Refusal> {
    let der = B64
        .decode(pkcs8_b64.as_str().ok_or_else(|| broken("no key"))?)
        .map_err(broken)?;
    EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &der).map_err(broken)
}

fn sign(key: &EcdsaKeyPair, message: &[u8]) -> Result<Vec<u8>, Refusal> {
    Ok(key
        .sign(&SystemRandom::new(), message)
        .map_err(broken)?
        .as_ref()
        .to_vec())
}

/// SubjectPublicKeyInfo DER of an uncompressed P-256 point.
fn p256_spki(point: &[u8]) -> Vec<u8> {
    let mut out = hex_bytes("3059301306072a8648ce3d020106082a8648ce3d030107034200");
    out.extend_from_slice(point);
    out
}

fn hex_bytes(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or(0))
        .collect()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn leaf_hash(data: &[u8]) -> [u8; 32] {
    let mut b = vec![0u8];
    b.extend_from_slice(data);
    sha256(&b)
}

fn node_hash(l: &[u8; 32], r: &[u8; 32]) -> [u8; 32] {
    let mut b = vec![1u8];
    b.extend_from_slice(l);
    b.extend_from_slice(r);
    sha256(&b)
}

/// RFC 6962 §2.1: the largest power of two below `n`.
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

fn mth(leaves: &[[u8; 32]]) -> [u8; 32] {
    if leaves.len() == 1 {
        return leaves[0];
    }
    let k = split(leaves.len());
    node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
}

/// RFC 6962 §2.1.1 PATH(m, D[n]), leaf to root.
fn path(m: usize, leaves: &[[u8; 32]]) -> Vec<[u8; 32]> {
    if leaves.len() == 1 {
        return Vec::new();
    }
    let k = split(leaves.len());
    if m < k {
        let mut p = path(m, &leaves[..k]);
        p.push(mth(&leaves[k..]));
        p
    } else {
        let mut p = path(m - k, &leaves[k..]);
        p.push(mth(&leaves[..k]));
        p
    }
}

fn pem_certificate(der: &[u8]) -> String {
    let b = B64.encode(der);
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for chunk in b.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

fn flip_last(b: &mut [u8]) {
    if let Some(x) = b.last_mut() {
        *x ^= 1;
    }
}

impl Synthetic {
    /// The instance gen.py made (its committed `signers.json`).
    pub fn load() -> Result<Synthetic, Refusal> {
        let v: serde_json::Value = serde_json::from_str(SIGNERS).map_err(broken)?;
        let rekor = key(&v["rekor"]["pkcs8"])?;
        let log_id = sha256(&p256_spki(rekor.public_key().as_ref()));
        let mut certs = BTreeMap::new();
        for (label, s) in v["signers"]
            .as_object()
            .ok_or_else(|| broken("no signers"))?
        {
            let der = B64
                .decode(s["certificate"].as_str().unwrap_or_default())
                .map_err(broken)?;
            certs.insert(
                label.clone(),
                Cert {
                    der,
                    key: key(&s["pkcs8"])?,
                    not_before: s["notBefore"].as_i64().ok_or_else(|| broken("notBefore"))?,
                },
            );
        }
        Ok(Synthetic {
            rekor_name: v["rekor"]["name"].as_str().unwrap_or_default().to_owned(),
            tree_id: v["rekor"]["treeId"].as_str().unwrap_or_default().to_owned(),
            rekor,
            log_id,
            certs,
        })
    }

    /// A bundle (v0.3 JSON) in which the certificate `label` signs
    /// `message`, logged 30 s after the certificate's validity began.
    pub fn sign(&self, label: &str, message: &[u8]) -> Result<String, Refusal> {
        self.sign_tampered(label, message, Tamper::None)
    }

    /// [`Synthetic::sign`] with one thing broken.
    pub fn sign_tampered(
        &self,
        label: &str,
        message: &[u8],
        tamper: Tamper,
    ) -> Result<String, Refusal> {
        let cert = self
            .certs
            .get(label)
            .ok_or_else(|| broken(format!("no certificate {label:?}")))?;
        let signature = sign(&cert.key, message)?;
        let integrated_time = cert.not_before
            + match tamper {
                Tamper::LoggedAfterExpiry => 30 * 60,
                _ => 30,
            };
        let body = format!(
            concat!(
                r#"{{"apiVersion":"0.0.1","kind":"hashedrekord","spec":{{"data":{{"hash":{{"algorithm":"sha256","value":"{}"}}}},"#,
                r#""signature":{{"content":"{}","publicKey":{{"content":"{}"}}}}}}}}"#
            ),
            hex(&sha256(message)),
            B64.encode(&signature),
            B64.encode(pem_certificate(&cert.der)),
        );
        let mut bodies: Vec<Vec<u8>> = (0..3)
            .map(|i| format!(r#"{{"synthetic-dummy-leaf":{i}}}"#).into_bytes())
            .collect();
        let index = bodies.len();
        bodies.push(body.clone().into_bytes());
        bodies.push(br#"{"synthetic-dummy-leaf":3}"#.to_vec());
        let leaves: Vec<[u8; 32]> = bodies.iter().map(|b| leaf_hash(b)).collect();
        let root = mth(&leaves);
        let mut hashes = path(index, &leaves);
        if tamper == Tamper::InclusionFlipped {
            hashes[0][0] ^= 1;
        }
        let note = format!(
            "{} - {}\n{}\n{}\n",
            self.rekor_name,
            self.tree_id,
            leaves.len(),
            B64.encode(root)
        );
        let mut note_sig = self.log_id[..4].to_vec();
        note_sig.extend(sign(&self.rekor, note.as_bytes())?);
        if tamper == Tamper::CheckpointFlipped {
            flip_last(&mut note_sig);
        }
        let checkpoint = format!(
            "{note}\n\u{2014} {} {}\n",
            self.rekor_name,
            B64.encode(&note_sig)
        );
        let set_payload = format!(
            r#"{{"body":"{}","integratedTime":{integrated_time},"logID":"{}","logIndex":{index}}}"#,
            B64.encode(&body),
            hex(&self.log_id),
        );
        let mut set = sign(&self.rekor, set_payload.as_bytes())?;
        if tamper == Tamper::SetFlipped {
            flip_last(&mut set);
        }
        let bundle = serde_json::json!({
            "mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json",
            "verificationMaterial": {
                "certificate": {"rawBytes": B64.encode(&cert.der)},
                "tlogEntries": [{
                    "logIndex": index.to_string(),
                    "logId": {"keyId": B64.encode(self.log_id)},
                    "kindVersion": {"kind": "hashedrekord", "version": "0.0.1"},
                    "integratedTime": integrated_time.to_string(),
                    "inclusionPromise": {"signedEntryTimestamp": B64.encode(&set)},
                    "inclusionProof": {
                        "logIndex": index.to_string(),
                        "rootHash": B64.encode(root),
                        "treeSize": leaves.len().to_string(),
                        "hashes": hashes.iter().map(|h| B64.encode(h)).collect::<Vec<_>>(),
                        "checkpoint": {"envelope": checkpoint},
                    },
                    "canonicalizedBody": B64.encode(&body),
                }],
            },
            "messageSignature": {
                "messageDigest": {"algorithm": "SHA2_256", "digest": B64.encode(sha256(message))},
                "signature": B64.encode(&signature),
            },
        });
        Ok(bundle.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{verify_message, Signer, TrustRoot};

    fn check(bundle: &str, message: &[u8], identity: &str) -> Result<crate::Verified, Refusal> {
        let root = TrustRoot::from_json(TRUSTED_ROOT).expect("root");
        verify_message(
            bundle,
            message,
            &Signer::Identity {
                identity,
                issuer: ISSUER,
            },
            &root,
        )
    }

    #[test]
    fn a_bundle_made_at_run_time_verifies_as_its_certificate_names() {
        let s = Synthetic::load().expect("the signers load");
        let b = s.sign("curator", b"a statement").expect("signs");
        let v = check(&b, b"a statement", CURATOR).expect("verifies");
        assert_eq!(v.identity.as_deref(), Some(CURATOR));
        let b = s.sign("curator-b", b"another").expect("signs");
        check(&b, b"another", CURATOR_B).expect("verifies");
    }

    #[test]
    fn the_synthetic_root_is_known_however_it_is_written() {
        assert!(is_synthetic(TRUSTED_ROOT));
        let v: serde_json::Value = serde_json::from_str(TRUSTED_ROOT).expect("json");
        // Re-indented, its CA's names removed: still its keys.
        let mut v2 = v.clone();
        v2["certificateAuthorities"][0]
            .as_object_mut()
            .expect("ca")
            .remove("subject");
        assert!(is_synthetic(&v2.to_string()));
        assert!(is_synthetic(
            &serde_json::to_string_pretty(&v2).expect("pretty")
        ));
        // Only its Rekor key kept: still synthetic.
        let mut v3 = serde_json::json!({"tlogs": v["tlogs"].clone()});
        v3["mediaType"] = v["mediaType"].clone();
        assert!(is_synthetic(&v3.to_string()));
        assert!(!is_synthetic(crate::production_root_json()));
    }

    #[test]
    fn each_tamper_is_refused_by_the_check_it_aims_at() {
        let s = Synthetic::load().expect("load");
        for (t, code) in [
            (Tamper::LoggedAfterExpiry, Code::CertificateNotValidAtTime),
            (Tamper::SetFlipped, Code::TlogPromiseInvalid),
            (Tamper::CheckpointFlipped, Code::TlogCheckpointInvalid),
            (Tamper::InclusionFlipped, Code::TlogInclusionInvalid),
        ] {
            let b = s.sign_tampered("curator", b"m", t).expect("signs");
            let e = check(&b, b"m", CURATOR).expect_err("refused");
            assert_eq!(e.code, code, "{t:?}: {e}");
        }
        for label in ["bad-sct", "rogue-ct"] {
            let b = s.sign(label, b"m").expect("signs");
            let e = check(&b, b"m", CURATOR).expect_err("refused");
            assert_eq!(e.code, Code::SctInvalid, "{label}: {e}");
        }
    }
}
