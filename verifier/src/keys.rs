//! Reading keys from files: a principal's signing key, and a data
//! directory's log key.

use std::io::Write as _;
use std::path::Path;

use anyhow::Context;
use ed25519_dalek::SigningKey;

/// Reads a principal key file (note signer key format) as a signing key.
pub fn read_signing_key(path: &Path) -> anyhow::Result<SigningKey> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(anchors::LogKey::from_private(&text)?.signing_key())
}

/// The log key of the data directory `dir` (`log.key`).
pub fn local_key(dir: &Path) -> anyhow::Result<anchors::LogKey> {
    let text = std::fs::read_to_string(dir.join("log.key"))
        .with_context(|| format!("reading {}/log.key", dir.display()))?;
    Ok(anchors::LogKey::from_private(&text)?)
}

/// Writes `text` to a new file readable only by its owner (0600).
pub fn write_secret(path: &Path, text: &str) -> anyhow::Result<()> {
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        opts.mode(0o600);
    }
    let mut f = opts
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(text.as_bytes())?;
    f.write_all(b"\n")?;
    f.sync_all()?;
    Ok(())
}

/// Replaces `path` with `bytes` durably: a scratch file beside it, fsynced,
/// renamed over it, and the directory fsynced, so that a crash leaves the
/// old file or the new one, never an empty or torn one (a trusted
/// checkpoint that vanished would make the next audit trust anything).
pub fn replace_durably(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let mut f = tempfile::NamedTempFile::new_in(&dir)
        .with_context(|| format!("creating a scratch file in {}", dir.display()))?;
    f.write_all(bytes)?;
    f.as_file().sync_all()?;
    f.persist(path)
        .with_context(|| format!("writing {}", path.display()))?;
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("syncing {}", dir.display()))?;
    Ok(())
}
