//! `ledger init`: keys and genesis for a new data directory.

pub use verifier::keys::write_secret;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anchors::LogKey;
use anyhow::{bail, Context};
use ed25519_dalek::SigningKey;
use events::envelope::format_micros;
use events::{genesis_envelopes, Clock, EventLog, SystemClock};

/// The default checkpoint origin.
pub const DEFAULT_ORIGIN: &str = "localhost/evidence-ledger";

/// What `init` created.
pub struct Initialized {
    pub log_key: LogKey,
    pub operator: SigningKey,
    pub log_key_path: PathBuf,
    pub operator_key_path: PathBuf,
}

/// A new principal key, as a note signer key string named `name`.
pub fn new_principal_key(name: &str) -> anyhow::Result<LogKey> {
    Ok(LogKey::generate(name)?)
}

/// Creates the log key and (unless given) the operator key, and appends the
/// genesis: the operator enrolling itself, then the ledger's event key.
///
/// With `storage`, the log is kept in that PostgreSQL schema, created here
/// (it must not exist), and the data directory's `storage` file points at
/// it; otherwise in `ledger.redb` in the data directory.
pub fn init(
    dir: &Path,
    origin: &str,
    operator_identity: &str,
    operator_key: Option<&Path>,
    storage: Option<&ledger::store::pg::PgAt>,
) -> anyhow::Result<Initialized> {
    init_with(
        dir,
        origin,
        operator_identity,
        operator_key,
        storage.map(|at| (at, None)),
        ledger::Config::default(),
    )
}

/// [`init`] with the log's own settings (`config.backend` set keeps the log
/// in the redb file whatever `LEDGER_STORAGE` says), and for a log in
/// PostgreSQL, the login that is to own its schema (the schema is then
/// created through it, and the storage URL's login granted only what a
/// writer needs: ops/postgres.md, "Roles").
pub fn init_with(
    dir: &Path,
    origin: &str,
    operator_identity: &str,
    operator_key: Option<&Path>,
    storage: Option<(&ledger::store::pg::PgAt, Option<&str>)>,
    config: ledger::Config,
) -> anyhow::Result<Initialized> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let log_key_path = dir.join("log.key");
    if log_key_path.exists() || ledger::store::Location::of(dir)?.is_some() {
        bail!("{} is already initialised", dir.display());
    }
    let derived = dir.join(ledger::store::DERIVED_FILE);
    if derived.exists() {
        bail!(
            "{} is derived state left by another log; move it away first",
            derived.display()
        );
    }
    if let Some((at, owner)) = storage {
        match owner {
            Some(owner) => ledger::store::pg::PgStore::create_owned(at, owner),
            None => ledger::store::pg::PgStore::create(at),
        }
        .with_context(|| format!("creating the log in {}", at.describe()))?;
        ledger::store::pg::write_storage_file(dir, at)?;
    }
    let log_key = LogKey::generate(origin)?;
    let (operator, operator_key_path) = match operator_key {
        Some(p) => (verifier::keys::read_signing_key(p)?, p.to_path_buf()),
        None => {
            let k = new_principal_key("operator")?;
            let p = dir.join("operator.key");
            write_secret(&p, &k.private_key())?;
            (k.signing_key(), p)
        }
    };
    write_secret(&log_key_path, &log_key.private_key())?;
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let events = EventLog::open(dir, config, log_key.event_signing_key(), Arc::clone(&clock))?;
    for env in genesis_envelopes(
        &operator,
        operator_identity,
        &log_key.event_signing_key().verifying_key(),
        &format_micros(clock.now_micros()),
    ) {
        events
            .append(&env)
            .map_err(|e| anyhow::anyhow!("genesis refused: {e:?}"))?;
    }
    Ok(Initialized {
        log_key,
        operator,
        log_key_path,
        operator_key_path,
    })
}

/// Points the new data directory `dir` at a log already kept in the
/// PostgreSQL schema `at`, as one more frontend of it: the directory gets
/// the log's key (read from `log_key`, the file `ledger init` wrote for the
/// log) and a `storage` file, and nothing is appended. Refuses a schema
/// with no log, and a key the log does not enroll as its ledger key.
pub fn join(dir: &Path, at: &ledger::store::pg::PgAt, log_key: &Path) -> anyhow::Result<LogKey> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let log_key_path = dir.join("log.key");
    if log_key_path.exists() || ledger::store::Location::of(dir)?.is_some() {
        bail!("{} is already initialised", dir.display());
    }
    let text = std::fs::read_to_string(log_key)
        .with_context(|| format!("reading the log key {}", log_key.display()))?;
    let key = LogKey::from_private(text.trim())
        .with_context(|| format!("{} is not a log key", log_key.display()))?;
    drop(
        ledger::store::pg::PgStore::open_existing(at)
            .with_context(|| format!("opening the log in {}", at.describe()))?,
    );
    ledger::store::pg::write_storage_file(dir, at)?;
    write_secret(&log_key_path, &key.private_key())?;
    let checked = (|| -> anyhow::Result<()> {
        let events = EventLog::open(
            dir,
            ledger::Config::default(),
            key.event_signing_key(),
            Arc::new(SystemClock),
        )?;
        events.check_ledger_key().map_err(anyhow::Error::msg)
    })();
    if let Err(e) = checked {
        // Leave nothing that looks like a frontend of this log.
        let _ = std::fs::remove_file(dir.join(ledger::store::STORAGE_FILE));
        let _ = std::fs::remove_file(&log_key_path);
        return Err(e.context(format!("{} is not this log's key", log_key.display())));
    }
    Ok(key)
}
