//! `ledger migrate`: a data directory's log moved between the redb file
//! and a PostgreSQL schema, proven to reach the same head.

use std::path::PathBuf;

use clap::Args;

use super::progress_bar;

#[derive(Args)]
pub struct MigrateArgs {
    /// The data directory whose log is moved (stop its server first).
    #[arg(
        long,
        visible_alias = "from",
        env = "LEDGER_DATA_DIR",
        default_value = "./ledger-data"
    )]
    data_dir: PathBuf,
    /// Where to: a postgres:// URL (a new schema is created in that database), or `file`
    /// (ledger.redb in the data directory).
    #[arg(long)]
    to: String,
    /// The PostgreSQL schema to create (a lower-case letter, then lower-case letters, digits or
    /// underscores). Default: ledger_ and 16 random hex digits.
    #[arg(long)]
    schema: Option<String>,
    /// With a postgres:// --to: create the schema through this login, which is to own it, and
    /// grant the --to login only what a writer needs (ops/postgres.md, "Roles").
    #[arg(long)]
    owner_url: Option<String>,
    /// Do not draw a progress bar.
    #[arg(long)]
    quiet: bool,
}

pub fn run(a: MigrateArgs) -> anyhow::Result<()> {
    use ledger::store::pg;
    let target = if a.to == "file" {
        if a.schema.is_some() {
            anyhow::bail!("--schema names a PostgreSQL schema; --to file has none");
        }
        ledger::migrate::Target::File
    } else if pg::is_postgres_url(&a.to) {
        let schema = match a.schema {
            Some(s) => s,
            None => pg::new_schema_name()?,
        };
        pg::check_schema_name(&schema).map_err(|e| anyhow::anyhow!("--schema: {e}"))?;
        ledger::migrate::Target::Postgres(pg::PgAt {
            url: a.to.clone(),
            schema,
        })
    } else {
        anyhow::bail!(
            "--to: {} is neither `file` nor a postgres:// or postgresql:// URL",
            pg::redact_url(&a.to)
        );
    };
    let to_file = matches!(target, ledger::migrate::Target::File);
    let to = match &target {
        ledger::migrate::Target::File => a
            .data_dir
            .join(ledger::store::DB_FILE)
            .display()
            .to_string(),
        ledger::migrate::Target::Postgres(at) => format!("PostgreSQL, {}", at.describe()),
    };
    let pb = progress_bar(a.quiet, "copying");
    if a.owner_url.is_some() && to_file {
        anyhow::bail!("--owner-url creates a PostgreSQL schema; --to file has none");
    }
    let moved = ledger::migrate::migrate_owned(
        &a.data_dir,
        target,
        a.owner_url.as_deref(),
        &mut |done, total| {
            pb.set_length(total);
            pb.set_position(done);
        },
    );
    pb.finish_and_clear();
    let m = moved?;
    println!(
        "moved {} entries to {to}: the same size and root ({}), every hash recomputed and the copy verified",
        m.size,
        ledger::hash::to_hex(&m.root)
    );
    println!(
        "private parts: {} entries, {} key slots, {} redacted parts",
        m.private_rows, m.keys, m.redacted
    );
    println!(
        "the source is kept ({}), with every private part's key: destroy it once the move is trusted",
        if to_file {
            "the PostgreSQL schema the storage file named".to_owned()
        } else {
            format!(
                "{}{} and {}{}",
                ledger::store::DB_FILE,
                ledger::migrate::MOVED_SUFFIX,
                ledger::private::KEYS_FILE,
                ledger::migrate::MOVED_SUFFIX
            )
        }
    );
    Ok(())
}
