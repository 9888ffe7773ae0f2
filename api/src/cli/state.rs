//! `ledger state`: fetch a task class's committed state and check that the
//! decision numbers follow from it with nothing left out, without replaying
//! the log (docs/COMPLETENESS.md).

use std::path::PathBuf;

use clap::Args;
use verifier::wire::StateResponse;
use verifier::Client;

use super::fail;

#[derive(Args)]
pub struct StateArgs {
    /// The task class.
    task_class: String,
    /// The server's base URL.
    #[arg(long, env = "LEDGER_SERVER")]
    server: String,
    /// The log's note verifier key.
    #[arg(long)]
    key: String,
    /// A C2SP tlog-policy file: the checkpoint the commitment is proven in
    /// must carry a quorum of these witnesses' cosignatures.
    #[arg(long, value_name = "FILE")]
    policy: Option<PathBuf>,
    /// Refuse a state that covers fewer entries than this (the newest size
    /// you already trust): the answer must be at least that fresh. A state
    /// committed at index N covers N + 1 entries (the commitment changes
    /// nothing).
    #[arg(long, default_value_t = 0)]
    min_size: u64,
    /// The agreed window, in days (the server's `window_days`): an answer
    /// computed over another window is refused.
    #[arg(long, default_value_t = 30)]
    window_days: u32,
    /// How far the answer's stated time may be from this machine's clock.
    #[arg(long, default_value_t = 300)]
    max_skew_secs: u32,
    /// Print the checked answer as JSON instead of a summary.
    #[arg(long)]
    json: bool,
    #[arg(long, env = "LEDGER_READ_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

pub fn run(a: StateArgs) -> anyhow::Result<()> {
    let client = Client::new(&a.server, a.token.clone());
    let policy = a
        .policy
        .as_deref()
        .map(super::audit::read_policy)
        .transpose()?;
    let resp: StateResponse =
        client.get_json(&format!("/v1/task-classes/{}/state", a.task_class))?;
    if resp.task_class != a.task_class {
        return Err(fail(format!(
            "asked for `{}`, the answer is for `{}`",
            a.task_class, resp.task_class
        )));
    }
    let rules = verifier::state::StateRules {
        settings: projections::Settings {
            window_seconds: i64::from(a.window_days) * 24 * 3600,
            ..projections::Settings::default()
        },
        now_micros: events::Clock::now_micros(&events::SystemClock),
        max_skew_micros: i64::from(a.max_skew_secs) * 1_000_000,
    };
    let v = verifier::state::check_state(&resp, &a.key, policy.as_ref(), a.min_size, &rules)
        .map_err(|e| fail(e.to_string()))?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "task_class": v.task_class,
                "committed_size": v.committed_size,
                "tree_size": v.tree_size,
                "state_root": v.state_root,
                "witnessed_by": v.witnessed_by,
                "view": v.view,
            }))?
        );
        return Ok(());
    }
    match &v.view {
        None => println!(
            "OK: task class `{}` is not registered in the state committed at size {} (proven absent under state root {})",
            v.task_class, v.committed_size, v.state_root
        ),
        Some(view) => {
            println!(
                "OK: `{}` at size {}: {} cases committed, recommended {} (current {}); {} held-out scores, {} block failures in the window",
                v.task_class,
                v.committed_size,
                resp.cases.len(),
                view.recommendation.recommended_tier.as_str(),
                view.recommendation.current_tier.as_str(),
                view.held_out.cases,
                view.failures.block,
            );
            println!(
                "   every case record of the class hashes to the committed state root {}, proven in the signed tree of size {}",
                v.state_root, v.tree_size
            );
        }
    }
    if !v.witnessed_by.is_empty() {
        println!("   cosigned by: {}", v.witnessed_by.join(", "));
    }
    Ok(())
}
