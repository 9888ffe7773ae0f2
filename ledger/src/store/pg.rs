//! The log in a PostgreSQL schema, and the only code in the workspace that
//! knows its tables.
//!
//! ## Tables (PostgreSQL format version 1), all in one schema per log
//! | table | key | value |
//! |---|---|---|
//! | `meta` | `name` | `format_version` (u32 BE) |
//! | `head` | `id` = 1 | `size`, `root` (32 bytes), `chain` (32 bytes) |
//! | `entries` | `idx` | `chain` (32 bytes), `leaf` (the leaf bytes) |
//! | `hashes` | `idx` (stored hash index) | `hash` (32 bytes) |
//! | `aux` | `name` | derived state; rebuildable, never hashed |
//! | `private_parts` | `idx` | the sealed row ([`crate::private`]) |
//! | `redacted_parts` | (`idx`, `part`) | — |
//! | `private_keys` | `slot` | the part's key (32 bytes; zeros once shredded) |
//! | `key_slots` | `id` = 1 | `next`: the first slot not yet given out |
//!
//! One row per entry (no bundles: a bundle's row would be rewritten as it
//! fills, and here no entry row is ever rewritten).
//!
//! ## What the database itself refuses
//! Triggers refuse every `UPDATE`, `DELETE` and `TRUNCATE` of `entries`,
//! `hashes`, `private_parts` and `redacted_parts`; a `head` that would
//! shrink; a key changed to anything but zeros; and `DELETE` or `TRUNCATE`
//! of `head`, `meta`, `private_keys` and `key_slots`. They hold against the
//! ledger's own connection, not against a role that may drop them (the
//! schema's owner, a superuser): ops/postgres.md gives the roles that keep
//! the ledger's login from owning its schema. What such a role rewrites is
//! found by `ledger verify`, the checkpoints and their witnesses, not
//! prevented.
//!
//! ## Sequencing
//! [`PgStore::commit`] locks the head row (`SELECT … FOR UPDATE`), refuses
//! with [`Error::HeadMoved`] when the head's size is not where the batch
//! starts, inserts the batch and moves the head in that transaction. Two
//! writers on one schema therefore never assign one index twice: the second
//! waits for the lock, then finds the head moved and writes nothing.
//!
//! ## Durability
//! Every connection sets `synchronous_commit = on`: a `COMMIT` returns
//! after the WAL is flushed, locally and on a synchronous standby when the
//! server names one (`synchronous_standby_names`).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use postgres::{Client, NoTls, Statement};

use super::{missing_hash, Head, Row, StoredEntry, UpperHashes};
use crate::error::{storage, Corruption, CorruptionKind, Error};
use crate::hash::Hash;

/// The file in a data directory that says its log is in PostgreSQL.
pub const STORAGE_FILE: &str = "storage";
/// The environment variable that names the PostgreSQL database a new log
/// is created in, when neither the data directory nor the command names
/// one.
pub const STORAGE_ENV: &str = "LEDGER_STORAGE";
/// The PostgreSQL layout this build writes and reads.
pub const PG_FORMAT_VERSION: u32 = 1;
/// Connections one store keeps at most for reads (snapshots).
const POOL_SIZE: u32 = 16;
/// Connections kept apart for the writer (the head's lock, the commit, the
/// committer's own snapshots) and for the private parts' keys, so that
/// readers holding every read connection never hold up a commit, and a
/// reader that holds a snapshot while it reads a key never waits on a pool
/// its peers exhaust.
const SIDE_POOL_SIZE: u32 = 6;
/// Entries read per query while iterating.
const RECORDS_CHUNK: i64 = 2048;
/// Stored hashes read per query while iterating.
const HASHES_CHUNK: i64 = 8192;
const ZERO_KEY: [u8; 32] = [0; 32];

/// Where a log is kept in PostgreSQL: the database's URL and the schema.
#[derive(Clone, PartialEq, Eq)]
pub struct PgAt {
    pub url: String,
    pub schema: String,
}

impl std::fmt::Debug for PgAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.describe())
    }
}

impl PgAt {
    /// The database and schema, for messages: the URL without its password.
    pub fn describe(&self) -> String {
        format!("{} schema {}", redact_url(&self.url), self.schema)
    }
}

/// `url` with any password replaced by `***`.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(not a URL)".to_owned();
    };
    // Credentials run to the first '@', as the client reads them (a
    // password may hold '/').
    let (auth, tail) = match rest.split_once('@') {
        Some((a, t)) => (Some(a), t),
        None => (None, rest),
    };
    // Query parameters may carry a password too.
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let q: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.to_ascii_lowercase().contains("pass") || k.contains('%') => {
                        format!("{k}=***")
                    }
                    _ => kv.to_owned(),
                })
                .collect();
            format!("{path}?{}", q.join("&"))
        }
        None => tail.to_owned(),
    };
    match auth {
        Some(a) => match a.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{tail}"),
            None => format!("{scheme}://{a}@{tail}"),
        },
        None => format!("{scheme}://{tail}"),
    }
}

/// Where a data directory's log is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// `ledger.redb` in the directory.
    File,
    /// A PostgreSQL schema, named by the directory's `storage` file.
    Postgres(PgAt),
}

impl Location {
    /// Where the log of `dir` is; `None` when the directory has none yet.
    pub fn of(dir: &Path) -> Result<Option<Location>, Error> {
        let f = dir.join(STORAGE_FILE);
        if f.exists() {
            return read_storage_file(&f).map(|at| Some(Location::Postgres(at)));
        }
        if dir.join(super::DB_FILE).exists() {
            return Ok(Some(Location::File));
        }
        Ok(None)
    }
}

/// A URL names PostgreSQL when it starts `postgres://` or `postgresql://`.
pub fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The database `LEDGER_STORAGE` names, if it names one.
pub(crate) fn storage_from_env() -> Option<String> {
    std::env::var(STORAGE_ENV)
        .ok()
        .filter(|u| is_postgres_url(u))
}

fn bad_storage_file(path: &Path, why: impl std::fmt::Display) -> Error {
    Corruption::new(
        0,
        CorruptionKind::Malformed,
        format!("{}: {why}", path.display()),
    )
    .into()
}

fn read_storage_file(path: &Path) -> Result<PgAt, Error> {
    let text = std::fs::read_to_string(path).map_err(io)?;
    let mut fields: HashMap<&str, &str> = HashMap::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(bad_storage_file(
                path,
                format!("line {line:?} is not key = value"),
            ));
        };
        fields.insert(k.trim(), v.trim());
    }
    match fields.get("backend") {
        Some(&"postgres") => {}
        other => {
            return Err(bad_storage_file(
                path,
                format!("backend is {other:?}; this build knows \"postgres\""),
            ))
        }
    }
    let url = fields
        .get("url")
        .filter(|u| is_postgres_url(u))
        .ok_or_else(|| bad_storage_file(path, "url must be a postgres:// URL"))?;
    let schema = fields
        .get("schema")
        .ok_or_else(|| bad_storage_file(path, "schema is missing"))?;
    check_schema_name(schema)?;
    Ok(PgAt {
        url: (*url).to_owned(),
        schema: (*schema).to_owned(),
    })
}

/// Writes the `storage` file that points `dir` at `at` (mode 0600: the URL
/// may hold a password), durably; refuses when `dir` already has a log.
pub fn write_storage_file(dir: &Path, at: &PgAt) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(io)?;
    if let Some(found) = Location::of(dir)? {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            format!("{} already has a log ({found:?})", dir.display()),
        )));
    }
    point_at(dir, at)
}

/// Writes `dir`'s `storage` file naming `at`, whatever `dir` holds: a new
/// file renamed over the old one, then the directory synced, so a crash
/// leaves the old pointer or the new one, never a torn one.
pub(crate) fn point_at(dir: &Path, at: &PgAt) -> Result<(), Error> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    check_schema_name(&at.schema)?;
    let text = format!(
        "# Evidence Ledger: this data directory's log is kept in PostgreSQL.\n\
         backend = postgres\nurl = {}\nschema = {}\n",
        at.url, at.schema
    );
    let tmp = dir.join(format!("{STORAGE_FILE}.new"));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)?;
    f.sync_all().map_err(io)?;
    std::fs::rename(&tmp, dir.join(STORAGE_FILE)).map_err(io)?;
    super::sync_dir(dir)
}

/// A schema name this build creates and accepts: a lower-case letter, then
/// up to 62 lower-case letters, digits or underscores (so it never needs
/// quoting and never collides with a keyword's case).
pub fn check_schema_name(name: &str) -> Result<(), Error> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name.as_bytes()[0].is_ascii_lowercase()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("schema name {name:?}: a lower-case letter, then at most 62 lower-case letters, digits or underscores"),
        )))
    }
}

/// A new schema name: `ledger_` and 16 random hex digits.
pub fn new_schema_name() -> Result<String, Error> {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).map_err(|e| io(std::io::Error::other(e.to_string())))?;
    Ok(format!(
        "ledger_{}",
        b.iter().map(|x| format!("{x:02x}")).collect::<String>()
    ))
}

fn io(e: std::io::Error) -> Error {
    storage(redb::StorageError::Io(e))
}

/// A PostgreSQL error as a storage error, saying what was being done.
fn db(what: &str, e: postgres::Error) -> Error {
    let detail = match e.as_db_error() {
        Some(d) => format!("{}: {}", d.code().code(), d.message()),
        None => e.to_string(),
    };
    io(std::io::Error::other(format!(
        "PostgreSQL, {what}: {detail}"
    )))
}

fn pool_err(e: r2d2::Error) -> Error {
    io(std::io::Error::other(format!(
        "PostgreSQL: no connection: {e}"
    )))
}

/// The error for a log whose database does not answer.
pub(crate) fn unreachable(at: &PgAt) -> Error {
    io(std::io::Error::other(format!(
        "the log is in PostgreSQL ({}); there is no read-only copy to serve while it does not answer",
        at.describe()
    )))
}

fn to_i64(v: u64, what: &str) -> Result<i64, Error> {
    i64::try_from(v).map_err(|_| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{what} {v} does not fit PostgreSQL's bigint"),
        ))
    })
}

fn to_u64(v: i64, index: u64, what: &str) -> Result<u64, Error> {
    u64::try_from(v).map_err(|_| {
        Corruption::new(
            index,
            CorruptionKind::Malformed,
            format!("{what} {v} is negative"),
        )
        .into()
    })
}

/// Column `i` of a row, or a typed error (never a panic) when the database
/// holds something else there: a tampered schema is input, not a bug.
fn col<'a, T: postgres::types::FromSql<'a>>(r: &'a postgres::Row, i: usize) -> Result<T, Error> {
    r.try_get(i).map_err(|e| {
        Corruption::new(
            0,
            CorruptionKind::Malformed,
            format!("column {i} of a PostgreSQL row: {e}"),
        )
        .into()
    })
}

fn hash32(index: u64, what: &str, b: &[u8]) -> Result<[u8; 32], Error> {
    b.try_into().map_err(|_| {
        Corruption::new(
            index,
            CorruptionKind::Malformed,
            format!("{what} of {} bytes, not 32", b.len()),
        )
        .into()
    })
}

/// Runs `f`, which calls the PostgreSQL client, where that client may
/// block: the synchronous client drives a runtime of its own, and tokio
/// refuses to start one on a thread that is running its async tasks. On a
/// worker of a multi-threaded runtime (the server's), `f` runs in
/// `block_in_place`; inside a current-thread runtime, on a thread of its
/// own; elsewhere, as it is.
pub fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Err(_) => f(),
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        Ok(_) => std::thread::scope(|s| {
            s.spawn(f)
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p))
        }),
    }
}

/// A client that closes where it may block ([`off_runtime`]): the
/// client's own `Drop` waits on its runtime.
pub struct ClosingClient(Option<Client>);

impl ClosingClient {
    fn new(c: Client) -> ClosingClient {
        ClosingClient(Some(c))
    }
}

impl std::ops::Deref for ClosingClient {
    type Target = Client;
    fn deref(&self) -> &Client {
        match &self.0 {
            Some(c) => c,
            // Taken only in `drop`.
            None => unreachable!("connection used after close"),
        }
    }
}

impl std::ops::DerefMut for ClosingClient {
    fn deref_mut(&mut self) -> &mut Client {
        match &mut self.0 {
            Some(c) => c,
            None => unreachable!("connection used after close"),
        }
    }
}

impl Drop for ClosingClient {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            off_runtime(move || drop(c));
        }
    }
}

/// One connection, and the statements prepared on it.
pub struct Conn {
    client: ClosingClient,
    /// Set when a transaction did not end cleanly: the pool closes it
    /// rather than hand it out again.
    broken: bool,
    prepared: HashMap<&'static str, Statement>,
}

impl Conn {
    /// The statement `key`, prepared from `sql` the first time.
    fn stmt(
        &mut self,
        key: &'static str,
        sql: impl FnOnce() -> String,
    ) -> Result<Statement, Error> {
        if let Some(s) = self.prepared.get(key) {
            return Ok(s.clone());
        }
        let s = self.client.prepare(&sql()).map_err(|e| {
            self.broken = self.client.is_closed();
            db("preparing a statement", e)
        })?;
        self.prepared.insert(key, s.clone());
        Ok(s)
    }
}

/// Makes and checks connections for the pool.
#[derive(Debug)]
struct Manager {
    config: postgres::Config,
}

impl r2d2::ManageConnection for Manager {
    type Connection = Conn;
    type Error = postgres::Error;

    fn connect(&self) -> Result<Conn, postgres::Error> {
        Ok(Conn {
            client: ClosingClient::new(self.config.connect(NoTls)?),
            broken: false,
            prepared: HashMap::new(),
        })
    }

    fn is_valid(&self, c: &mut Conn) -> Result<(), postgres::Error> {
        c.client.batch_execute("")
    }

    fn has_broken(&self, c: &mut Conn) -> bool {
        c.broken || c.client.is_closed()
    }
}

type Pool = r2d2::Pool<Manager>;
type Pooled = r2d2::PooledConnection<Manager>;

fn connect_config(url: &str) -> Result<postgres::Config, Error> {
    let mut config: postgres::Config = url.parse().map_err(|e| {
        io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{}: not a PostgreSQL URL: {e}", redact_url(url)),
        ))
    })?;
    // statement_timeout=0: a commit cancelled while it waits for a
    // synchronous standby would return success with only a warning, its
    // write on the primary alone. Keepalives notice a dead peer in about
    // 30 s instead of the system's two hours.
    config
        .options("-c synchronous_commit=on -c statement_timeout=0")
        .application_name("evidence-ledger")
        .connect_timeout(Duration::from_secs(10))
        .keepalives(true)
        .keepalives_idle(Duration::from_secs(15))
        .keepalives_interval(Duration::from_secs(5))
        .keepalives_retries(3);
    Ok(config)
}

fn make_pool(url: &str, size: u32) -> Result<Pool, Error> {
    r2d2::Pool::builder()
        .max_size(size)
        .min_idle(Some(0))
        .connection_timeout(Duration::from_secs(10))
        .error_handler(Box::new(r2d2::NopErrorHandler))
        .build(Manager {
            config: connect_config(url)?,
        })
        .map_err(pool_err)
}

/// The schema's tables and the triggers that keep them append-only.
fn create_sql(s: &str) -> String {
    format!(
        r#"
CREATE SCHEMA {s};
CREATE TABLE {s}.meta (name text PRIMARY KEY, value bytea NOT NULL);
CREATE TABLE {s}.head (
    id smallint PRIMARY KEY CHECK (id = 1),
    size bigint NOT NULL CHECK (size >= 0),
    root bytea NOT NULL CHECK (length(root) = 32),
    chain bytea NOT NULL CHECK (length(chain) = 32));
CREATE TABLE {s}.entries (
    idx bigint PRIMARY KEY CHECK (idx >= 0),
    chain bytea NOT NULL CHECK (length(chain) = 32),
    leaf bytea NOT NULL);
CREATE TABLE {s}.hashes (
    idx bigint PRIMARY KEY CHECK (idx >= 0),
    hash bytea NOT NULL CHECK (length(hash) = 32));
CREATE TABLE {s}.aux (name text PRIMARY KEY, value bytea NOT NULL);
CREATE TABLE {s}.private_parts (idx bigint PRIMARY KEY, sealed bytea NOT NULL);
CREATE TABLE {s}.redacted_parts (idx bigint NOT NULL, part integer NOT NULL, PRIMARY KEY (idx, part));
CREATE TABLE {s}.private_keys (
    slot bigint PRIMARY KEY CHECK (slot >= 0),
    key bytea NOT NULL CHECK (length(key) = 32));
CREATE TABLE {s}.key_slots (id smallint PRIMARY KEY CHECK (id = 1), next bigint NOT NULL CHECK (next >= 0));

CREATE FUNCTION {s}.refuse() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    RAISE EXCEPTION 'evidence ledger: % of %.% refused: its rows are never changed or removed',
        TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
END $$;
CREATE FUNCTION {s}.head_forward() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF NEW.id <> OLD.id OR NEW.size < OLD.size
        OR (NEW.size = OLD.size AND (NEW.root <> OLD.root OR NEW.chain <> OLD.chain)) THEN
        RAISE EXCEPTION 'evidence ledger: the head of %.% never moves back (size % to %)',
            TG_TABLE_SCHEMA, TG_TABLE_NAME, OLD.size, NEW.size USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE FUNCTION {s}.key_shred_only() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF NEW.slot <> OLD.slot OR NEW.key <> decode(repeat('00', 32), 'hex') THEN
        RAISE EXCEPTION 'evidence ledger: a key of %.% may only be overwritten with zeros',
            TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE FUNCTION {s}.slots_forward() RETURNS trigger LANGUAGE plpgsql SET search_path = pg_catalog AS $$
BEGIN
    IF NEW.id <> OLD.id OR NEW.next < OLD.next THEN
        RAISE EXCEPTION 'evidence ledger: key slots of %.% are never given out twice',
            TG_TABLE_SCHEMA, TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {s}.entries FOR EACH ROW EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {s}.hashes FOR EACH ROW EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {s}.private_parts FOR EACH ROW EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER append_only BEFORE UPDATE OR DELETE ON {s}.redacted_parts FOR EACH ROW EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER never_removed BEFORE DELETE ON {s}.head FOR EACH ROW EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER never_removed BEFORE DELETE ON {s}.meta FOR EACH ROW EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER never_removed BEFORE DELETE ON {s}.private_keys FOR EACH ROW EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER never_removed BEFORE DELETE ON {s}.key_slots FOR EACH ROW EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER forward_only BEFORE UPDATE ON {s}.head FOR EACH ROW EXECUTE FUNCTION {s}.head_forward();
CREATE TRIGGER shred_only BEFORE UPDATE ON {s}.private_keys FOR EACH ROW EXECUTE FUNCTION {s}.key_shred_only();
CREATE TRIGGER forward_only BEFORE UPDATE ON {s}.key_slots FOR EACH ROW EXECUTE FUNCTION {s}.slots_forward();
CREATE TRIGGER never_truncated BEFORE TRUNCATE ON {s}.entries FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER never_truncated BEFORE TRUNCATE ON {s}.hashes FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER never_truncated BEFORE TRUNCATE ON {s}.private_parts FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER never_truncated BEFORE TRUNCATE ON {s}.redacted_parts FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER never_truncated BEFORE TRUNCATE ON {s}.head FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER never_truncated BEFORE TRUNCATE ON {s}.meta FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER never_truncated BEFORE TRUNCATE ON {s}.private_keys FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse();
CREATE TRIGGER never_truncated BEFORE TRUNCATE ON {s}.key_slots FOR EACH STATEMENT EXECUTE FUNCTION {s}.refuse();
"#
    )
}

/// The log in one PostgreSQL schema.
pub struct PgStore {
    pool: Pool,
    /// The writer's connections ([`SIDE_POOL_SIZE`]).
    writer: Pool,
    /// The private parts' keys' connections ([`SIDE_POOL_SIZE`]).
    key_pool: Pool,
    at: PgAt,
    upper: Arc<UpperHashes>,
    lease: Arc<()>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("at", &self.at).finish()
    }
}

impl PgStore {
    /// Creates an empty log (size 0, the empty root, the genesis chain) in
    /// the new schema `at.schema`, in one transaction; refuses a schema that
    /// exists.
    pub fn create(at: &PgAt) -> Result<(), Error> {
        off_runtime(|| PgStore::create_here(at, None))
    }

    /// [`PgStore::create`] through `owner_url`, a login that is to own the
    /// schema, granting the login `at.url` names only what a writer needs:
    /// `USAGE` on the schema, `SELECT` and `INSERT` on its tables, and
    /// `UPDATE` on `head`, `aux`, `private_keys` and `key_slots` (each held
    /// to its rule by a trigger). That login cannot drop or disable a
    /// trigger, nor `DELETE` or `TRUNCATE` anything.
    pub fn create_owned(at: &PgAt, owner_url: &str) -> Result<(), Error> {
        off_runtime(|| PgStore::create_here(at, Some(owner_url)))
    }

    fn create_here(at: &PgAt, owner_url: Option<&str>) -> Result<(), Error> {
        check_schema_name(&at.schema)?;
        let mut client = connect_config(owner_url.unwrap_or(&at.url))?
            .connect(NoTls)
            .map_err(|e| db("connecting", e))?;
        let s = &at.schema;
        let mut tx = client
            .transaction()
            .map_err(|e| db("creating the log", e))?;
        tx.batch_execute(&create_sql(s))
            .map_err(|e| db("creating the log's tables", e))?;
        let empty = Head::EMPTY;
        tx.execute(
            &format!("INSERT INTO {s}.head (id, size, root, chain) VALUES (1, 0, $1, $2)"),
            &[&empty.root.0.as_slice(), &empty.chain.0.as_slice()],
        )
        .map_err(|e| db("creating the log's head", e))?;
        tx.execute(
            &format!("INSERT INTO {s}.meta (name, value) VALUES ($1, $2)"),
            &[
                &super::FORMAT_KEY,
                &PG_FORMAT_VERSION.to_be_bytes().as_slice(),
            ],
        )
        .map_err(|e| db("creating the log's format record", e))?;
        tx.execute(
            &format!("INSERT INTO {s}.key_slots (id, next) VALUES (1, 0)"),
            &[],
        )
        .map_err(|e| db("creating the log's key slots", e))?;
        if owner_url.is_some() {
            let login = connect_config(&at.url)?
                .get_user()
                .map(str::to_owned)
                .ok_or_else(|| {
                    io(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "the storage URL names no user to grant the log to",
                    ))
                })?;
            let l = format!("\"{}\"", login.replace('"', "\"\""));
            tx.batch_execute(&format!(
                "GRANT USAGE ON SCHEMA {s} TO {l};
                 GRANT SELECT, INSERT ON ALL TABLES IN SCHEMA {s} TO {l};
                 GRANT UPDATE ON {s}.head, {s}.aux, {s}.private_keys, {s}.key_slots TO {l};"
            ))
            .map_err(|e| db("granting the log to its login", e))?;
        }
        tx.commit().map_err(|e| db("creating the log", e))?;
        tracing::info!(at = %at.describe(), "created a log in PostgreSQL");
        Ok(())
    }

    /// Creates a log in a new schema of the database `url` for the data
    /// directory `dir`, and points `dir` at it.
    pub(crate) fn create_for(dir: &Path, url: &str) -> Result<PgAt, Error> {
        let at = PgAt {
            url: url.to_owned(),
            schema: new_schema_name()?,
        };
        PgStore::create_here(&at, None)?;
        write_storage_file(dir, &at)?;
        Ok(at)
    }

    /// Opens the log in `at` to write it; refuses a schema without one, or
    /// one written by a newer build. Several processes may write one
    /// schema: each batch is sequenced under the head row's lock
    /// ([`PgStore::lock_head`]).
    pub fn open(at: &PgAt) -> Result<PgStore, Error> {
        PgStore::open_existing(at)
    }

    /// Opens an existing log (it never creates one).
    pub fn open_existing(at: &PgAt) -> Result<PgStore, Error> {
        check_schema_name(&at.schema)?;
        let store = PgStore {
            pool: make_pool(&at.url, POOL_SIZE)?,
            writer: make_pool(&at.url, SIDE_POOL_SIZE)?,
            key_pool: make_pool(&at.url, SIDE_POOL_SIZE)?,
            at: at.clone(),
            upper: Arc::new(UpperHashes::new()),
            lease: Arc::new(()),
        };
        store.check_format()?;
        Ok(store)
    }

    fn check_format(&self) -> Result<(), Error> {
        let mut client = connect_config(&self.at.url)?
            .connect(NoTls)
            .map_err(|e| db("connecting", e))?;
        let s = &self.at.schema;
        let exists = client
            .query_opt(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'meta'",
                &[&s],
            )
            .map_err(|e| db("looking for the log", e))?;
        if exists.is_none() {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no ledger in {}", self.at.describe()),
            )));
        }
        let mighty = client
            .query_one(
                "SELECT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = current_user), false)
                     OR coalesce((SELECT pg_get_userbyid(nspowner) = current_user FROM pg_namespace WHERE nspname = $1), false)",
                &[&s],
            )
            .map_err(|e| db("reading the login's rights", e))?;
        if col::<bool>(&mighty, 0)? {
            tracing::warn!(
                at = %self.at.describe(),
                "the ledger's login owns its schema or is a superuser: the schema's triggers stop mistakes, not this login (ops/postgres.md, \"Roles\")"
            );
        }
        let row = client
            .query_opt(
                &format!("SELECT value FROM {s}.meta WHERE name = $1"),
                &[&super::FORMAT_KEY],
            )
            .map_err(|e| db("reading the format version", e))?
            .ok_or_else(|| Corruption::new(0, CorruptionKind::Malformed, "no format_version"))?;
        let v: &[u8] = col(&row, 0)?;
        let found = u32::from_be_bytes(
            v.try_into()
                .map_err(|_| Corruption::new(0, CorruptionKind::Malformed, "format_version"))?,
        );
        if found > PG_FORMAT_VERSION {
            return Err(Error::NewerFormat {
                found,
                supported: PG_FORMAT_VERSION,
            });
        }
        if found == 0 {
            return Err(Corruption::new(
                0,
                CorruptionKind::Malformed,
                "format_version 0 was never written by any build",
            )
            .into());
        }
        Ok(())
    }

    fn conn(&self) -> Result<Pooled, Error> {
        self.pool.get().map_err(pool_err)
    }

    fn writer_conn(&self) -> Result<Pooled, Error> {
        self.writer.get().map_err(pool_err)
    }

    /// The database and schema, without a password.
    pub fn describe(&self) -> String {
        self.at.describe()
    }

    /// Where this log is.
    pub fn at(&self) -> &PgAt {
        &self.at
    }

    /// How many snapshots of this store are alive.
    pub fn readers(&self) -> usize {
        Arc::strong_count(&self.lease) - 1
    }

    /// Saves derived state under `name`, durably.
    pub fn put_aux(&self, name: &str, bytes: &[u8]) -> Result<(), Error> {
        self.put_aux_all(&[(name, bytes)])
    }

    /// Saves several records of derived state, durably, in one
    /// transaction: all of them or none.
    pub fn put_aux_all(&self, records: &[(&str, &[u8])]) -> Result<(), Error> {
        let mut c = self.writer_conn()?;
        let s = self.at.schema.clone();
        let st = c.stmt("put_aux", || {
            format!("INSERT INTO {s}.aux (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value")
        })?;
        let w = |e| db("saving derived state", e);
        let mut tx = c.client.transaction().map_err(w)?;
        for (name, bytes) in records {
            tx.execute(&st, &[name, bytes]).map_err(w)?;
        }
        tx.commit().map_err(w)
    }

    /// Derived state saved under `name`, if any.
    pub fn get_aux(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        let mut c = self.conn()?;
        let s = self.at.schema.clone();
        let st = c.stmt("get_aux", || {
            format!("SELECT value FROM {s}.aux WHERE name = $1")
        })?;
        let row = c
            .client
            .query_opt(&st, &[&name])
            .map_err(|e| db("reading derived state", e))?;
        row.map(|r| col(&r, 0)).transpose()
    }

    /// A consistent read snapshot: a `REPEATABLE READ`, read-only
    /// transaction on a connection of its own, held until the snapshot and
    /// every iterator over it are gone.
    pub fn snapshot(&self) -> Result<PgSnapshot, Error> {
        self.snapshot_on(self.conn()?)
    }

    /// [`PgStore::snapshot`] on one of the writer's connections: what the
    /// committer reads while it decides a batch.
    pub fn writer_snapshot(&self) -> Result<PgSnapshot, Error> {
        self.snapshot_on(self.writer_conn()?)
    }

    fn snapshot_on(&self, mut c: Pooled) -> Result<PgSnapshot, Error> {
        if let Err(e) = c
            .client
            .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        {
            c.broken = true;
            return Err(db("starting a read", e));
        }
        Ok(PgSnapshot {
            conn: Arc::new(Mutex::new(SnapConn {
                conn: c,
                schema: self.at.schema.clone(),
            })),
            head: OnceLock::new(),
            upper: Arc::clone(&self.upper),
            _lease: Arc::clone(&self.lease),
        })
    }

    /// Writes `rows`, the private parts and `new_head` in one transaction,
    /// under the lock of the head row; [`Error::HeadMoved`] (nothing
    /// written) when the head is not where the rows start.
    pub(crate) fn commit(
        &self,
        rows: &[Row<'_>],
        private: &crate::private::Batch,
        new_head: &Head,
    ) -> Result<(), Error> {
        let mut c = self.writer_conn()?;
        let expected = new_head.size - rows.len() as u64;
        let r = self.commit_on(&mut c, rows, private, new_head, expected);
        if r.is_err() {
            // A failed COMMIT leaves the outcome unknown; never reuse the
            // connection.
            c.broken = true;
        }
        r
    }

    fn commit_on(
        &self,
        c: &mut Conn,
        rows: &[Row<'_>],
        private: &crate::private::Batch,
        new_head: &Head,
        expected: u64,
    ) -> Result<(), Error> {
        let s = self.at.schema.clone();
        let lock = c.stmt("lock_head", || {
            format!("SELECT size FROM {s}.head WHERE id = 1 FOR UPDATE")
        })?;
        let put_entries = c.stmt("put_entries", || {
            format!("INSERT INTO {s}.entries (idx, chain, leaf) SELECT * FROM unnest($1::int8[], $2::bytea[], $3::bytea[])")
        })?;
        let put_hashes = c.stmt("put_hashes", || {
            format!(
                "INSERT INTO {s}.hashes (idx, hash) SELECT * FROM unnest($1::int8[], $2::bytea[])"
            )
        })?;
        let set_head = c.stmt("set_head", || {
            format!("UPDATE {s}.head SET size = $1, root = $2, chain = $3 WHERE id = 1")
        })?;
        let w = |e| db("committing a batch", e);
        let mut tx = c.client.transaction().map_err(w)?;
        let found: i64 = col(&tx.query_one(&lock, &[]).map_err(w)?, 0)?;
        let found = to_u64(found, 0, "head size")?;
        if found != expected {
            return Err(Error::HeadMoved { expected, found });
        }
        write_batch(
            &mut tx,
            &s,
            rows,
            private,
            new_head,
            [put_entries, put_hashes, set_head],
        )?;
        tx.commit().map_err(w)
    }
}

/// Inserts a batch's rows and moves the head, in the caller's transaction
/// (which holds the head row's lock).
fn write_batch(
    tx: &mut impl postgres::GenericClient,
    s: &str,
    rows: &[Row<'_>],
    private: &crate::private::Batch,
    new_head: &Head,
    [put_entries, put_hashes, set_head]: [Statement; 3],
) -> Result<(), Error> {
    let w = |e| db("committing a batch", e);
    {
        if !rows.is_empty() {
            let mut idx = Vec::with_capacity(rows.len());
            let mut chains = Vec::with_capacity(rows.len());
            let mut leaves = Vec::with_capacity(rows.len());
            let mut hidx = Vec::new();
            let mut hashes = Vec::new();
            for row in rows {
                idx.push(to_i64(row.index, "entry index")?);
                chains.push(row.chain.0.as_slice());
                leaves.push(row.leaf);
                for (k, h) in row.hashes.iter().enumerate() {
                    hidx.push(to_i64(
                        row.first_hash_index + k as u64,
                        "stored hash index",
                    )?);
                    hashes.push(h.0.as_slice());
                }
            }
            tx.execute(&put_entries, &[&idx, &chains, &leaves])
                .map_err(w)?;
            tx.execute(&put_hashes, &[&hidx, &hashes]).map_err(w)?;
        }
        if !private.rows.is_empty() {
            let idx = private
                .rows
                .iter()
                .map(|(i, _)| to_i64(*i, "entry index"))
                .collect::<Result<Vec<_>, _>>()?;
            let sealed: Vec<&[u8]> = private.rows.iter().map(|(_, r)| r.as_slice()).collect();
            tx.execute(
                &format!("INSERT INTO {s}.private_parts (idx, sealed) SELECT * FROM unnest($1::int8[], $2::bytea[])"),
                &[&idx, &sealed],
            )
            .map_err(w)?;
        }
        if !private.redacted.is_empty() {
            let idx = private
                .redacted
                .iter()
                .map(|(i, _)| to_i64(*i, "entry index"))
                .collect::<Result<Vec<_>, _>>()?;
            let parts: Vec<i32> = private
                .redacted
                .iter()
                .map(|(_, p)| i32::from(*p))
                .collect();
            tx.execute(
                &format!("INSERT INTO {s}.redacted_parts (idx, part) SELECT * FROM unnest($1::int8[], $2::int4[]) ON CONFLICT DO NOTHING"),
                &[&idx, &parts],
            )
            .map_err(w)?;
        }
        tx.execute(
            &set_head,
            &[
                &to_i64(new_head.size, "tree size")?,
                &new_head.root.0.as_slice(),
                &new_head.chain.0.as_slice(),
            ],
        )
        .map_err(w)?;
        Ok(())
    }
}

impl PgStore {
    /// The head row, locked (`SELECT … FOR UPDATE`) in a transaction that
    /// the returned lock holds until it commits a batch or is dropped:
    /// every other writer of the schema waits meanwhile, so a batch
    /// sequenced while holding it is sequenced against exactly the history
    /// it will follow.
    pub fn lock_head(&self) -> Result<HeadLock, Error> {
        let mut c = self.writer_conn()?;
        let s = self.at.schema.clone();
        let r = (|| {
            let lock = c.stmt("lock_head_row", || {
                format!("SELECT size, root, chain FROM {s}.head WHERE id = 1 FOR UPDATE")
            })?;
            // Waiting longer than this for another writer's batch means it
            // is stuck: give up, and the batch answers 503.
            c.client
                .batch_execute("BEGIN; SET LOCAL lock_timeout = '30s'")
                .map_err(|e| db("locking the head", e))?;
            let row = c
                .client
                .query_one(&lock, &[])
                .map_err(|e| db("locking the head", e))?;
            Ok(Head {
                size: to_u64(col(&row, 0)?, 0, "head size")?,
                root: Hash(hash32(0, "head root", col(&row, 1)?)?),
                chain: Hash(hash32(0, "head chain", col(&row, 2)?)?),
            })
        })();
        match r {
            Ok(head) => Ok(HeadLock {
                conn: Some(c),
                head,
                schema: self.at.schema.clone(),
            }),
            Err(e) => {
                c.broken = true;
                Err(e)
            }
        }
    }

    /// The committed head, read without a lock (another writer may move it
    /// the moment after).
    pub fn committed_head(&self) -> Result<Head, Error> {
        let mut c = self.writer_conn()?;
        let s = self.at.schema.clone();
        let st = c.stmt("read_head", || {
            format!("SELECT size, root, chain FROM {s}.head WHERE id = 1")
        })?;
        let row = c
            .client
            .query_one(&st, &[])
            .map_err(|e| db("reading the head", e))?;
        Ok(Head {
            size: to_u64(col(&row, 0)?, 0, "head size")?,
            root: Hash(hash32(0, "head root", col(&row, 1)?)?),
            chain: Hash(hash32(0, "head chain", col(&row, 2)?)?),
        })
    }

    /// The private parts' keys, in this schema.
    pub(crate) fn keys(&self) -> PgKeys {
        PgKeys {
            pool: self.key_pool.clone(),
            schema: self.at.schema.clone(),
        }
    }
}

/// The head row of a PostgreSQL log, locked for one batch
/// ([`PgStore::lock_head`]): rolled back when dropped without a commit.
pub struct HeadLock {
    conn: Option<Pooled>,
    /// The committed head when the lock was taken.
    pub head: Head,
    schema: String,
}

impl std::fmt::Debug for HeadLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeadLock")
            .field("head", &self.head)
            .finish()
    }
}

impl HeadLock {
    /// Writes `rows`, the private parts and `new_head` and commits, which
    /// releases the lock. The rows start at the locked head.
    pub(crate) fn commit(
        mut self,
        rows: &[Row<'_>],
        private: &crate::private::Batch,
        new_head: &Head,
    ) -> Result<(), Error> {
        let expected = new_head.size - rows.len() as u64;
        if expected != self.head.size {
            return Err(Error::HeadMoved {
                expected,
                found: self.head.size,
            });
        }
        let Some(mut c) = self.conn.take() else {
            return Err(io(std::io::Error::other("the head lock was already used")));
        };
        let s = self.schema.clone();
        let r = (|| {
            let put_entries = c.stmt("put_entries", || {
                format!("INSERT INTO {s}.entries (idx, chain, leaf) SELECT * FROM unnest($1::int8[], $2::bytea[], $3::bytea[])")
            })?;
            let put_hashes = c.stmt("put_hashes", || {
                format!("INSERT INTO {s}.hashes (idx, hash) SELECT * FROM unnest($1::int8[], $2::bytea[])")
            })?;
            let set_head = c.stmt("set_head", || {
                format!("UPDATE {s}.head SET size = $1, root = $2, chain = $3 WHERE id = 1")
            })?;
            write_batch(
                &mut *c.client,
                &s,
                rows,
                private,
                new_head,
                [put_entries, put_hashes, set_head],
            )?;
            c.client
                .batch_execute("COMMIT")
                .map_err(|e| db("committing a batch", e))
        })();
        if r.is_err() {
            // A failed COMMIT leaves the outcome unknown; never reuse it.
            c.broken = true;
        }
        r
    }
}

impl Drop for HeadLock {
    fn drop(&mut self) {
        if let Some(mut c) = self.conn.take() {
            off_runtime(move || {
                if c.client.batch_execute("ROLLBACK").is_err() {
                    c.broken = true;
                }
            });
        }
    }
}

/// A snapshot's connection, inside its read transaction until dropped.
struct SnapConn {
    conn: Pooled,
    schema: String,
}

impl Drop for SnapConn {
    fn drop(&mut self) {
        let conn = &mut self.conn;
        off_runtime(move || {
            if conn.client.batch_execute("ROLLBACK").is_err() {
                conn.broken = true;
            }
        });
    }
}

impl SnapConn {
    fn query_opt(
        &mut self,
        key: &'static str,
        sql: impl FnOnce(&str) -> String,
        params: &[&(dyn postgres::types::ToSql + Sync)],
        what: &str,
    ) -> Result<Option<postgres::Row>, Error> {
        let s = self.schema.clone();
        let st = self.conn.stmt(key, || sql(&s))?;
        self.conn
            .client
            .query_opt(&st, params)
            .map_err(|e| db(what, e))
    }

    fn query(
        &mut self,
        key: &'static str,
        sql: impl FnOnce(&str) -> String,
        params: &[&(dyn postgres::types::ToSql + Sync)],
        what: &str,
    ) -> Result<Vec<postgres::Row>, Error> {
        let s = self.schema.clone();
        let st = self.conn.stmt(key, || sql(&s))?;
        self.conn.client.query(&st, params).map_err(|e| db(what, e))
    }
}

/// A consistent, read-only view of a PostgreSQL log.
pub struct PgSnapshot {
    conn: Arc<Mutex<SnapConn>>,
    head: OnceLock<Head>,
    upper: Arc<UpperHashes>,
    _lease: Arc<()>,
}

impl PgSnapshot {
    fn with<T>(&self, f: impl FnOnce(&mut SnapConn) -> Result<T, Error>) -> Result<T, Error> {
        let mut c = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut c)
    }

    pub fn head(&self) -> Result<Head, Error> {
        if let Some(h) = self.head.get() {
            return Ok(*h);
        }
        let row = self
            .with(|c| {
                c.query_opt(
                    "head",
                    |s| format!("SELECT size, root, chain FROM {s}.head WHERE id = 1"),
                    &[],
                    "reading the head",
                )
            })?
            .ok_or_else(|| Corruption::new(0, CorruptionKind::Malformed, "no head record"))?;
        let head = Head {
            size: to_u64(col(&row, 0)?, 0, "head size")?,
            root: Hash(hash32(0, "head root", col(&row, 1)?)?),
            chain: Hash(hash32(0, "head chain", col(&row, 2)?)?),
        };
        Ok(*self.head.get_or_init(|| head))
    }

    pub fn entry(&self, index: u64) -> Result<Option<StoredEntry>, Error> {
        let i = to_i64(index, "entry index")?;
        let row = self.with(|c| {
            c.query_opt(
                "entry",
                |s| format!("SELECT chain, leaf FROM {s}.entries WHERE idx = $1"),
                &[&i],
                "reading an entry",
            )
        })?;
        match row {
            None => Ok(None),
            Some(r) => Ok(Some(StoredEntry {
                chain: Hash(hash32(index, "chain hash", col(&r, 0)?)?),
                leaf: col(&r, 1)?,
            })),
        }
    }

    pub fn records_from(&self, start: u64) -> Result<PgRecords, Error> {
        Ok(Chunked::new(
            &self.conn,
            start,
            RECORDS_CHUNK,
            fetch_records,
        ))
    }

    pub fn hashes_from(&self, start: u64) -> Result<PgHashes, Error> {
        Ok(Chunked::new(&self.conn, start, HASHES_CHUNK, fetch_hashes))
    }

    pub fn hash(&self, stored_index: u64) -> Result<Option<Hash>, Error> {
        let (level, _) = crate::merkle::split_stored_hash_index(stored_index);
        let keep = match self.upper.get(stored_index, level) {
            Ok(h) => return Ok(Some(Hash(h))),
            Err(keep) => keep,
        };
        let i = to_i64(stored_index, "stored hash index")?;
        let row = self.with(|c| {
            c.query_opt(
                "hash",
                |s| format!("SELECT hash FROM {s}.hashes WHERE idx = $1"),
                &[&i],
                "reading a stored hash",
            )
        })?;
        let Some(row) = row else {
            return Ok(None);
        };
        let h = hash32(
            crate::merkle::last_leaf_of_stored(stored_index),
            "stored hash",
            col(&row, 0)?,
        )?;
        if keep {
            self.upper.keep(stored_index, level, h);
        }
        Ok(Some(Hash(h)))
    }

    fn max(&self, key: &'static str, table: &'static str) -> Result<Option<u64>, Error> {
        let row = self.with(|c| {
            c.query_opt(
                key,
                |s| format!("SELECT max(idx) FROM {s}.{table}"),
                &[],
                "reading the last index",
            )
        })?;
        let max: Option<i64> = match row {
            Some(r) => col(&r, 0)?,
            None => None,
        };
        match max {
            None => Ok(None),
            Some(v) => Ok(Some(to_u64(v, 0, "index")?)),
        }
    }

    pub fn last_entry_index(&self) -> Result<Option<u64>, Error> {
        self.max("last_entry", "entries")
    }

    pub fn last_hash_index(&self) -> Result<Option<u64>, Error> {
        self.max("last_hash", "hashes")
    }

    pub fn private_next_slot(&self) -> Result<u64, Error> {
        let row = self.with(|c| {
            c.query_opt(
                "next_slot",
                |s| format!("SELECT next FROM {s}.key_slots WHERE id = 1"),
                &[],
                "reading the key slots",
            )
        })?;
        match row {
            Some(r) => to_u64(col(&r, 0)?, 0, "key slots"),
            None => Ok(0),
        }
    }

    pub fn redacted_parts(&self) -> Result<Vec<(u64, u16)>, Error> {
        let rows = self.with(|c| {
            c.query(
                "redacted_all",
                |s| format!("SELECT idx, part FROM {s}.redacted_parts ORDER BY idx, part"),
                &[],
                "reading redacted parts",
            )
        })?;
        rows.iter()
            .map(|r| {
                let idx = to_u64(col(r, 0)?, 0, "entry index")?;
                let part: i32 = col(r, 1)?;
                let part = u16::try_from(part).map_err(|_| {
                    Error::from(Corruption::new(
                        idx,
                        CorruptionKind::Malformed,
                        "redacted part number",
                    ))
                })?;
                Ok((idx, part))
            })
            .collect()
    }

    pub fn is_redacted(&self, index: u64, part: u16) -> Result<bool, Error> {
        let i = to_i64(index, "entry index")?;
        let p = i32::from(part);
        Ok(self
            .with(|c| {
                c.query_opt(
                    "redacted_one",
                    |s| format!("SELECT 1 FROM {s}.redacted_parts WHERE idx = $1 AND part = $2"),
                    &[&i, &p],
                    "reading redacted parts",
                )
            })?
            .is_some())
    }

    pub fn private_row(&self, index: u64) -> Result<Option<Vec<u8>>, Error> {
        let i = to_i64(index, "entry index")?;
        self.with(|c| {
            c.query_opt(
                "private_row",
                |s| format!("SELECT sealed FROM {s}.private_parts WHERE idx = $1"),
                &[&i],
                "reading private parts",
            )
        })?
        .map(|r| col(&r, 0))
        .transpose()
    }

    pub fn aux_all(&self) -> Result<Vec<(String, Vec<u8>)>, Error> {
        let rows = self.with(|c| {
            c.query(
                "aux_all",
                |s| format!("SELECT name, value FROM {s}.aux ORDER BY name"),
                &[],
                "reading derived state",
            )
        })?;
        rows.iter().map(|r| Ok((col(r, 0)?, col(r, 1)?))).collect()
    }

    pub fn aux(&self, name: &str) -> Result<Option<Vec<u8>>, Error> {
        self.with(|c| {
            c.query_opt(
                "aux",
                |s| format!("SELECT value FROM {s}.aux WHERE name = $1"),
                &[&name],
                "reading derived state",
            )
        })?
        .map(|r| col(&r, 0))
        .transpose()
    }

    pub fn hashes_at(&self, indexes: &[u64]) -> Result<Vec<Hash>, Error> {
        let kept = self.upper.get_many(indexes);
        let wanted: Vec<i64> = indexes
            .iter()
            .zip(&kept)
            .filter(|(_, k)| k.is_err())
            .map(|(&i, _)| to_i64(i, "stored hash index"))
            .collect::<Result<_, _>>()?;
        let mut read: HashMap<u64, [u8; 32]> = HashMap::with_capacity(wanted.len());
        if !wanted.is_empty() {
            let rows = self.with(|c| {
                c.query(
                    "hashes_at",
                    |s| format!("SELECT idx, hash FROM {s}.hashes WHERE idx = ANY($1)"),
                    &[&wanted],
                    "reading stored hashes",
                )
            })?;
            for r in rows {
                let i = to_u64(col(&r, 0)?, 0, "stored hash index")?;
                read.insert(
                    i,
                    hash32(
                        crate::merkle::last_leaf_of_stored(i),
                        "stored hash",
                        col(&r, 1)?,
                    )?,
                );
            }
        }
        let mut keep = Vec::new();
        let out = indexes
            .iter()
            .zip(kept)
            .map(|(&i, k)| match k {
                Ok(h) => Ok(Hash(h)),
                Err(worth) => {
                    let h = *read.get(&i).ok_or_else(|| missing_hash(i))?;
                    if worth {
                        keep.push((i, crate::merkle::split_stored_hash_index(i).0, h));
                    }
                    Ok(Hash(h))
                }
            })
            .collect::<Result<Vec<_>, Error>>()?;
        if !keep.is_empty() {
            self.upper.keep_many(&keep);
        }
        Ok(out)
    }
}

/// Reads up to `chunk` rows from index `from` on, in index order.
type Fetch<T> = fn(&mut SnapConn, i64, i64) -> Result<Vec<(u64, T)>, Error>;

/// Rows of one table in index order from an index on, read `chunk` at a
/// time inside the snapshot's transaction: the one loop behind
/// [`PgRecords`] and [`PgHashes`].
pub struct Chunked<T> {
    conn: Arc<Mutex<SnapConn>>,
    next: u64,
    chunk: i64,
    fetch: Fetch<T>,
    pending: std::vec::IntoIter<(u64, T)>,
    done: bool,
}

impl<T> Chunked<T> {
    fn new(conn: &Arc<Mutex<SnapConn>>, start: u64, chunk: i64, fetch: Fetch<T>) -> Chunked<T> {
        Chunked {
            conn: Arc::clone(conn),
            next: start,
            chunk,
            fetch,
            pending: Vec::new().into_iter(),
            done: false,
        }
    }
}

impl<T> Iterator for Chunked<T> {
    type Item = Result<(u64, T), Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(r) = self.pending.next() {
            return Some(Ok(r));
        }
        if self.done {
            return None;
        }
        let fetched = to_i64(self.next, "index").and_then(|from| {
            let mut c = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            (self.fetch)(&mut c, from, self.chunk)
        });
        match fetched {
            Ok(batch) => {
                if (batch.len() as i64) < self.chunk {
                    self.done = true;
                }
                if let Some((last, _)) = batch.last() {
                    self.next = last + 1;
                }
                self.pending = batch.into_iter();
                self.pending.next().map(Ok)
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// Stored records (chain hash ‖ leaf bytes) of a PostgreSQL log in index
/// order, [`RECORDS_CHUNK`] at a time.
pub type PgRecords = Chunked<Vec<u8>>;

/// Stored hashes of a PostgreSQL log in index order, [`HASHES_CHUNK`] at a
/// time.
pub type PgHashes = Chunked<Hash>;

fn fetch_records(c: &mut SnapConn, from: i64, chunk: i64) -> Result<Vec<(u64, Vec<u8>)>, Error> {
    let rows = c.query(
        "records",
        |s| {
            format!(
                "SELECT idx, chain, leaf FROM {s}.entries WHERE idx >= $1 ORDER BY idx LIMIT $2"
            )
        },
        &[&from, &chunk],
        "reading entries",
    )?;
    rows.iter()
        .map(|r| {
            let idx = to_u64(col(r, 0)?, 0, "entry index")?;
            let chain: &[u8] = col(r, 1)?;
            let leaf: &[u8] = col(r, 2)?;
            let mut rec = Vec::with_capacity(chain.len() + leaf.len());
            rec.extend_from_slice(chain);
            rec.extend_from_slice(leaf);
            Ok((idx, rec))
        })
        .collect()
}

fn fetch_hashes(c: &mut SnapConn, from: i64, chunk: i64) -> Result<Vec<(u64, Hash)>, Error> {
    let rows = c.query(
        "hashes_from",
        |s| format!("SELECT idx, hash FROM {s}.hashes WHERE idx >= $1 ORDER BY idx LIMIT $2"),
        &[&from, &chunk],
        "reading stored hashes",
    )?;
    rows.iter()
        .map(|r| {
            let i = to_u64(col(r, 0)?, 0, "stored hash index")?;
            let h = hash32(
                crate::merkle::last_leaf_of_stored(i),
                "stored hash",
                col(r, 1)?,
            )?;
            Ok((i, Hash(h)))
        })
        .collect()
}

/// The private parts' keys in a PostgreSQL schema (`private_keys`), one row
/// per slot, slots given out from `key_slots` under its row lock so that
/// two frontends never give out one slot twice.
#[derive(Clone)]
pub struct PgKeys {
    pool: Pool,
    schema: String,
}

impl std::fmt::Debug for PgKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PgKeys({})", self.schema)
    }
}

impl PgKeys {
    fn conn(&self) -> Result<Pooled, Error> {
        self.pool.get().map_err(pool_err)
    }

    /// Writes `keys` to new slots and commits them; returns the first slot.
    pub fn append(&self, keys: &[[u8; 32]]) -> Result<u64, Error> {
        let s = &self.schema;
        let mut c = self.conn()?;
        let w = |e| db("writing private-part keys", e);
        let r = (|| {
            let n = keys.len() as i64;
            let mut tx = c.client.transaction().map_err(w)?;
            let first: i64 = col(
                &tx.query_one(
                    &format!("UPDATE {s}.key_slots SET next = next + $1 WHERE id = 1 RETURNING next - $1"),
                    &[&n],
                )
                .map_err(w)?,
                0,
            )?;
            let slots: Vec<i64> = (first..first + n).collect();
            let bytes: Vec<&[u8]> = keys.iter().map(|k| k.as_slice()).collect();
            tx.execute(
                &format!("INSERT INTO {s}.private_keys (slot, key) SELECT * FROM unnest($1::int8[], $2::bytea[])"),
                &[&slots, &bytes],
            )
            .map_err(w)?;
            tx.commit().map_err(w)?;
            to_u64(first, 0, "key slot")
        })();
        if r.is_err() {
            c.broken = true;
        }
        r
    }

    fn read(&self, slot: u64) -> Result<Option<[u8; 32]>, Error> {
        let s = &self.schema;
        let i = to_i64(slot, "key slot")?;
        let mut c = self.conn()?;
        let row = c
            .client
            .query_opt(
                &format!("SELECT key FROM {s}.private_keys WHERE slot = $1"),
                &[&i],
            )
            .map_err(|e| db("reading a private-part key", e))?;
        row.map(|r| hash32(0, "private-part key", col(&r, 0)?))
            .transpose()
    }

    /// The key in `slot`: `None` when shredded (zeros) or never written.
    pub fn get(&self, slot: u64) -> Result<Option<[u8; 32]>, Error> {
        Ok(self.read(slot)?.filter(|k| *k != ZERO_KEY))
    }

    /// Whether `slot` was ever written.
    pub fn written(&self, slot: u64) -> Result<bool, Error> {
        Ok(self.read(slot)?.is_some())
    }

    /// Overwrites `slot` with zeros and commits; `false` when the slot was
    /// never written.
    pub fn shred(&self, slot: u64) -> Result<bool, Error> {
        let s = &self.schema;
        let i = to_i64(slot, "key slot")?;
        let mut c = self.conn()?;
        c.client
            .execute(
                &format!("UPDATE {s}.private_keys SET key = $2 WHERE slot = $1 AND key <> $2"),
                &[&i, &ZERO_KEY.as_slice()],
            )
            .map_err(|e| db("destroying a private-part key", e))?;
        drop(c);
        self.written(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two stores on one schema (read-opened, so without the write lock
    /// that keeps a second `Ledger` out) commit the batch each computed
    /// from the same head, many times over, at once: one commits, the
    /// other is refused with `HeadMoved` and wrote nothing. No index is
    /// ever written twice, and the head always names the winner's batch.
    #[test]
    fn two_writers_racing_from_one_head_never_assign_an_index_twice() {
        let at = PgAt {
            url: testkit::pg::url(),
            schema: new_schema_name().expect("name"),
        };
        PgStore::create(&at).expect("create");
        let stores = [
            Arc::new(PgStore::open_existing(&at).expect("a")),
            Arc::new(PgStore::open_existing(&at).expect("b")),
        ];
        let mut won = [0u32; 2];
        for round in 0..40u64 {
            let head = stores[0].snapshot().expect("snap").head().expect("head");
            let barrier = Arc::new(std::sync::Barrier::new(2));
            let results: Vec<Result<(), Error>> = stores
                .iter()
                .enumerate()
                .map(|(w, store)| {
                    let (store, barrier) = (Arc::clone(store), Arc::clone(&barrier));
                    std::thread::spawn(move || {
                        let leaf = format!("writer {w} round {round}").into_bytes();
                        let mut frontier = crate::merkle::Frontier::new();
                        let row_hashes = frontier.push(crate::hash::leaf_hash(&leaf));
                        let chain = crate::hash::chain_hash(&head.chain, &leaf);
                        let row = Row {
                            index: head.size,
                            leaf: &leaf,
                            chain,
                            first_hash_index: crate::merkle::stored_hash_index(0, head.size),
                            hashes: row_hashes[..1].to_vec(),
                        };
                        let next = Head {
                            size: head.size + 1,
                            root: Hash([w as u8; 32]),
                            chain,
                        };
                        barrier.wait();
                        store.commit(&[row], &crate::private::Batch::default(), &next)
                    })
                })
                .collect::<Vec<_>>()
                .into_iter()
                .map(|t| t.join().expect("thread"))
                .collect();
            let ok: Vec<usize> = (0..2).filter(|&w| results[w].is_ok()).collect();
            assert_eq!(ok.len(), 1, "round {round}: {results:?}");
            let loser = 1 - ok[0];
            assert!(
                matches!(results[loser], Err(Error::HeadMoved { expected, found }) if expected == head.size && found == head.size + 1),
                "round {round}: {:?}",
                results[loser]
            );
            won[ok[0]] += 1;
            let snap = stores[1].snapshot().expect("snap");
            let now = snap.head().expect("head");
            assert_eq!(now.size, head.size + 1);
            assert_eq!(
                now.root,
                Hash([ok[0] as u8; 32]),
                "the head is the winner's"
            );
            let e = snap.entry(head.size).expect("entry").expect("present");
            assert_eq!(
                e.leaf,
                format!("writer {} round {round}", ok[0]).into_bytes()
            );
            assert_eq!(snap.last_entry_index().expect("last"), Some(head.size));
        }
        assert_eq!(won[0] + won[1], 40);
    }

    #[test]
    fn a_url_is_described_without_its_password() {
        assert_eq!(
            redact_url("postgres://ledger:s3cret@db.example:5432/ledger"),
            "postgres://ledger:***@db.example:5432/ledger"
        );
        assert_eq!(
            redact_url("postgres://ledger@db/ledger?password=s3cret&sslmode=disable"),
            "postgres://ledger@db/ledger?password=***&sslmode=disable"
        );
        assert_eq!(redact_url("postgresql://db/x"), "postgresql://db/x");
        assert_eq!(
            redact_url("postgres://u:ab/cd@db.example/ledger"),
            "postgres://u:***@db.example/ledger"
        );
        assert_eq!(
            redact_url("postgres://db/ledger?pass%77ord=s3cret"),
            "postgres://db/ledger?pass%77ord=***"
        );
        assert_eq!(redact_url("nonsense"), "(not a URL)");
    }

    #[test]
    fn schema_names_are_plain_lower_case_identifiers() {
        for ok in ["ledger", "ledger_0123abcd", "a"] {
            assert!(check_schema_name(ok).is_ok(), "{ok}");
        }
        let long = "a".repeat(64);
        for bad in [
            "",
            "Ledger",
            "1ledger",
            "led-ger",
            "ledger;drop",
            "_x",
            long.as_str(),
        ] {
            assert!(check_schema_name(bad).is_err(), "{bad}");
        }
        let new = new_schema_name().expect("name");
        assert!(check_schema_name(&new).is_ok() && new.len() == 23, "{new}");
    }

    #[test]
    fn a_storage_file_round_trips_and_a_bad_one_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let at = PgAt {
            url: "postgres://u:p@127.0.0.1:5/db".into(),
            schema: "ledger_x".into(),
        };
        write_storage_file(dir.path(), &at).expect("write");
        assert_eq!(
            Location::of(dir.path()).expect("read"),
            Some(Location::Postgres(at.clone()))
        );
        assert!(write_storage_file(dir.path(), &at).is_err(), "a second log");
        let mode = std::fs::metadata(dir.path().join(STORAGE_FILE))
            .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
            .expect("mode");
        assert_eq!(mode, 0o600);
        for bad in [
            "backend = sqlite\nurl = postgres://x/y\nschema = a\n",
            "backend = postgres\nurl = mysql://x/y\nschema = a\n",
            "backend = postgres\nurl = postgres://x/y\nschema = A;\n",
            "backend = postgres\nurl = postgres://x/y\n",
            "backend postgres\n",
        ] {
            std::fs::write(dir.path().join(STORAGE_FILE), bad).expect("write");
            assert!(Location::of(dir.path()).is_err(), "{bad}");
        }
    }
}
