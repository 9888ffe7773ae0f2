//! Completeness by replay: a replica of the log, kept in a local directory,
//! follows a server from one run to the next and folds every entry with the
//! same rules the server uses. Each projection the server answers is then
//! compared, field by field and bit for bit, with the replica's own view at
//! the same tree size, time and settings. A server that leaves an entry out
//! of an answer (a newer, lower score; a block failure; a retired case; a
//! pending proposal) answers numbers the replica does not get, and is caught.
//!
//! What it proves: the projection is the one the whole log up to the signed
//! checkpoint gives, at the time and with the settings the answer states.
//! What it still trusts: the caller checks that the stated time is recent
//! and the settings are the agreed ones (both are in the answer, and the
//! report shows them); a log the server never showed anyone (a split view)
//! is caught by comparing checkpoints with others (anchors, witnesses), not
//! here.
//!
//! Every entry the replica keeps is also checked against the event rules,
//! in log order, as the server's start checks them
//! ([`events::State::replay_one`]): every envelope signature, every
//! co-signature and Sigstore bundle (against the trusted root the log
//! records before it), every rule, sequencing times that never go back;
//! and, as the door checks, an envelope id appearing once. A recorded
//! Sigstore root must name the origin of the audited checkpoint. The rules
//! that need the values behind handles are not checked: those values are
//! private.
//!
//! The replica keeps every entry it has checked, in a `ledger` data
//! directory of its own, and its projection and its rule state sealed
//! under a key of its own: each run fetches, checks and folds only what is
//! new.

use std::path::{Path, PathBuf};

use events::State;
use ledger::merkle::verify_consistency;
use ledger::{Config, EntryKey, Hash, Ledger, LogView, Sequenced, Sequencer};
use projections::driver::Projector;
use projections::{Settings, TaskClassView};

use crate::check::parse_proof;
use crate::client::Client;
use crate::wire::{ConsistencyProof, EntryPage};
use crate::CheckError;

/// How many entries the replica checks against the signed root before it
/// keeps them (a consistency proof from the end of each step to the
/// checkpoint proves the step is a prefix of the signed tree).
pub const STEP: u64 = 10_000;

/// Where the replica keeps its rule state, sealed (`ledger::sealed`).
const RULES_AUX: &str = "replica.rules";
const RULES_MAGIC: &[u8; 8] = b"ELRULES1";
/// The version of the rules a sealed rule state was checked under, in the
/// seal's key: a build whose rules differ starts from a new key, so a state
/// sealed by another build is refused and the whole replica checked again.
/// Raised with every change to what the rules refuse.
const RULES_VERSION: &str = "evidence-ledger replica rules v2";

/// The replica's sequencer: every leaf appended as served, indexed under
/// its envelope id. [`Replica::follow`] checks that an id is new before
/// it submits a leaf, as the door does before it appends one.
struct ByEnvelopeId;

impl Sequencer for ByEnvelopeId {
    type Input = Vec<u8>;
    type Accepted = ();
    type Rejected = std::convert::Infallible;

    const KEYED: bool = true;

    fn sequence(
        &mut self,
        leaf: Vec<u8>,
        _: u64,
        _: &LogView<'_>,
    ) -> Sequenced<(), std::convert::Infallible> {
        let key = Self::key_of(&leaf);
        Sequenced::Append {
            leaf,
            accepted: (),
            key,
            private: Vec::new(),
            shred: Vec::new(),
        }
    }

    fn failed(&mut self, _: &LogView<'_>) {}

    fn key_of(leaf: &[u8]) -> Option<EntryKey> {
        <events::EventSequencer as Sequencer>::key_of(leaf)
    }
}

/// A replica of a server's log, with its projection.
pub struct Replica {
    dir: PathBuf,
    log: Ledger<ByEnvelopeId>,
    projector: Projector,
    key: [u8; 32],
    step: u64,
    refused: Option<String>,
    /// Recommendations checked by [`Replica::follow`], when it checks them.
    recommendations: Option<u64>,
    /// The event rules' state, folded up to `rules.size` entries.
    rules: State,
    /// Why the rule state the last run sealed was refused, if it was.
    rules_refused: Option<String>,
}

impl Replica {
    /// Opens the replica in `dir`, or starts an empty one there. Its
    /// projection resumes from where the last run saved it.
    pub fn open(dir: &Path) -> anyhow::Result<Replica> {
        std::fs::create_dir_all(dir)?;
        let key_file = dir.join("replica.key");
        if !key_file.exists() {
            crate::keys::write_secret(&key_file, &hex::encode(rand::random::<[u8; 32]>()))?;
        }
        let text = std::fs::read_to_string(&key_file)?;
        let key: [u8; 32] = hex::decode(text.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| anyhow::anyhow!("{} is not a replica key", key_file.display()))?;
        let log = Ledger::open_with(&dir.join("log"), Config::default(), |_, _| Ok(ByEnvelopeId))?;
        // Waits while the open indexes the envelope ids of entries kept
        // before they were indexed.
        log.lookups()?;
        // Not caught up here: entries past the saved projection were kept by
        // a run that did not finish (or failed), and the next follow folds
        // them, checking what it checks (recommendations) on the way.
        let (projector, resumed) = Projector::resume(&log, Settings::default(), &key)?;
        let refused = match resumed {
            projections::driver::Resumed::Refused(why) => Some(why.to_string()),
            _ => None,
        };
        let (rules, rules_refused) = resume_rules(&log, &rules_key(&key))?;
        Ok(Replica {
            dir: dir.to_path_buf(),
            log,
            projector,
            key,
            step: STEP,
            refused,
            recommendations: None,
            rules,
            rules_refused,
        })
    }

    /// Why the projection the replica saved last time was refused (it was
    /// then folded again from the replica's log), if it was.
    pub fn refused(&self) -> Option<&str> {
        self.refused.as_deref()
    }

    /// Why the rule state the replica sealed last time was refused (the
    /// whole replica is then checked against the rules again), if it was.
    pub fn rules_refused(&self) -> Option<&str> {
        self.rules_refused.as_deref()
    }

    /// Checks `step` entries at a time against the signed root instead of
    /// [`STEP`] (at least 1).
    pub fn set_step(&mut self, step: u64) {
        self.step = step.max(1);
    }

    /// Where the replica lives.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many entries the replica holds.
    pub fn size(&self) -> u64 {
        self.log.head().size
    }

    /// Follows `client`'s server from the replica's head to the signed
    /// checkpoint `(size, root)` of the log `origin`, [`STEP`] entries at a
    /// time (see [`Replica::set_step`]): each entry's
    /// leaf must re-hash to the leaf hash served and its chain hash follow
    /// from the entries before it, and each step must be a prefix of the
    /// signed tree (its root, computed here, is proven consistent with
    /// `root`) before the replica keeps it. Each step kept is then checked
    /// against the event rules, in log order; a Sigstore trusted root the
    /// log records must name `origin`. Returns how many entries were
    /// added; `progress` gets (entries held, size).
    pub fn follow(
        &mut self,
        client: &Client,
        origin: &str,
        size: u64,
        root: &Hash,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64, CheckError> {
        // Entries a run kept before it failed are checked first (a log
        // that breaks a rule fails every run at the same entry).
        self.check_rules(origin)?;
        let head = self.log.head();
        if size < head.size {
            return Err(CheckError::Disproved(format!(
                "the server's checkpoint (size {size}) is older than the replica (size {})",
                head.size
            )));
        }
        if size == head.size {
            return if *root == head.root {
                self.fold_checking_recommendations()?;
                Ok(0)
            } else {
                Err(CheckError::Disproved(format!(
                    "the server signs a root for size {size} that is not the replica's"
                )))
            };
        }
        let mut frontier = self
            .log
            .frontier_at(head.size)
            .map_err(anyhow::Error::from)?;
        let mut served = crate::entries::Served::from(head.size, head.chain);
        let mut next = head.size;
        while next < size {
            let end = (next + self.step).min(size);
            let mut leaves = Vec::with_capacity((end - next) as usize);
            while served.next < end {
                let at = served.next;
                let page: EntryPage = client.get_json(&format!(
                    "/v1/entries?start={at}&limit={}",
                    (end - at).min(crate::entries::PAGE)
                ))?;
                if page.entries.is_empty() {
                    return Err(CheckError::Disproved(format!(
                        "the server returned no entries at {at} below its checkpoint size {size}"
                    )));
                }
                for e in page.entries.iter().take((end - at) as usize) {
                    let (leaf, lh) = served.check(e)?;
                    frontier.push(lh);
                    leaves.push(leaf);
                }
            }
            let step_root = frontier.root();
            if end < size {
                let p: ConsistencyProof = client
                    .get_json(&format!("/v1/proofs/consistency?first={end}&second={size}"))?;
                let proof = parse_proof("proof", &p.proof)?;
                verify_consistency(end, &step_root, size, root, &proof).map_err(|e| {
                    CheckError::Disproved(format!(
                        "entries {next}..{end} are not a prefix of the signed tree of size {size}: {e}"
                    ))
                })?;
            } else if step_root != *root {
                return Err(CheckError::Disproved(format!(
                    "the {size} entries served do not hash to the signed root"
                )));
            }
            self.refuse_reused_ids(next, &leaves)?;
            let pending: Vec<_> = leaves
                .into_iter()
                .map(|leaf| self.log.submit_input(leaf))
                .collect::<Result<_, _>>()
                .map_err(anyhow::Error::from)?;
            for p in pending {
                p.wait().map_err(|e| match e {
                    ledger::AppendError::Ledger(e) => anyhow::Error::from(e),
                    ledger::AppendError::Rejected { reason, .. } => match reason {},
                })?;
            }
            self.check_rules(origin)?;
            next = end;
            progress(next, size);
        }
        served.finish()?;
        let kept = self.log.head();
        if kept.size != size || kept.root != *root {
            return Err(anyhow::anyhow!(
                "the replica holds {} entries with another root than the signed one",
                kept.size
            )
            .into());
        }
        self.fold_checking_recommendations()?;
        Ok(size - head.size)
    }

    /// With the settings a server computes its projections with (the
    /// agreed ones): from then on, [`Replica::follow`] also holds every
    /// `promotion.recommended` it folds to the replica's own view at the
    /// recommendation's checkpoint and time
    /// ([`Projector::check_recommendation`]).
    pub fn check_recommendations_with(&mut self, settings: &Settings) {
        self.projector.set_settings(settings);
        self.recommendations = Some(0);
    }

    /// How many recommendations [`Replica::follow`] has checked since
    /// [`Replica::check_recommendations_with`] (`None` before it).
    pub fn recommendations_checked(&self) -> Option<u64> {
        self.recommendations
    }

    /// Folds what the replica holds into its projection; when
    /// recommendations are checked, each one is checked on the way.
    fn fold_checking_recommendations(&mut self) -> Result<(), CheckError> {
        if let Some(mut checked) = self.recommendations {
            let size = self.log.head().size;
            let mut at = self.projector.projection().size();
            while at < size {
                let end = size.min(at + 1024);
                for e in self.log.entries(at, end).map_err(anyhow::Error::from)? {
                    let (d, at) = events::decode_logged_leaf(&e.leaf)
                        .map_err(|r| anyhow::anyhow!("the replica's entry {}: {r}", e.index))?;
                    if let events::Event::PromotionRecommended(r) = &d.payload.event {
                        self.projector
                            .check_recommendation(&self.log, e.index, r, &d.payload.issued_at, at)
                            .map_err(|e| match e {
                                projections::driver::DriverError::Mismatch(m) => {
                                    CheckError::Disproved(m.to_string())
                                }
                                other => CheckError::Other(other.into()),
                            })?;
                        checked += 1;
                    }
                }
                at = end;
            }
            self.recommendations = Some(checked);
        }
        self.projector
            .catch_up(&self.log)
            .map_err(anyhow::Error::from)?;
        Ok(())
    }

    /// The replica's view of `task_class` at its head, at `now` (µs, UTC)
    /// with `settings`: the view a server must answer at that size. Answered
    /// incrementally from the window sums the projection keeps
    /// ([`projections::Projection::view_cached`], bit for bit the answer of
    /// the full scan of the window).
    pub fn view(
        &mut self,
        task_class: &str,
        now: i64,
        settings: &Settings,
    ) -> Result<TaskClassView, CheckError> {
        let head = self.log.head();
        let refused = |e: &dyn std::fmt::Display| {
            CheckError::Disproved(format!(
                "the replica has no view of `{task_class}` at size {}: {e}",
                head.size
            ))
        };
        self.projector.set_settings(settings);
        self.projector
            .view_at_head(&self.log, task_class, now)
            .map_err(|e| refused(&e))
    }

    /// The task classes registered in the log up to the replica's size.
    pub fn task_classes(&self) -> Vec<String> {
        self.projector
            .projection()
            .task_classes()
            .map(str::to_owned)
            .collect()
    }

    /// When the replica's last entry was sequenced (µs, UTC), if it has one.
    pub fn last_sequenced_at(&self) -> anyhow::Result<Option<i64>> {
        let size = self.size();
        if size == 0 {
            return Ok(None);
        }
        let entry = self.log.entry(size - 1)?;
        let (_, at) = events::decode_logged_leaf(&entry.leaf)
            .map_err(|e| anyhow::anyhow!("the replica's entry {}: {e}", size - 1))?;
        Ok(Some(at))
    }

    /// Saves the replica's projection and rule state (sealed under the
    /// replica's key), so the next run checks and folds only what is new.
    pub fn save(&self) -> anyhow::Result<()> {
        self.projector.save(&self.log, &self.key)?;
        let size = self.rules.size;
        let root = self.log.root_at(size)?;
        self.log.put_aux(
            RULES_AUX,
            &ledger::sealed::seal(
                &rules_key(&self.key),
                RULES_MAGIC,
                size,
                &root,
                &self.rules.encode_snapshot(),
            ),
        )?;
        Ok(())
    }

    /// Refuses `leaves` (entries `first`, `first + 1`, …) when one names an
    /// envelope id an entry before it already has: the door appends an id
    /// once (a re-post is acknowledged, never appended again), so a second
    /// entry under it was not appended through the door.
    fn refuse_reused_ids(&self, first: u64, leaves: &[Vec<u8>]) -> Result<(), CheckError> {
        let lookups = self.log.lookups().map_err(anyhow::Error::from)?;
        let held = self.log.head().size;
        if lookups.keys_through() < held {
            return Err(anyhow::anyhow!(
                "the replica's key lookup covers {} of its {held} entries",
                lookups.keys_through()
            )
            .into());
        }
        let mut step = std::collections::HashMap::new();
        for (index, leaf) in (first..).zip(leaves) {
            let Some(key) = ByEnvelopeId::key_of(leaf) else {
                continue; // a leaf that does not decode: the rules refuse it
            };
            let earlier = match step.insert(key.name.clone(), index) {
                Some(i) => Some(i),
                None => lookups
                    .key(&key.name)
                    .map_err(anyhow::Error::from)?
                    .map(|(i, _)| i)
                    .filter(|&i| i < held),
            };
            if let Some(earlier) = earlier {
                return Err(CheckError::Disproved(format!(
                    "entry {index} breaks the event rules: {}: entry {earlier} already has the envelope id {:?}",
                    events::RejectCode::EnvelopeIdReused.as_str(),
                    key.name
                )));
            }
        }
        Ok(())
    }

    /// Checks the entries the replica holds past its rule state against the
    /// event rules, in log order, every signature verified again; then that
    /// a Sigstore trusted root the log records names `origin`.
    fn check_rules(&mut self, origin: &str) -> Result<(), CheckError> {
        let head = self.log.head();
        if self.rules.size < head.size {
            let snap = self.log.snapshot().map_err(anyhow::Error::from)?;
            // A failed replay loses the state folded so far: the next run
            // starts again from the last sealed state, or from the start.
            let folded = std::mem::take(&mut self.rules)
                .replay_from(&LogView::without_lookups(&snap, head), true)
                .map_err(|e| match e {
                    events::state::ReplayError::Invalid { index, rejection } => {
                        CheckError::Disproved(format!(
                            "entry {index} breaks the event rules: {rejection}"
                        ))
                    }
                    events::state::ReplayError::Log(e) => CheckError::Other(e.into()),
                })?;
            self.rules = folded;
        }
        match &self.rules.sigstore {
            Some(t) if t.origin != origin => Err(CheckError::Disproved(format!(
                "the log records a Sigstore trusted root for origin {:?}, not the audited log's {origin:?}",
                t.origin
            ))),
            _ => Ok(()),
        }
    }
}

/// The key the replica's rule state is sealed under: the replica's key,
/// and the version of the rules it was checked under.
fn rules_key(replica_key: &[u8; 32]) -> [u8; 32] {
    ledger::sealed::derive_key(RULES_VERSION, replica_key)
}

/// The rule state the replica saved, when its seal and the root it names
/// check out against the replica's log; else the empty state (the next
/// follow checks the whole replica again) and why the saved one was
/// refused.
fn resume_rules<S: Sequencer>(
    log: &Ledger<S>,
    key: &[u8; 32],
) -> anyhow::Result<(State, Option<String>)> {
    let Some(rec) = log.get_aux(RULES_AUX)? else {
        return Ok((State::default(), None));
    };
    let size = log.head().size;
    let opened = ledger::sealed::open(key, RULES_MAGIC, &rec, size, |s| log.root_at(s))?;
    Ok(match opened {
        Ok(o) => match State::decode_snapshot(o.body).filter(|s| s.size == o.size) {
            Some(state) => (state, None),
            None => (
                State::default(),
                Some("its sealed body does not decode".to_owned()),
            ),
        },
        Err(e) => (State::default(), Some(e.to_string())),
    })
}

/// The first field (a JSON path) in which the view as served (its JSON, as
/// it arrived: every key counts, including any the typed view would pass
/// over) differs from `replayed`, or `None` when they are the same, floats
/// bit for bit.
pub fn first_difference(served: &serde_json::Value, replayed: &TaskClassView) -> Option<String> {
    fn walk(a: &serde_json::Value, b: &serde_json::Value, path: &str) -> Option<String> {
        use serde_json::Value::{Array, Object};
        match (a, b) {
            (Object(x), Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                keys.into_iter().find_map(|k| {
                    let (va, vb) = (x.get(k), y.get(k));
                    match (va, vb) {
                        (Some(va), Some(vb)) => walk(va, vb, &format!("{path}.{k}")),
                        _ => Some(format!("{path}.{k}")),
                    }
                })
            }
            (Array(x), Array(y)) if x.len() == y.len() => x
                .iter()
                .zip(y)
                .enumerate()
                .find_map(|(i, (va, vb))| walk(va, vb, &format!("{path}[{i}]"))),
            (serde_json::Value::Number(x), serde_json::Value::Number(y)) => {
                // Bit for bit: the same float, not merely equal text.
                let same = match (x.as_f64(), y.as_f64()) {
                    (Some(p), Some(q)) if x.is_f64() || y.is_f64() => p.to_bits() == q.to_bits(),
                    _ => x == y,
                };
                (!same).then(|| path.to_owned())
            }
            _ => (a != b).then(|| path.to_owned()),
        }
    }
    let Ok(replayed) = serde_json::to_value(replayed) else {
        return Some("view".to_owned());
    };
    walk(served, &replayed, "view")
}

/// What a replay of the projections established.
#[derive(Debug, Clone)]
pub struct Replayed {
    /// The replica's size after the run.
    pub size: u64,
    /// Entries fetched, checked and folded in this run.
    pub followed: u64,
    /// Task classes whose served view equals the replica's.
    pub task_classes: usize,
    /// Recommendations in the entries followed that equal the replica's
    /// own view at their checkpoint and time.
    pub recommendations: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> TaskClassView {
        serde_json::from_value(serde_json::json!({
            "task_class": "tc", "tree_size": 3, "root": "00", "now_micros": 5,
            "window_start_micros": 0, "settings": Settings::default(), "tier": "bronze",
            "active_cases_by_curation_class": {"held-out": 2}, "pending_proposals": 0,
            "runs_in_window": 1, "scores_in_window": 2, "shared_kernel_scores_in_window": 0,
            "held_out": {"cases": 2, "mean": 0.5, "mean_ci": null, "passed": 1,
                         "pass_rate": 0.5, "pass_rate_ci": null},
            "all_cases": {"cases": 2, "mean": 0.5, "mean_ci": null, "passed": 1,
                          "pass_rate": 0.5, "pass_rate_ci": null},
            "failures": {"block": 1, "warn": 0, "info": 0},
            "shared_kernel_failures": {"block": 0, "warn": 0, "info": 0},
            "cost_usd_in_window": 0.25, "latest_run": null,
            "evidence": [{"index": 1, "leaf_hash": "aa", "case_id": "c1", "score": 0.25},
                         {"index": 2, "leaf_hash": "bb", "case_id": "c2", "score": 0.75}],
            "recommendation": {"current_tier": "bronze", "recommended_tier": "bronze",
                               "rationale": [], "requires_human_approval": true}
        }))
        .expect("a view")
    }

    #[test]
    fn the_first_difference_is_named_down_to_the_field() {
        let a = view();
        let served = |v: &TaskClassView| serde_json::to_value(v).expect("json");
        assert_eq!(first_difference(&served(&a), &a), None);
        let mut b = a.clone();
        b.failures.block = 0;
        assert_eq!(
            first_difference(&served(&b), &a).as_deref(),
            Some("view.failures.block")
        );
        let mut b = a.clone();
        b.evidence.pop();
        assert_eq!(
            first_difference(&served(&b), &a).as_deref(),
            Some("view.evidence")
        );
        let mut b = a.clone();
        b.evidence[1].score = 0.5;
        assert_eq!(
            first_difference(&served(&b), &a).as_deref(),
            Some("view.evidence[1].score")
        );
        // One bit of a float is a difference.
        let mut b = a.clone();
        b.held_out.mean = Some(f64::from_bits(0.5f64.to_bits() + 1));
        assert_eq!(
            first_difference(&served(&b), &a).as_deref(),
            Some("view.held_out.mean")
        );
        // A key the typed view does not have is a difference too.
        let mut extra = served(&a);
        extra["unstated"] = 1.into();
        assert_eq!(
            first_difference(&extra, &a).as_deref(),
            Some("view.unstated")
        );
        // So is -0.0 for 0.0.
        let mut b = a.clone();
        b.cost_usd_in_window = 0.0;
        let mut c = a.clone();
        c.cost_usd_in_window = -0.0;
        assert_eq!(
            first_difference(&served(&c), &b).as_deref(),
            Some("view.cost_usd_in_window")
        );
    }
}
