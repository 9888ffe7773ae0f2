//! Anchors in git history: each anchor is written into a git work tree,
//! committed, and pushed to the work tree's remote, so that the published
//! anchors live in a repository the log's host does not control (the
//! design's "published anchor lives in git history"). Reading them back is
//! reading a clone: [`crate::anchor::read_dir`] on its work tree, or
//! [`clone_anchors`] from a URL.
//!
//! The `git` program does the work (it is on every machine that has a
//! repository to push to); nothing here rewrites history: a commit only
//! adds one new anchor file, and a push that the remote refuses (someone
//! else rewrote it) is an error, never forced.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::anchor::{Anchor, AnchorError, AnchorTarget, DirTarget};

/// Whether `dir` is the top of a git work tree.
pub fn is_repo(dir: &Path) -> bool {
    dir.join(".git").exists()
}

fn git(dir: &Path, args: &[&str]) -> Result<String, AnchorError> {
    let mut cmd = Command::new("git");
    cmd.arg("-C").arg(dir).args(args);
    // A commit needs an identity; the repository's own, if it has one.
    for (var, value) in [
        ("GIT_AUTHOR_NAME", "evidence-ledger"),
        ("GIT_AUTHOR_EMAIL", "evidence-ledger@localhost"),
        ("GIT_COMMITTER_NAME", "evidence-ledger"),
        ("GIT_COMMITTER_EMAIL", "evidence-ledger@localhost"),
    ] {
        if std::env::var_os(var).is_none() {
            let key = if var.ends_with("NAME") {
                "user.name"
            } else {
                "user.email"
            };
            let configured = Command::new("git")
                .arg("-C")
                .arg(dir)
                .args(["config", key])
                .output()
                .is_ok_and(|o| o.status.success());
            if !configured {
                cmd.env(var, value);
            }
        }
    }
    let out = cmd
        .output()
        .map_err(|e| AnchorError::Io(format!("running git: {e}")))?;
    if !out.status.success() {
        return Err(AnchorError::Io(format!(
            "git {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Anchors committed to a git work tree and pushed to its remote.
#[derive(Debug, Clone)]
pub struct GitTarget {
    dir: PathBuf,
}

impl GitTarget {
    /// A target on the work tree at `dir` (see [`is_repo`]).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        GitTarget { dir: dir.into() }
    }

    /// Whether the work tree has a remote to push to.
    fn has_remote(&self) -> Result<bool, AnchorError> {
        Ok(!git(&self.dir, &["remote"])?.is_empty())
    }
}

impl AnchorTarget for GitTarget {
    /// Writes the anchor file, commits it (only it), and pushes the branch
    /// to its upstream (or to `origin` under the same name). The location
    /// names the file and the commit.
    fn publish(&self, note: &str, size: u64, unix_seconds: i64) -> Result<String, AnchorError> {
        let path = DirTarget::new(&self.dir).publish(note, size, unix_seconds)?;
        let name = Path::new(&path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        git(&self.dir, &["add", "--", &name])?;
        git(
            &self.dir,
            &[
                "commit",
                "-q",
                "-m",
                &format!("anchor: tree size {size}"),
                "--",
                &name,
            ],
        )?;
        let commit = git(&self.dir, &["rev-parse", "HEAD"])?;
        if self.has_remote()? {
            let upstream = git(
                &self.dir,
                &["rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{u}"],
            );
            match upstream {
                Ok(_) => git(&self.dir, &["push", "-q"])?,
                Err(_) => git(&self.dir, &["push", "-q", "-u", "origin", "HEAD"])?,
            };
        }
        Ok(format!("git:{path}@{commit}"))
    }

    fn list(&self) -> Result<Vec<Anchor>, AnchorError> {
        DirTarget::new(&self.dir).list()
    }
}

/// Clones the anchors repository at `url` into `into` (which must not
/// exist) and reads its anchors.
pub fn clone_anchors(url: &str, into: &Path) -> Result<Vec<Anchor>, AnchorError> {
    let parent = into.parent().unwrap_or(Path::new("."));
    let name = into
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| AnchorError::Io(format!("{} has no file name", into.display())))?;
    git(parent, &["clone", "-q", "--", url, &name])?;
    DirTarget::new(into).list()
}
