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
    // Never wait for a person: no credential prompt, no host-key question.
    cmd.env("GIT_TERMINAL_PROMPT", "0");
    if std::env::var_os("GIT_SSH_COMMAND").is_none() {
        cmd.env("GIT_SSH_COMMAND", "ssh -oBatchMode=yes");
    }
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

    /// Commits the file `name` of the work tree (only it) with `message`,
    /// and pushes the branch to its upstream (or to `origin` under the same
    /// name), never forced. Returns the commit.
    pub fn add_file(&self, name: &str, message: &str) -> Result<String, AnchorError> {
        git(&self.dir, &["add", "--", name])?;
        git(&self.dir, &["commit", "-q", "-m", message, "--", name])?;
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
        Ok(commit)
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
        let commit = self.add_file(&name, &format!("anchor: tree size {size}"))?;
        Ok(format!("git:{path}@{commit}"))
    }

    fn list(&self) -> Result<Vec<Anchor>, AnchorError> {
        DirTarget::new(&self.dir).list()
    }
}

/// Clones the anchors repository at `url` into `into` (which must not
/// exist) and reads its anchors. An anchor is only ever added: a history in
/// which any anchor file was changed, deleted or renamed, on any branch,
/// is refused ([`AnchorError::HistoryRewritten`]), so a plain (not forced)
/// commit that removes an inconvenient anchor is caught as surely as a
/// forced push that rewrote history would be by the remote.
pub fn clone_anchors(url: &str, into: &Path) -> Result<Vec<Anchor>, AnchorError> {
    let parent = into.parent().unwrap_or(Path::new("."));
    let name = into
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| AnchorError::Io(format!("{} has no file name", into.display())))?;
    git(parent, &["clone", "-q", "--no-checkout", "--", url, &name])?;
    check_history(into)?;
    git(into, &["checkout", "-q"])?;
    DirTarget::new(into).list()
}

/// Refuses a history in which an anchor file was ever modified, deleted or
/// renamed (renames are shown as a deletion and an addition).
pub fn check_history(dir: &Path) -> Result<(), AnchorError> {
    let changes = git(
        dir,
        &[
            "log",
            "--all",
            "--no-renames",
            "--diff-filter=MDT",
            "--format=commit %H",
            "--name-status",
            "--",
            "*.checkpoint",
            // Rekor bundles kept beside anchors (docs/SIGSTORE.md) are only
            // ever added too.
            "*.sigstore.json",
        ],
    )?;
    let mut commit = String::new();
    for line in changes.lines() {
        if let Some(c) = line.strip_prefix("commit ") {
            commit = c.to_owned();
        } else if let Some((status, file)) = line.split_once('\t') {
            return Err(AnchorError::HistoryRewritten {
                anchor: file.to_owned(),
                commit: commit.clone(),
                change: match status {
                    "D" => "deleted",
                    "T" => "replaced by another kind of file",
                    _ => "modified",
                }
                .to_owned(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) {
        git(dir, args).unwrap_or_else(|e| panic!("git {args:?}: {e}"));
    }

    #[test]
    fn an_anchor_deleted_or_renamed_in_history_is_refused() {
        let d = tempfile::tempdir().expect("dir");
        let repo = d.path();
        run(repo, &["init", "-q"]);
        std::fs::write(repo.join("a.checkpoint"), "first\n").expect("write");
        std::fs::write(repo.join("README"), "anchors\n").expect("write");
        run(repo, &["add", "."]);
        run(repo, &["commit", "-q", "-m", "one"]);
        check_history(repo).expect("only additions");
        // Other files may change.
        std::fs::write(repo.join("README"), "the anchors\n").expect("write");
        run(repo, &["commit", "-q", "-am", "readme"]);
        check_history(repo).expect("only additions");
        run(repo, &["mv", "a.checkpoint", "b.checkpoint"]);
        run(repo, &["commit", "-q", "-m", "rename"]);
        match check_history(repo) {
            Err(AnchorError::HistoryRewritten { anchor, change, .. }) => {
                assert_eq!(
                    (anchor.as_str(), change.as_str()),
                    ("a.checkpoint", "deleted")
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_rekor_bundle_changed_in_history_is_refused() {
        let d = tempfile::tempdir().expect("dir");
        let repo = d.path();
        run(repo, &["init", "-q"]);
        std::fs::write(repo.join("a.checkpoint.sigstore.json"), "{}\n").expect("write");
        run(repo, &["add", "."]);
        run(repo, &["commit", "-q", "-m", "bundle"]);
        check_history(repo).expect("only additions");
        std::fs::write(repo.join("a.checkpoint.sigstore.json"), "{ }\n").expect("write");
        run(repo, &["commit", "-q", "-am", "edit"]);
        match check_history(repo) {
            Err(AnchorError::HistoryRewritten { anchor, change, .. }) => {
                assert_eq!(
                    (anchor.as_str(), change.as_str()),
                    ("a.checkpoint.sigstore.json", "modified")
                );
            }
            other => panic!("{other:?}"),
        }
    }
}
