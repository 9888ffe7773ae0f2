// What the task-class page holds a view to: the ledger's settings and the
// recommendation's rules (projections/src/rules.rs), as the ledger writes them.

import { CheckFailed } from "./merkle.js";
import { NotChecked, quote } from "./ui.js";

/** `x` with `digits` decimals, the exact value rounded half to even (Rust's `{:.4}`). */
function rustFixed(x, digits) {
  if (!Number.isFinite(x)) return String(x);
  const negative = x < 0 || Object.is(x, -0);
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(x));
  const bits = view.getBigUint64(0);
  const biased = Number((bits >> 52n) & 0x7ffn);
  let m = bits & ((1n << 52n) - 1n);
  let e;
  if (biased === 0) e = -1074;
  else {
    m |= 1n << 52n;
    e = biased - 1075;
  }
  // |x| = m·2^e; scaled = |x|·10^digits, rounded half to even.
  const num = m * 10n ** BigInt(digits);
  let q;
  if (e >= 0) q = num << BigInt(e);
  else {
    const s = BigInt(-e);
    q = num >> s;
    const rem = num - (q << s);
    const half = 1n << (s - 1n);
    if (rem > half || (rem === half && (q & 1n) === 1n)) q += 1n;
  }
  const t = q.toString().padStart(digits + 1, "0");
  const out = digits > 0 ? `${t.slice(0, -digits)}.${t.slice(-digits)}` : t;
  return negative ? `-${out}` : out;
}

const BELOW = { gold: "silver", silver: "bronze", bronze: "bronze" };
const ABOVE = { bronze: "silver", silver: "gold" };
const TIERS = new Set(["bronze", "silver", "gold"]);

/** The four rules the ledger evaluates for a tier, in order (projections/src/rules.rs, `rules_for`). */
const RULES = ["enough_held_out_cases", "every_case_scored_in_window", "lower_bound_meets_threshold", "no_block_failure_in_window"];

/**
 * The settings every view must state: the ledger's, which are fixed
 * (projections/src/fold.rs `Settings::default`, the Python client's
 * `Settings()` that `ReplayRules` holds every view to).
 */
export const LEDGER_SETTINGS = Object.freeze({ window_seconds: 30 * 24 * 3600, confidence: 0.95, resamples: 2000 });

/**
 * Throws `CheckFailed` unless the view states exactly the ledger's settings
 * and a window that ends at its stated time: checked before anything is
 * recomputed with them.
 */
export function checkSettings(v) {
  const st = v.settings;
  const keys = st !== null && typeof st === "object" && !Array.isArray(st) ? Object.keys(st).sort() : null;
  const want = Object.keys(LEDGER_SETTINGS).sort();
  if (!keys || keys.length !== want.length || keys.some((k, i) => k !== want[i]) || want.some((k) => st[k] !== LEDGER_SETTINGS[k])) {
    throw new CheckFailed(`the view states the settings ${quote(st)}, not the ledger's (window_seconds ${LEDGER_SETTINGS.window_seconds}, confidence ${LEDGER_SETTINGS.confidence}, resamples ${LEDGER_SETTINGS.resamples})`);
  }
  if (!Number.isSafeInteger(v.now_micros)) throw new CheckFailed(`the view states no time it was computed for (now_micros ${quote(v.now_micros)})`);
  if (!Number.isSafeInteger(v.window_start_micros)) throw new CheckFailed(`the view states no window start (window_start_micros ${quote(v.window_start_micros)})`);
  const start = v.now_micros - LEDGER_SETTINGS.window_seconds * 1_000_000;
  if (v.window_start_micros !== start) {
    throw new CheckFailed(`the view's window starts at ${v.window_start_micros} µs, not at its time less the ledger's window of ${LEDGER_SETTINGS.window_seconds} s (${start} µs)`);
  }
}

/**
 * The rules the ledger evaluates for a class at tier `current` with these
 * outcomes, and the tier they give (rules.rs `recommend`): the current
 * tier's four rules unless it is bronze, and a failed one demotes and ends
 * the list; then the next tier's four, all holding to promote.
 */
function expectedRules(current, rationale) {
  const names = [];
  const allHold = (from) => rationale.length >= from + RULES.length && rationale.slice(from, from + RULES.length).every((o) => o?.holds === true);
  if (current !== "bronze") {
    names.push(...RULES.map((r) => `${current}.${r}`));
    if (!allHold(0)) return { names, tier: BELOW[current] };
  }
  const next = ABOVE[current];
  if (!next) return { names, tier: current };
  const from = names.length;
  names.push(...RULES.map((r) => `${next}.${r}`));
  return { names, tier: allHold(from) ? next : current };
}

const COUNT = "(0|[1-9][0-9]*)";
const DECIMAL = "(-?[0-9]+(?:\\.[0-9]+)?)"; // Rust's Display of an f64 threshold: no exponent

/**
 * A rule's detail parsed as the ledger writes it (rules.rs), or null:
 * {active, need} | {scored, active} | {bound (text) or null, threshold} | {block}.
 */
function parseDetail(tier, rule, detail) {
  if (typeof detail !== "string") return null;
  const m = (re) => new RegExp(`^${re}$`).exec(detail);
  const n = (t) => (Number.isSafeInteger(Number(t)) ? Number(t) : NaN);
  let r;
  switch (rule) {
    case "enough_held_out_cases":
      r = m(`${COUNT} active held-out cases; ${tier} needs at least ${COUNT}`);
      return r && { active: n(r[1]), need: n(r[2]) };
    case "every_case_scored_in_window":
      r = m(`${COUNT} of ${COUNT} active held-out cases have a microvm score in the window`);
      return r && { scored: n(r[1]), active: n(r[2]) };
    case "lower_bound_meets_threshold":
      r = m(`lower 95% bound (-?[0-9]+\\.[0-9]{4}); ${tier} needs at least ${DECIMAL}`);
      if (r) return { bound: r[1], threshold: Number(r[2]) };
      r = m(`no scores in the window; ${tier} needs a lower bound of at least ${DECIMAL}`);
      return r && { bound: null, threshold: Number(r[1]) };
    case "no_block_failure_in_window":
      r = m(`${COUNT} block-severity failures in the window`);
      return r && { block: n(r[1]) };
    default:
      return null;
  }
}

/**
 * Checks the recommendation against the rules and the recomputed held-out
 * statistics `recomputed` (which verified). Marks each rule's row; returns
 * a `NotChecked`: the outcomes rest on thresholds and counts (the class's
 * registration, its active cases, its block failures) this page cannot
 * prove, so the recommendation is never shown as verified. Throws
 * `CheckFailed` naming the first thing that contradicts the ledger's rules
 * or the evidence.
 */
export function checkRules(v, rec, recomputed, ruleRows) {
  if (!TIERS.has(rec.current_tier)) throw new CheckFailed(`the recommendation starts from ${quote(rec.current_tier)}, which is not a tier`);
  if (rec.current_tier !== v.tier) throw new CheckFailed(`the recommendation starts from ${rec.current_tier}, the view's tier is ${quote(v.tier)}`);
  if (rec.requires_human_approval !== true) throw new CheckFailed("the recommendation does not require human approval");
  const rationale = rec.rationale;
  if (!Array.isArray(rationale)) throw new CheckFailed("the recommendation lists no rules");
  const { names, tier } = expectedRules(rec.current_tier, rationale);
  const got = rationale.map((o) => o?.rule);
  if (got.length !== names.length || got.some((r, i) => r !== names[i])) {
    throw new CheckFailed(`the rules listed (${got.map(quote).join(", ") || "none"}) are not the ones the ledger evaluates for a ${rec.current_tier} class with these outcomes (${names.join(", ")})`);
  }
  if (tier !== rec.recommended_tier) throw new CheckFailed(`the rules' outcomes give ${tier}, the recommendation says ${quote(rec.recommended_tier)}`);
  const low = v.held_out?.mean_ci?.low ?? null; // equal to the recomputed one (the statistics verified)
  const wantBound = recomputed.mean_ci ? rustFixed(recomputed.mean_ci.low, 4) : null;
  const activeServed = v.active_cases_by_curation_class?.["held-out"] ?? 0;
  const blockServed = v.failures?.block;
  let bounds = 0;
  for (const { o, mark } of ruleRows) {
    const [t, rule] = o.rule.split(".");
    const fail = (why) => {
      mark.dataset.status = "fail";
      mark.textContent = `✗ ${why}`;
      return new CheckFailed(`${o.rule}: ${why}`);
    };
    if (typeof o.holds !== "boolean") throw fail(`its outcome ${quote(o.holds)} is not true or false`);
    const d = parseDetail(t, rule, o.detail);
    if (!d || Object.values(d).some((x) => Number.isNaN(x))) throw fail(`its detail ${quote(o.detail)} is not what the ledger writes for this rule`);
    let holds;
    mark.dataset.status = "none";
    mark.textContent = "as served (the outcome follows from the detail)";
    if (rule === "enough_held_out_cases") {
      if (d.active !== activeServed) throw fail(`counts ${d.active} active held-out cases, the view ${quote(activeServed)}`);
      holds = d.active >= d.need;
    } else if (rule === "every_case_scored_in_window") {
      if (d.scored !== recomputed.cases) throw fail(`counts ${d.scored} scored held-out cases, the evidence has ${recomputed.cases}`);
      if (d.active !== activeServed) throw fail(`counts ${d.active} active held-out cases, the view ${quote(activeServed)}`);
      holds = d.active > 0 && d.scored === d.active;
      mark.dataset.status = "ok";
      mark.textContent = "✓ scored cases = evidence (active cases as served)";
    } else if (rule === "lower_bound_meets_threshold") {
      if (d.bound !== wantBound) {
        throw fail(wantBound === null
          ? `states a lower bound of ${d.bound}, but no evidence is cited`
          : `states ${d.bound === null ? "no lower bound" : `a lower bound of ${d.bound}`}, the recomputed one is ${wantBound}`);
      }
      holds = low !== null && low >= d.threshold;
      if (wantBound !== null) {
        mark.dataset.status = "ok";
        mark.textContent = "✓ bound recomputed (threshold as served)";
        bounds++;
      }
    } else {
      if (d.block !== blockServed) throw fail(`counts ${d.block} block-severity failures, the view ${quote(blockServed)}`);
      holds = d.block === 0;
    }
    if (o.holds !== holds) throw fail(`its detail gives ${holds}, the outcome says ${o.holds}`);
  }
  return new NotChecked(`the rules are the ones the ledger evaluates for a ${rec.current_tier} class, each outcome follows from its detail, and the recommended tier (${rec.recommended_tier}) from the outcomes; ${bounds ? `the lower bound (${wantBound}) and ` : ""}the number of scored cases are recomputed from the evidence. Not verified: the thresholds and the counts of active cases and block failures come from the class's registration and entries, which this page does not replay`);
}
