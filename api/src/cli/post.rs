//! `ledger post`, `ledger enrol` and `ledger revoke`: signed events posted
//! through the API, every receipt checked.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use verifier::check::ReceiptChecker;
use verifier::post::{post_envelopes, read_envelopes};
use verifier::Client;

use super::{fail, progress_bar};

#[derive(Args)]
pub struct PostArgs {
    #[arg(long, env = "LEDGER_SERVER")]
    server: String,
    /// The log's note verifier key. Without it the key is fetched from the
    /// server, which then vouches for its own receipts.
    #[arg(long)]
    key: Option<String>,
    /// Envelopes per request (1 to 1,000; a request is also kept under 512 KiB).
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(1..=1000))]
    batch: u64,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Print each checked receipt as JSON, one per line, as each is
    /// acknowledged (refusals and the summary go to standard error).
    #[arg(long)]
    json: bool,
    /// Times to post again what the server answered 503 for (it is starting
    /// or busy), after the Retry-After delay it gives; 0 never retries.
    /// Re-posting is safe: an envelope already in the log is acknowledged.
    #[arg(long, default_value_t = 5)]
    retries: u32,
    /// Files of envelopes.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

/// What every operator command takes: the server, the key its receipt is
/// checked with, and the operator's key file.
#[derive(Args)]
pub struct Operator {
    #[arg(long, env = "LEDGER_SERVER")]
    server: String,
    /// The log's note verifier key to check the receipt with (without it,
    /// the key the server gives, which then vouches for its own receipt).
    #[arg(long)]
    key: Option<String>,
    /// The operator's key file.
    #[arg(long)]
    operator_key: PathBuf,
    /// Print the checked receipt as JSON (to keep it, or check it with
    /// another tool) instead of a summary line.
    #[arg(long)]
    json: bool,
    /// Times to post again while the server answers 503 (it is starting or
    /// busy), after the Retry-After delay it gives; 0 never retries.
    #[arg(long, default_value_t = 5)]
    retries: u32,
}

#[derive(Args)]
pub struct EnrolArgs {
    #[command(flatten)]
    operator: Operator,
    /// The new principal's public key (base64), as `ledger keygen` prints it.
    #[arg(
        long,
        required_unless_present = "sigstore_identity",
        conflicts_with = "sigstore_identity"
    )]
    public_key: Option<String>,
    /// Enrol by Sigstore identity instead of a key: the SAN its Fulcio
    /// certificates name (an e-mail address, or a workflow's https:// URI).
    /// Such a principal co-signs with Sigstore bundles and signs no envelope;
    /// the SAN and issuer are kept in clear (docs/SIGSTORE.md).
    #[arg(long, requires = "sigstore_issuer")]
    sigstore_identity: Option<String>,
    /// The OIDC issuer its certificates name (https://accounts.google.com,
    /// https://token.actions.githubusercontent.com, ...).
    #[arg(long, requires = "sigstore_identity")]
    sigstore_issuer: Option<String>,
    /// Who holds the key (an e-mail address, say). The log keeps it only as
    /// a commitment; the entry names it by a handle (docs/PRIVACY.md,
    /// "Handles"), which this command prints.
    #[arg(long)]
    identity: String,
    /// The handle this identity already has, when enrolling another key of
    /// the same person (as a refusal with `handle_value_bound` names it);
    /// without it, the identity is given a new handle. A handle is
    /// base64url and may begin with `-`; it is taken as this value.
    #[arg(long, allow_hyphen_values = true)]
    identity_handle: Option<String>,
    /// A role (repeatable): harness, curator, gate, rag-writer, reconciler, promotion-gate,
    /// maintainer, operator, ledger.
    #[arg(long = "role", required = true)]
    roles: Vec<String>,
}

#[derive(Args)]
pub struct SigstoreRootArgs {
    #[command(flatten)]
    operator: Operator,
    /// The Sigstore trusted root to record (`trusted_root.json`, as
    /// `cosign trusted-root create` or Sigstore's TUF repository gives it).
    /// Without it, the public-good production root this build embeds (as
    /// fresh as this build: refresh it from TUF for anything long-lived).
    #[arg(long)]
    trusted_root: Option<PathBuf>,
    /// Allow recording the SYNTHETIC test root (its keys are public: anyone
    /// can make bundles it accepts). For demos and tests only.
    #[arg(long)]
    allow_synthetic: bool,
}

#[derive(Args)]
pub struct RevokeArgs {
    #[command(flatten)]
    operator: Operator,
    /// The key id to revoke (hex SHA-256 of its public key).
    #[arg(long)]
    key_id: String,
    #[arg(long)]
    reason: String,
}

#[derive(Args)]
pub struct RedactArgs {
    #[arg(long, env = "LEDGER_SERVER")]
    server: String,
    /// The log's note verifier key to check the receipt with (without it,
    /// the key the server gives, which then vouches for its own receipt).
    #[arg(long)]
    key: Option<String>,
    /// Bearer token for servers that require one for reads.
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The key file of the maintainer who requests the redaction (and signs
    /// the event).
    #[arg(long)]
    maintainer_key: PathBuf,
    /// The key file of a second maintainer, with another identity, who
    /// confirms it.
    #[arg(long)]
    confirming_key: PathBuf,
    /// The index of the entry whose field is redacted.
    #[arg(long)]
    entry: u64,
    /// The committed field's path in that entry's body (`title`, `provenance.source_ref`).
    #[arg(long)]
    field: String,
    /// Why (kept as a commitment, disclosed only to readers with a role).
    #[arg(long)]
    reason: String,
    /// Print the checked receipt as JSON instead of a summary line.
    #[arg(long)]
    json: bool,
    #[arg(long, default_value_t = 5)]
    retries: u32,
}

/// `ledger redact`: two maintainers destroy the kept disclosure of one
/// committed field (docs/PRIVACY.md, "Redaction").
pub fn redact(a: RedactArgs) -> anyhow::Result<()> {
    let requester = verifier::keys::read_signing_key(&a.maintainer_key)?;
    let confirmer = verifier::keys::read_signing_key(&a.confirming_key)?;
    let client = Client::new(&a.server, a.token.clone());
    let vkey = client.verifier_key(a.key.clone(), |k| {
        eprintln!("note: the receipt is checked against the key the server gave ({k}); pass --key to check it against a key you trust");
    })?;
    let entry: verifier::wire::EntryView = client.get_json(&format!("/v1/entries/{}", a.entry))?;
    let leaf = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &entry.leaf)
        .map_err(|_| anyhow::anyhow!("entry {}: the leaf is not base64", a.entry))?;
    // The statement names the leaf hash computed here, not the one served:
    // the ledger refuses a redaction whose hash is not the entry's.
    let leaf_hash = ledger::hash::to_hex(&ledger::leaf_hash(&leaf));
    let (d, _) =
        events::decode_logged_leaf(&leaf).map_err(|r| anyhow::anyhow!("entry {}: {r}", a.entry))?;
    if events::disclose::part_of(&d.payload.event, &a.field).is_none() {
        let committed: Vec<&str> = events::disclose::fields(&d.payload.event)
            .into_iter()
            .filter(|(_, _, s)| s.digest().is_some())
            .map(|(p, _, _)| p)
            .collect();
        bail!(
            "entry {} ({}) holds no commitment in `{}`; its committed fields: {}",
            a.entry,
            d.payload.event.kind().as_str(),
            a.field,
            if committed.is_empty() {
                "none".to_owned()
            } else {
                committed.join(", ")
            }
        );
    }
    let statement = events::envelope::field_redact_statement(a.entry, &leaf_hash, &a.field);
    let event = events::Event::FieldRedacted(events::model::FieldRedacted {
        entry: a.entry,
        leaf_hash,
        field: a.field.clone(),
        reason: a.reason.into(),
        requested_by: events::cosign(&requester, &statement),
        confirmed_by: events::cosign(&confirmer, &statement),
    });
    let envelope = verifier::post::sign_event(&requester, "redact", event);
    let retry = verifier::post::Retry {
        attempts: a.retries,
        ..verifier::post::Retry::default()
    };
    let r = verifier::post::post_one_retrying(&client, &vkey, &envelope, retry)
        .map_err(super::checked)?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "redacted `{}` of entry {}: recorded at index {} (tree size {}); proof and checkpoint verified; the disclosure's key is destroyed",
            a.field, a.entry, r.index, r.tree_size
        );
    }
    Ok(())
}

/// Signs `event` as the operator (with the disclosures of values `bound`
/// before it was built), posts it and checks its receipt; returns the body
/// posted.
fn post_as_operator(
    op: Operator,
    event: events::Event,
    bound: &[events::disclose::Bound],
) -> anyhow::Result<Vec<u8>> {
    let key = verifier::keys::read_signing_key(&op.operator_key)?;
    let client = Client::new(&op.server, None);
    let vkey = client.verifier_key(op.key, |k| {
        eprintln!("note: the receipt is checked against the key the server gave ({k}); pass --key to check it against a key you trust");
    })?;
    let envelope = verifier::post::sign_event_bound(&key, "operator", event, bound);
    let retry = verifier::post::Retry {
        attempts: op.retries,
        ..verifier::post::Retry::default()
    };
    let r = verifier::post::post_one_retrying(&client, &vkey, &envelope, retry)
        .map_err(super::checked)?;
    if op.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!(
            "appended at index {} (tree size {}); proof and checkpoint verified",
            r.index, r.tree_size
        );
    }
    Ok(envelope)
}

pub fn enrol(a: EnrolArgs) -> anyhow::Result<()> {
    let json = a.operator.json;
    let roles = a
        .roles
        .iter()
        .map(|r| {
            serde_json::from_value(serde_json::Value::String(r.clone()))
                .map_err(|_| anyhow::anyhow!("unknown role `{r}`"))
        })
        .collect::<anyhow::Result<Vec<events::Role>>>()?;
    // Another key of a person: the identity is committed under a fresh
    // salt beside the handle it has (for an identity enrolled in clear
    // before the log's switch to schema 3, the handle is the identity).
    let (identity, identity_name, bound) = match a.identity_handle {
        Some(handle) => {
            let b = events::disclose::bind("identity_name", &a.identity)
                .map_err(|e| anyhow::anyhow!("no randomness for a salt: {e}"))?;
            let name = events::model::Sensitive::Committed(events::model::Commitment {
                sd: b.handle.clone(),
            });
            (handle, Some(name), vec![b])
        }
        None => (a.identity, None, Vec::new()),
    };
    let posted = post_as_operator(
        a.operator,
        events::Event::PrincipalEnrolled(events::model::PrincipalEnrolled {
            sigstore: a
                .sigstore_identity
                .zip(a.sigstore_issuer)
                .map(|(identity, issuer)| events::model::SigstoreIdentity { identity, issuer }),
            public_key: a.public_key.unwrap_or_default(),
            identity,
            identity_name,
            roles,
        }),
        &bound,
    )?;
    let handle = events::envelope::split_write(&posted)
        .ok()
        .and_then(|w| events::decode_envelope(w.envelope).ok())
        .and_then(|d| match d.payload.event {
            events::Event::PrincipalEnrolled(e) => Some(e.identity),
            _ => None,
        })
        .unwrap_or_default();
    if json {
        eprintln!("note: identity handle {handle}");
    } else {
        println!("identity handle: {handle}");
    }
    Ok(())
}

/// `ledger sigstore-root`: records the Sigstore trusted root that
/// co-signatures by Sigstore identity are verified against from the next
/// entry on, with the log's origin (the name in its verifier key).
pub fn sigstore_root(a: SigstoreRootArgs) -> anyhow::Result<()> {
    let trusted_root = match &a.trusted_root {
        Some(path) => {
            std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        }
        None => sigstore_check::production_root_json().to_owned(),
    };
    sigstore_check::TrustRoot::from_json(&trusted_root)
        .map_err(|e| anyhow::anyhow!("not a usable Sigstore trusted root: {e}"))?;
    if sigstore_check::synthetic::is_synthetic(&trusted_root) && !a.allow_synthetic {
        bail!("this is the SYNTHETIC test root, whose keys anyone can compute; pass --allow-synthetic only for a demo or a test log");
    }
    let client = Client::new(&a.operator.server, None);
    let vkey = client.verifier_key(a.operator.key.clone(), |_| {})?;
    let origin = vkey
        .split('+')
        .next()
        .filter(|o| !o.is_empty())
        .ok_or_else(|| anyhow::anyhow!("the verifier key names no origin"))?
        .to_owned();
    post_as_operator(
        a.operator,
        events::Event::SigstoreRootTrusted(events::model::SigstoreRootTrusted {
            origin,
            trusted_root,
        }),
        &[],
    )
    .map(|_| ())
}

pub fn revoke(a: RevokeArgs) -> anyhow::Result<()> {
    post_as_operator(
        a.operator,
        events::Event::PrincipalRevoked(events::model::PrincipalRevoked {
            key_id: a.key_id,
            reason: a.reason.into(),
        }),
        &[],
    )
    .map(|_| ())
}

pub fn run(a: PostArgs) -> anyhow::Result<()> {
    let mut envelopes = Vec::new();
    for f in &a.files {
        envelopes.extend(read_envelopes(f)?);
    }
    if envelopes.is_empty() {
        bail!("no envelopes in the {} file(s) given", a.files.len());
    }
    let client = Client::new(&a.server, None);
    let vkey = client.verifier_key(a.key, |k| {
        eprintln!("note: receipts are checked against the key the server gave ({k}); pass --key to check them against a key you trust");
    })?;
    let mut checker = ReceiptChecker::new(&vkey);
    let pb = progress_bar(a.quiet, "posting envelopes:");
    pb.set_length(envelopes.len() as u64);
    let posted = post_envelopes(
        &client,
        &mut checker,
        &envelopes,
        a.batch as usize,
        verifier::post::Retry {
            attempts: a.retries,
            ..verifier::post::Retry::default()
        },
        &mut |label, status, p| {
            let field = p
                .field
                .as_deref()
                .map(|f| format!(" on {f}"))
                .unwrap_or_default();
            let line = format!("{label}: refused {status} {}{field}: {}", p.code, p.detail);
            pb.suspend(|| {
                if a.json {
                    eprintln!("{line}")
                } else {
                    println!("{line}")
                }
            });
        },
        &mut |_, rc| {
            if a.json {
                if let Ok(line) = serde_json::to_string(rc) {
                    pb.suspend(|| println!("{line}"));
                }
            }
        },
        &mut |done| pb.set_position(done),
    );
    pb.finish_and_clear();
    let posted = posted.map_err(super::checked)?;
    let summary = format!(
        "{} envelopes: {} appended, {} already in the log, {} refused; every receipt's proof and checkpoint verified (tree size {})",
        envelopes.len(),
        posted.appended,
        posted.existing,
        posted.refused,
        posted.tree_size
    );
    if a.json {
        eprintln!("{summary}");
    } else {
        println!("{summary}");
    }
    if posted.refused > 0 {
        return Err(fail(format!("{} envelope(s) refused", posted.refused)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::{Cli, Command};
    use clap::Parser;

    /// A handle is base64url, whose alphabet has `-`: one that begins with
    /// it is the option's value, not another option.
    #[test]
    fn an_identity_handle_that_begins_with_a_hyphen_is_its_value() {
        let handle = "-cQ2Xx0v1bW3rR7Jm9kP4sT6uY8aE2gI5oL0nH3dF1z";
        let cli = Cli::try_parse_from([
            "ledger",
            "enrol",
            "--server",
            "http://127.0.0.1:1",
            "--key",
            "log.pub",
            "--operator-key",
            "operator.key",
            "--public-key",
            "AAAA",
            "--identity",
            "alice@example.org",
            "--role",
            "curator",
            "--identity-handle",
            handle,
        ])
        .expect("parses");
        let Command::Enrol(args) = cli.command else {
            panic!("enrol")
        };
        assert_eq!(args.identity_handle.as_deref(), Some(handle));
    }
}
