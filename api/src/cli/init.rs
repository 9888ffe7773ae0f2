//! `ledger init` and `ledger keygen`: a new data directory, a new key file.

use std::path::PathBuf;

use clap::Args;

#[derive(Args)]
pub struct InitArgs {
    #[arg(long, env = "LEDGER_DATA_DIR", default_value = "./ledger-data")]
    data_dir: PathBuf,
    /// Checkpoint origin and note key name (a schemaless URL).
    #[arg(long, default_value = api::init::DEFAULT_ORIGIN)]
    origin: String,
    /// The operator's identity, recorded in the genesis entry.
    #[arg(long, default_value = "operator")]
    operator_identity: String,
    /// Use this existing operator key file instead of creating <data-dir>/operator.key.
    #[arg(long)]
    operator_key: Option<PathBuf>,
    /// Keep the log in PostgreSQL: a postgres:// URL naming the database, in which a new
    /// schema is created (the data directory keeps the keys and a `storage` file that points at
    /// it). Default: ledger.redb in the data directory.
    #[arg(long, env = "LEDGER_STORAGE", hide_env_values = true)]
    storage: Option<String>,
    /// The PostgreSQL schema to create for the log (a lower-case letter, then lower-case
    /// letters, digits or underscores). Default: ledger_ and 16 random hex digits.
    #[arg(long, requires = "storage")]
    schema: Option<String>,
    /// Create the schema through this postgres:// URL, a login that is to own it, and grant the
    /// login in --storage only what a writer needs (it can then neither drop nor disable the
    /// schema's triggers). Default: the --storage login creates and owns it.
    #[arg(long, requires = "storage", conflicts_with = "join")]
    owner_url: Option<String>,
    /// Join the log already in --storage/--schema as one more frontend: nothing is created
    /// or appended; the data directory gets the log's key (--log-key) and a storage file.
    #[arg(long, requires_all = ["storage", "schema", "log_key"])]
    join: bool,
    /// With --join: the log's key file, as `ledger init` wrote it for the log (copy it
    /// securely from the first frontend).
    #[arg(long, requires = "join")]
    log_key: Option<PathBuf>,
}

#[derive(Args)]
pub struct KeygenArgs {
    /// The key's name (a principal's name, or the log origin for a log key).
    #[arg(long)]
    name: String,
    /// Where to write the key.
    #[arg(long)]
    out: PathBuf,
}

#[derive(Args)]
pub struct ReaderTokenArgs {
    /// The reader's role: auditor, gate or maintainer.
    #[arg(long)]
    role: String,
    /// A name for the reader (one word), shown in the access log.
    #[arg(long)]
    name: String,
}

pub fn reader_token(a: ReaderTokenArgs) -> anyhow::Result<()> {
    let (token, line) = api::readers::new_token(&a.role, &a.name)?;
    println!("token (give it to the reader; it is not kept anywhere): {token}");
    println!("readers file line (the token's SHA-256 only):");
    println!("{line}");
    Ok(())
}

pub fn run(a: InitArgs) -> anyhow::Result<()> {
    let InitArgs {
        data_dir,
        origin,
        operator_identity,
        operator_key,
        storage,
        schema,
        join,
        log_key,
        owner_url,
    } = a;
    let (dir, origin, identity) = (&data_dir, &origin, &operator_identity);
    let operator_key = operator_key.as_deref();
    let at = match storage {
        None => None,
        Some(url) => {
            if !ledger::store::pg::is_postgres_url(&url) {
                anyhow::bail!(
                    "--storage: {} is not a postgres:// or postgresql:// URL",
                    ledger::store::pg::redact_url(&url)
                );
            }
            let schema = match schema {
                Some(s) => s,
                None => ledger::store::pg::new_schema_name()?,
            };
            ledger::store::pg::check_schema_name(&schema)
                .map_err(|e| anyhow::anyhow!("--schema: {e}"))?;
            Some(ledger::store::pg::PgAt { url, schema })
        }
    };
    if join {
        let (Some(at), Some(log_key)) = (&at, &log_key) else {
            anyhow::bail!("--join needs --storage, --schema and --log-key");
        };
        let key = api::init::join(dir, at, log_key)?;
        println!(
            "joined {} as a frontend of the log in PostgreSQL, {}",
            dir.display(),
            at.describe()
        );
        println!("verifier key:          {}", key.verifier_key());
        println!("\nnext: ledger serve --data-dir {}", dir.display());
        return Ok(());
    }
    if let Some(u) = &owner_url {
        if !ledger::store::pg::is_postgres_url(u) {
            anyhow::bail!(
                "--owner-url: {} is not a postgres:// or postgresql:// URL",
                ledger::store::pg::redact_url(u)
            );
        }
    }
    let i = api::init::init_with(
        dir,
        origin,
        identity,
        operator_key,
        at.as_ref().map(|at| (at, owner_url.as_deref())),
        ledger::Config::default(),
    )?;
    println!("initialised {}", dir.display());
    match &at {
        Some(at) => println!("log kept in:           PostgreSQL, {}", at.describe()),
        None => println!(
            "log kept in:           {}",
            dir.join(ledger::store::DB_FILE).display()
        ),
    }
    println!("log key (secret):      {}", i.log_key_path.display());
    println!(
        "operator key (secret): {}  <- move it off this machine after enrolling principals",
        i.operator_key_path.display()
    );
    println!("verifier key:          {}", i.log_key.verifier_key());
    println!(
        "operator key id:       {}",
        events::key_id(&i.operator.verifying_key())
    );
    println!("\nnext: ledger serve --data-dir {}", dir.display());
    Ok(())
}

pub fn keygen(a: KeygenArgs) -> anyhow::Result<()> {
    let KeygenArgs { name, out } = a;
    let out = out.as_path();
    let k = api::init::new_principal_key(&name)?;
    api::init::write_secret(out, &k.private_key())?;
    let vk = k.signing_key().verifying_key();
    println!("wrote {} (mode 0600)", out.display());
    println!("key id:       {}", events::key_id(&vk));
    println!("public key:   {}", events::envelope::public_key_b64(&vk));
    println!("verifier key: {}", k.verifier_key());
    let ek = k.event_signing_key().verifying_key();
    println!(
        "used as a log key, its ledger event key is {} (public key {}): enrol it with role ledger",
        events::key_id(&ek),
        events::envelope::public_key_b64(&ek)
    );
    Ok(())
}
