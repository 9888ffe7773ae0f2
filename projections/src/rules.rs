//! The promotion rules (MISSION.md §5), each a named pure function. A tier is
//! recommended only when every rule for it holds; falling below the current
//! tier's rules recommends the tier below. Promotion moves one tier at a
//! time. Bronze is the floor and has no rules.

use events::model::{RuleOutcome, Tier, TierRule};

/// What the rules look at, for one task class at one checkpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleInput {
    /// Active held-out cases.
    pub active_held_out: usize,
    /// Active held-out cases with a promotion-eligible (microvm) score in the window.
    pub scored_held_out: usize,
    /// The lower 95% BCa bound of the mean of those cases' latest scores.
    pub lower_bound: Option<f64>,
    /// Block-severity failures among eligible scores of active cases in the window.
    pub block_failures: usize,
}

pub const ENOUGH_HELD_OUT_CASES: &str = "enough_held_out_cases";
pub const EVERY_CASE_SCORED_IN_WINDOW: &str = "every_case_scored_in_window";
pub const LOWER_BOUND_MEETS_THRESHOLD: &str = "lower_bound_meets_threshold";
pub const NO_BLOCK_FAILURE_IN_WINDOW: &str = "no_block_failure_in_window";

fn outcome(tier: Tier, rule: &str, holds: bool, detail: String) -> RuleOutcome {
    RuleOutcome {
        rule: format!("{}.{rule}", tier.as_str()),
        holds,
        detail,
    }
}

/// At least `min_cases_for_promotion` active held-out cases.
pub fn enough_held_out_cases(tier: Tier, input: &RuleInput, rule: &TierRule) -> RuleOutcome {
    let need = rule.min_cases_for_promotion as usize;
    outcome(
        tier,
        ENOUGH_HELD_OUT_CASES,
        input.active_held_out >= need,
        format!(
            "{} active held-out cases; {} needs at least {need}",
            input.active_held_out,
            tier.as_str()
        ),
    )
}

/// Every active held-out case has an eligible score in the window (and
/// there is at least one case).
pub fn every_case_scored_in_window(tier: Tier, input: &RuleInput) -> RuleOutcome {
    outcome(
        tier,
        EVERY_CASE_SCORED_IN_WINDOW,
        input.active_held_out > 0 && input.scored_held_out == input.active_held_out,
        format!(
            "{} of {} active held-out cases have a microvm score in the window",
            input.scored_held_out, input.active_held_out
        ),
    )
}

/// The lower confidence bound reaches the tier's threshold.
pub fn lower_bound_meets_threshold(tier: Tier, input: &RuleInput, rule: &TierRule) -> RuleOutcome {
    let holds = input
        .lower_bound
        .is_some_and(|lb| lb >= rule.score_threshold);
    let detail = match input.lower_bound {
        Some(lb) => format!(
            "lower 95% bound {lb:.4}; {} needs at least {}",
            tier.as_str(),
            rule.score_threshold
        ),
        None => format!(
            "no scores in the window; {} needs a lower bound of at least {}",
            tier.as_str(),
            rule.score_threshold
        ),
    };
    outcome(tier, LOWER_BOUND_MEETS_THRESHOLD, holds, detail)
}

/// No block-severity failure in the window.
pub fn no_block_failure_in_window(tier: Tier, input: &RuleInput) -> RuleOutcome {
    outcome(
        tier,
        NO_BLOCK_FAILURE_IN_WINDOW,
        input.block_failures == 0,
        format!(
            "{} block-severity failures in the window",
            input.block_failures
        ),
    )
}

/// All four rules for `tier`.
pub fn rules_for(tier: Tier, input: &RuleInput, rule: &TierRule) -> Vec<RuleOutcome> {
    vec![
        enough_held_out_cases(tier, input, rule),
        every_case_scored_in_window(tier, input),
        lower_bound_meets_threshold(tier, input, rule),
        no_block_failure_in_window(tier, input),
    ]
}

fn below(t: Tier) -> Tier {
    match t {
        Tier::Gold => Tier::Silver,
        _ => Tier::Bronze,
    }
}

fn above(t: Tier) -> Option<Tier> {
    match t {
        Tier::Bronze => Some(Tier::Silver),
        Tier::Silver => Some(Tier::Gold),
        Tier::Gold => None,
    }
}

/// The recommended tier and the rationale (every rule evaluated, in order).
/// `rule_of(tier)` gives the task class's rule for silver and gold.
pub fn recommend(
    current: Tier,
    input: &RuleInput,
    rule_of: impl Fn(Tier) -> Option<TierRule>,
) -> (Tier, Vec<RuleOutcome>) {
    let mut rationale = Vec::new();
    if current != Tier::Bronze {
        if let Some(r) = rule_of(current) {
            let kept = rules_for(current, input, &r);
            let holds = kept.iter().all(|o| o.holds);
            rationale.extend(kept);
            if !holds {
                return (below(current), rationale);
            }
        }
    }
    if let Some(next) = above(current) {
        if let Some(r) = rule_of(next) {
            let up = rules_for(next, input, &r);
            let holds = up.iter().all(|o| o.holds);
            rationale.extend(up);
            if holds {
                return (next, rationale);
            }
        }
    }
    (current, rationale)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SILVER: TierRule = TierRule {
        min_cases_for_promotion: 10,
        score_threshold: 0.7,
    };
    const GOLD: TierRule = TierRule {
        min_cases_for_promotion: 20,
        score_threshold: 0.9,
    };

    fn rule_of(t: Tier) -> Option<TierRule> {
        match t {
            Tier::Silver => Some(SILVER),
            Tier::Gold => Some(GOLD),
            Tier::Bronze => None,
        }
    }

    fn good() -> RuleInput {
        RuleInput {
            active_held_out: 10,
            scored_held_out: 10,
            lower_bound: Some(0.7),
            block_failures: 0,
        }
    }

    #[test]
    fn enough_cases_at_exactly_the_minimum_holds_and_one_below_fails() {
        assert!(enough_held_out_cases(Tier::Silver, &good(), &SILVER).holds);
        let one_below = RuleInput {
            active_held_out: 9,
            scored_held_out: 9,
            ..good()
        };
        assert!(!enough_held_out_cases(Tier::Silver, &one_below, &SILVER).holds);
    }

    #[test]
    fn every_case_scored_holds_only_when_all_are_and_fails_on_an_empty_window() {
        assert!(every_case_scored_in_window(Tier::Silver, &good()).holds);
        let missing_one = RuleInput {
            scored_held_out: 9,
            ..good()
        };
        assert!(!every_case_scored_in_window(Tier::Silver, &missing_one).holds);
        let empty = RuleInput {
            active_held_out: 0,
            scored_held_out: 0,
            lower_bound: None,
            block_failures: 0,
        };
        assert!(!every_case_scored_in_window(Tier::Silver, &empty).holds);
    }

    #[test]
    fn lower_bound_exactly_at_threshold_holds_and_just_below_fails() {
        assert!(lower_bound_meets_threshold(Tier::Silver, &good(), &SILVER).holds);
        let below = RuleInput {
            lower_bound: Some(0.7 - 1e-9),
            ..good()
        };
        assert!(!lower_bound_meets_threshold(Tier::Silver, &below, &SILVER).holds);
        let none = RuleInput {
            lower_bound: None,
            ..good()
        };
        assert!(!lower_bound_meets_threshold(Tier::Silver, &none, &SILVER).holds);
    }

    #[test]
    fn one_block_failure_fails_and_zero_holds() {
        assert!(no_block_failure_in_window(Tier::Silver, &good()).holds);
        let one = RuleInput {
            block_failures: 1,
            ..good()
        };
        assert!(!no_block_failure_in_window(Tier::Silver, &one).holds);
    }

    #[test]
    fn bronze_with_silver_rules_met_is_recommended_silver_only() {
        let (t, why) = recommend(Tier::Bronze, &good(), rule_of);
        assert_eq!(t, Tier::Silver);
        assert_eq!(why.len(), 4);
        assert!(why.iter().all(|o| o.rule.starts_with("silver.")));
    }

    #[test]
    fn bronze_one_short_stays_bronze() {
        let input = RuleInput {
            lower_bound: Some(0.69),
            ..good()
        };
        assert_eq!(recommend(Tier::Bronze, &input, rule_of).0, Tier::Bronze);
    }

    #[test]
    fn silver_meeting_gold_is_recommended_gold() {
        let input = RuleInput {
            active_held_out: 20,
            scored_held_out: 20,
            lower_bound: Some(0.9),
            block_failures: 0,
        };
        let (t, why) = recommend(Tier::Silver, &input, rule_of);
        assert_eq!(t, Tier::Gold);
        assert_eq!(why.len(), 8);
    }

    #[test]
    fn silver_falling_below_its_rules_is_recommended_bronze() {
        let input = RuleInput {
            block_failures: 1,
            ..good()
        };
        let (t, why) = recommend(Tier::Silver, &input, rule_of);
        assert_eq!(t, Tier::Bronze);
        assert!(why
            .iter()
            .any(|o| o.rule == "silver.no_block_failure_in_window" && !o.holds));
    }

    #[test]
    fn gold_falling_below_its_rules_is_recommended_silver() {
        let (t, _) = recommend(Tier::Gold, &good(), rule_of);
        assert_eq!(t, Tier::Silver);
    }

    #[test]
    fn empty_window_recommends_no_promotion_and_demotes_a_promoted_class() {
        let empty = RuleInput {
            active_held_out: 10,
            scored_held_out: 0,
            lower_bound: None,
            block_failures: 0,
        };
        assert_eq!(recommend(Tier::Bronze, &empty, rule_of).0, Tier::Bronze);
        assert_eq!(recommend(Tier::Silver, &empty, rule_of).0, Tier::Bronze);
    }
}
