// The task classes: the list (#/classes) and one class (#/classes/NAME),
// its projection, evidence and statistics checked step by step, and the plots.

import { getJson, pinnedKey, settings } from "./api.js";
import { decodeLeaf, evidenceScores, isDigest } from "./envelope.js";
import { b64decode, CheckFailed, leafHash, parseProof, toHex, verifyConsistency, verifyInclusion } from "./merkle.js";
import { openCheckpoint } from "./note.js";
import { chart } from "./plot.js";
import { bootstrapSeed, compareStats, sameBits, scoreStats } from "./stats.js";
import { check, entryLink, fill, h, isIndex, isoOfMicros, kv, link, main, quote, short, tierClass, unverifiedReason } from "./ui.js";
import { checkRules, checkSettings, LEDGER_SETTINGS } from "./rules.js";

/**
 * A case as a score names it: from schema 3 its handle (docs/PRIVACY.md,
 * "Handles"), shown cut short with the whole of it as the title; an id in
 * clear from before the switch, whole.
 */
function caseCell(id) {
  return h("td", { class: "id" }, isDigest(id) ? h("code", { title: id }, short(id)) : String(id));
}

export async function classesPage(alive) {
  const list = await getJson("/v1/task-classes");
  if (!alive()) return;
  fill(main,
    h("h1", {}, "Task classes"),
    h("table", { class: "classes", id: "classes-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "task class"), h("th", {}, "tier (as listed)"))),
      h("tbody", {}, list.map((c) => h("tr", { id: `class-row-${c.task_class}` },
        h("td", {}, link(`#/classes/${encodeURIComponent(c.task_class)}`, c.task_class)),
        h("td", {}, c.tier))))),
    h("p", { class: "hint" }, "This list is as the server sent it. Open a class to verify its projection, evidence and statistics."));
}

const STAT_LABELS = {
  cases: "held-out cases",
  mean: "held-out mean",
  "mean_ci.low": "held-out mean's BCa lower bound",
  "mean_ci.high": "held-out mean's BCa upper bound",
  passed: "held-out passes",
  pass_rate: "held-out pass rate",
  "pass_rate_ci.low": "pass rate's Wilson lower bound",
  "pass_rate_ci.high": "pass rate's Wilson upper bound",
};

const show = (v) => (v === null || v === undefined ? "—" : String(v));
const fixed4 = (v) => (typeof v === "number" ? v.toFixed(4) : "—");

export async function classPage(hd, name, alive, gen) {
  const p = await getJson(`/v1/task-classes/${encodeURIComponent(name)}`);
  if (!alive()) return;
  // The served numbers at the top say whether the statistics check passed.
  const marks = [];
  const statsMark = () => {
    const m = h("span", { class: "stat-mark", dataset: { status: "pending" } }, "(checking…)");
    marks.push(m);
    return m;
  };
  // "verified in this browser" only when the statistics check passed.
  const markStats = (checkStatus) => {
    const status = checkStatus === "ok" ? "ok" : checkStatus === "fail" ? "fail" : "none";
    const text = { ok: "verified in this browser", fail: "does NOT follow from the evidence", none: "as served, not verified" }[status];
    for (const m of marks) {
      m.dataset.status = status;
      m.textContent = `(${text})`;
    }
  };
  const v = p.view;
  const rec = v.recommendation;
  const cSig = check("check-projection-signature", "Projection checkpoint:", gen);
  const cHead = check("check-projection-head", "Projection and the verified head:", gen);
  const cEvid = check("check-evidence", "Evidence entries:", gen);
  const cStats = check("check-stats", "Held-out statistics recomputed from the evidence:", gen);
  const cRules = check("check-rules", "Recommendation and its rules:", gen);
  const cPlot = check("check-plot", "Over time:", gen);
  const notChecked = (checks, why) => {
    for (const c of checks) c.set("none", why);
    markStats("none");
  };

  const statRows = h("tbody", {});
  const evidenceRows = h("tbody", {});
  const plots = h("div", { class: "plots", id: "plots" });
  const rationale = Array.isArray(rec?.rationale) ? rec.rationale : [];
  const ruleRows = rationale.map((o, i) => {
    const mark = h("td", { class: "rule-check", id: `rule-check-${i}`, dataset: { status: "none" } }, "as served");
    return {
      o,
      mark,
      row: h("tr", { id: `rule-${i}`, dataset: { holds: String(o?.holds) } },
        h("td", {}, h("code", {}, String(o?.rule))),
        h("td", { class: o?.holds === true ? "rule-pass" : "rule-fail" }, o?.holds === true ? "pass" : "fail"),
        h("td", {}, String(o?.detail)),
        mark),
    };
  });
  const failures = v.failures ?? {};
  const shared = v.shared_kernel_failures ?? {};
  const st = v.settings ?? {};
  fill(main,
    h("h1", {}, "Task class ", h("span", { id: "class-name" }, name)),
    kv([
      ["current tier", h("span", { id: "class-tier", class: tierClass(v.tier) }, String(v.tier))],
      ["recommended tier", h("span", { id: "class-recommended", class: tierClass(rec?.recommended_tier) }, String(rec?.recommended_tier))],
      ["requires human approval", String(rec?.requires_human_approval)],
      ["computed at", `${isoOfMicros(v.now_micros)} (tree size ${v.tree_size}), window from ${isoOfMicros(v.window_start_micros)} (${st.window_seconds / 86400} days)`],
      ["held-out mean", h("span", { id: "class-mean" }, `${fixed4(v.held_out?.mean)} [${fixed4(v.held_out?.mean_ci?.low)}, ${fixed4(v.held_out?.mean_ci?.high)}] (BCa, ${st.confidence * 100}%, ${st.resamples} resamples) `, statsMark())],
      ["held-out pass rate", h("span", { id: "class-pass-rate" }, `${fixed4(v.held_out?.pass_rate)} [${fixed4(v.held_out?.pass_rate_ci?.low)}, ${fixed4(v.held_out?.pass_rate_ci?.high)}] (Wilson), ${v.held_out?.passed} of ${v.held_out?.cases} `, statsMark())],
    ]),
    cSig.el, cHead.el, cEvid.el, cStats.el, cRules.el, cPlot.el,
    h("h2", {}, "Recommendation: ", String(rec?.current_tier), " → ", String(rec?.recommended_tier)),
    h("table", { class: "rules", id: "rules-table" },
      h("thead", {}, h("tr", {}, ["rule", "outcome", "detail", "checked here"].map((t) => h("th", {}, t)))),
      h("tbody", {}, ruleRows.map((r) => r.row))),
    h("p", { class: "hint" }, "A rule's outcome (pass/fail) is the ledger's decision, not a verification result. The recommendation is advisory: only two maintainers co-signing a tier.changed promote."),
    h("h2", {}, "Held-out mean and pass rate over time"),
    plots,
    h("h2", {}, "Held-out statistics: served and recomputed"),
    h("table", { class: "stats", id: "stats-table" },
      h("thead", {}, h("tr", {}, ["statistic", "served", "recomputed in this browser", ""].map((t) => h("th", {}, t)))),
      statRows),
    h("h2", {}, "Failures, cost and runs in the window (as served)"),
    kv([
      ["failures by severity", h("span", { id: "class-failures" }, `block ${show(failures.block)}, warn ${show(failures.warn)}, info ${show(failures.info)}`)],
      ["shared-kernel failures (never counted)", `block ${show(shared.block)}, warn ${show(shared.warn)}, info ${show(shared.info)}`],
      ["cost in the window", h("span", { id: "class-cost" }, v.cost_usd_in_window === null || v.cost_usd_in_window === undefined ? "—" : `$${v.cost_usd_in_window}`)],
      ["scores in the window", `${v.scores_in_window} (${v.shared_kernel_scores_in_window} shared-kernel)`],
      ["runs in the window", String(v.runs_in_window)],
      ["latest run", v.latest_run ? `${v.latest_run.run_id} (${v.latest_run.isolation}, started ${isoOfMicros(v.latest_run.started_micros)})` : "—"],
      ["active cases by curation class", Object.entries(v.active_cases_by_curation_class ?? {}).map(([k, n]) => `${k}: ${n}`).join(", ") || "—"],
      ["pending proposals", String(v.pending_proposals)],
      ["all cases (shown only)", `${v.all_cases?.cases} cases, mean ${fixed4(v.all_cases?.mean)}, pass rate ${fixed4(v.all_cases?.pass_rate)}`],
    ]),
    h("h2", {}, "Evidence: the held-out scores the statistics use"),
    h("table", { class: "evidence", id: "evidence-table" },
      h("thead", {}, h("tr", {}, ["entry", "case (handle)", "score", "passed", "sequenced at", "leaf and inclusion"].map((t) => h("th", {}, t)))),
      evidenceRows),
    h("h2", {}, "What this page does not check"),
    h("ul", { class: "unchecked" },
      h("li", {}, "That nothing was left out: a server can omit a newer, lower score, a block failure or a case and keep every cited entry real. Only a replay of the whole log (ledger audit --projections, the Python package's Gate) or the committed state (ledger state) proves completeness."),
      h("li", {}, "That each cited score is of a case that is held out and active, from a microvm run: the score's leaf does not say; the case and run entries do, and this page does not replay them."),
      h("li", {}, "The tier, failures, cost, runs, case counts and all-cases numbers: they are shown as served."),
      h("li", {}, "The rules' thresholds and case and failure counts: they come from the class's registration and case entries, which this page does not replay, so the recommendation is never shown as verified."),
      h("li", {}, "The view's time: it is the server's statement (an audit holds it to its own clock). The window must end at it and be the ledger's 30 days.")));

  const unverified = unverifiedReason(hd);
  if (unverified) {
    notChecked([cSig, cHead, cEvid, cStats, cRules, cPlot], unverified);
    for (const [k, e] of (Array.isArray(v.evidence) ? v.evidence : []).entries()) {
      evidenceRows.append(h("tr", { id: isIndex(e?.index) ? `evidence-${e.index}` : `evidence-at-${k}`, dataset: { status: "none" } },
        h("td", {}, String(e?.index)), caseCell(e?.case_id), h("td", {}, String(e?.score)), h("td", {}, "?"), h("td", {}, "?"), h("td", {}, "not checked")));
    }
    return;
  }
  const key = settings.keyText();
  const pinned = await pinnedKey();
  const head = hd.checkpoint;

  // 1. The projection's own checkpoint: signed, the tree it states, and the class asked for.
  let pcp = null;
  await cSig.run(async () => {
    pcp = await openCheckpoint(p.checkpoint, pinned, "projection checkpoint");
    if (p.tree_size !== pcp.size || p.root !== pcp.rootHex) {
      throw new CheckFailed(`the projection's tree size or root (${quote(p.tree_size)}, ${short(p.root)}) differs from its signed checkpoint (${pcp.size}, ${short(pcp.rootHex)})`);
    }
    if (v.tree_size !== pcp.size || v.root !== pcp.rootHex) {
      throw new CheckFailed(`the view was computed at another tree (${quote(v.tree_size)}, ${short(v.root)}) than its signed checkpoint (${pcp.size})`);
    }
    if (v.task_class !== name) {
      throw new CheckFailed(`the server answered with the view of task class ${quote(v.task_class)}, not of ${quote(name)}, the one asked for`);
    }
    return `signed by the pinned key at size ${pcp.size}; the projection and its view state that tree, and the view is of ${name}`;
  });
  if (!alive()) return;
  if (cSig.el.dataset.status !== "ok") {
    notChecked([cHead, cEvid, cStats, cRules, cPlot], "not checked: the projection's checkpoint is not verified");
    return;
  }

  // 2. The projection's tree and the verified head are one log.
  await cHead.run(async () => {
    if (pcp.size === head.size) {
      if (pcp.rootHex !== head.rootHex) throw new CheckFailed(`two different signed roots for size ${head.size}: the projection's and the verified head's`);
      return `computed at the verified head (size ${head.size})`;
    }
    const [a, b] = pcp.size < head.size ? [pcp, head] : [head, pcp];
    const answer = await getJson(`/v1/proofs/consistency?first=${a.size}&second=${b.size}`);
    await verifyConsistency(a.size, a.root, b.size, b.root, parseProof("consistency proof", answer?.proof));
    return pcp.size < head.size
      ? `computed at size ${pcp.size}, a prefix of the verified head (size ${head.size}): consistency proof checked in this browser`
      : `computed at size ${pcp.size}, which extends the verified head (size ${head.size}): consistency proof checked in this browser`;
  });
  if (!alive()) return;
  if (cHead.el.dataset.status !== "ok") {
    notChecked([cEvid, cStats, cRules, cPlot], "not checked: the projection's tree is not proven to be the verified head's log");
    return;
  }

  // 3. Every evidence entry: the one the view cites, its leaf re-hashed, included under the projection's root.
  const leaves = [];
  await cEvid.run(async () => {
    if (!Array.isArray(v.evidence) || !Array.isArray(p.evidence)) throw new CheckFailed("the view's or the answer's evidence is not a list");
    // Indices are JSON numbers that are safe integers: "17" or 1e300 is not an entry.
    const cited = [...v.evidence.map((e, k) => [`the view's evidence[${k}]`, e]), ...p.evidence.map((e, k) => [`the answer's evidence[${k}]`, e])];
    for (const [where, e] of cited) {
      if (!isIndex(e?.index)) throw new CheckFailed(`${where} names ${quote(e?.index)}, which is not an entry index`);
    }
    const claimed = v.evidence.map((e) => [e.index, e.leaf_hash]);
    const given = p.evidence.map((e) => [e.index, e.leaf_hash]);
    if (claimed.length !== given.length || claimed.some(([i, lh], k) => i !== given[k][0] || lh !== given[k][1])) {
      throw new CheckFailed("the evidence entries sent are not the ones the view says it used");
    }
    let firstFailure = null;
    for (const [k, e] of p.evidence.entries()) {
      let status = "ok";
      let note = "leaf re-hashed, inclusion verified";
      let decoded = null;
      try {
        const leaf = b64decode(`evidence entry ${e.index} leaf`, e.leaf);
        const lh = await leafHash(leaf);
        if (toHex(lh) !== e.leaf_hash) throw new CheckFailed(`evidence entry ${e.index}: the leaf does not hash to its leaf hash`);
        await verifyInclusion(e.index, pcp.size, lh, parseProof(`inclusion proof of evidence entry ${e.index}`, e.proof), pcp.root,
          `evidence entry ${e.index}`, `the projection's signed root (size ${pcp.size})`);
        leaves.push(leaf);
        decoded = decodeLeaf(leaf, `evidence entry ${e.index}`);
      } catch (err) {
        if (!(err instanceof CheckFailed)) throw err;
        status = "fail";
        note = err.message;
        firstFailure ??= err.message;
      }
      const sc = decoded?.body?.score;
      evidenceRows.append(h("tr", { id: `evidence-${e.index}`, dataset: { status } },
        h("td", {}, entryLink(e.index)),
        caseCell(v.evidence[k]?.case_id ?? "?"),
        h("td", {}, sc ? String(sc.score) : String(v.evidence[k]?.score)),
        h("td", {}, sc ? String(sc.passed) : "?"),
        h("td", {}, decoded ? decoded.sequencedAt : "?"),
        h("td", { class: "cell-status" }, status === "ok" ? `✓ ${note}` : `✗ ${note}`)));
    }
    if (firstFailure) throw new CheckFailed(firstFailure);
    return `${p.evidence.length} evidence leaves re-hashed and proven included under the projection's signed root (size ${pcp.size}) in this browser`;
  });
  if (!alive()) return;
  if (cEvid.el.dataset.status !== "ok") {
    notChecked([cStats, cRules, cPlot], "not checked: the evidence does not verify");
    return;
  }

  // 4. The held-out statistics from exactly those leaves, with the ledger's settings (checked first).
  let recomputed = null;
  let rows = [];
  await cStats.run(async () => {
    checkSettings(v);
    const cited = v.evidence.map((e, i) => ({ index: e.index, leaf: leaves[i], caseId: e.case_id }));
    const ev = evidenceScores(name, cited, v.window_start_micros);
    rows = ev.rows;
    for (const [i, r] of ev.rows.entries()) {
      if (!sameBits(v.evidence[i].score, r.score)) {
        throw new CheckFailed(`evidence entry ${r.index}: the view states score ${quote(v.evidence[i].score)}, its leaf says ${r.score}`);
      }
    }
    const got = scoreStats(ev.scores, ev.passed, LEDGER_SETTINGS, bootstrapSeed(name));
    const cmp = compareStats(v.held_out ?? {}, got);
    for (const r of cmp) {
      statRows.append(h("tr", { id: `stat-${r.field.replace(".", "-")}`, dataset: { status: r.status } },
        h("td", {}, STAT_LABELS[r.field]),
        h("td", {}, show(r.served)),
        h("td", {}, show(r.recomputed)),
        h("td", { class: "cell-status" }, r.status === "ok" ? `✓ ${r.note}` : "✗ differs")));
    }
    const bad = cmp.find((r) => r.status === "fail");
    if (bad) throw new CheckFailed(`${STAT_LABELS[bad.field]} recomputed ${show(bad.recomputed)} ≠ served ${show(bad.served)}`);
    recomputed = got;
    const approx = cmp.filter((r) => r.note !== "bit for bit").length;
    return approx === 0
      ? `count, mean, BCa interval (SplitMix64, BLAKE3 seed), passes, pass rate and Wilson interval recomputed in this browser from the ${ev.scores.length} evidence leaves, with the ledger's settings and window: equal to the served ones bit for bit`
      : `recomputed in this browser from the ${ev.scores.length} evidence leaves, with the ledger's settings and window: equal, ${approx} interval endpoint(s) only to 1e-12 (libm rounding; see the table)`;
  });
  if (!alive()) return;
  const statsOk = cStats.el.dataset.status === "ok" && recomputed !== null;
  markStats(statsOk ? "ok" : cStats.el.dataset.status);
  if (!statsOk) {
    notChecked([cRules, cPlot], "not checked: the statistics did not verify");
    return;
  }

  // 5. The recommendation: the ledger's rules, their details, the evidence's numbers. Never more than "not checked".
  await cRules.run(async () => checkRules(v, rec, recomputed, ruleRows));
  if (!alive()) return;

  // 6. Over time: the statistics over the cited scores as they arrived, and what this browser verified before.
  const allOk = [cSig, cHead, cEvid, cStats].every((c) => c.el.dataset.status === "ok");
  await cPlot.run(async () => {
    await new Promise((r) => setTimeout(r, 0)); // let the page paint first
    const hist = recordHistory(key, name, v, recomputed, allOk);
    const series = overTime(name, rows);
    if (!alive()) return "";
    drawPlots(plots, series, hist);
    return `${series.length} points recomputed in this browser from the cited scores in log order (the last one is the verified statistic), and ${hist.length} head(s) verified in this browser`;
  });
}

/** Keeps the verified held-out numbers of this tree size for the "verified here" series. */
function recordHistory(key, name, v, s, ok) {
  let hist = settings.history(key, name);
  if (ok && s.cases > 0) {
    hist = hist.filter((p) => p.size !== v.tree_size);
    hist.push({
      size: v.tree_size, at: v.now_micros, mean: s.mean, low: s.mean_ci.low, high: s.mean_ci.high,
      rate: s.pass_rate, rlow: s.pass_rate_ci.low, rhigh: s.pass_rate_ci.high,
    });
    hist.sort((a, b) => a.size - b.size);
    hist = hist.slice(-100);
    settings.setHistory(key, name, hist);
  }
  return hist;
}

/**
 * The held-out statistics over the first k cited scores in log order, for
 * up to 16 values of k ending with all of them: how the numbers built up as
 * the scores the view counts arrived. Scores a case had before its latest
 * are not cited, so this is not a history of what the server showed.
 */
function overTime(name, rows) {
  const ordered = [...rows].sort((a, b) => a.index - b.index);
  const n = ordered.length;
  if (n === 0) return [];
  const ks = new Set();
  const steps = Math.min(16, n);
  for (let i = 1; i <= steps; i++) ks.add(Math.max(1, Math.round((i * n) / steps)));
  const seed = bootstrapSeed(name);
  return [...ks].sort((a, b) => a - b).map((k) => {
    const prefix = ordered.slice(0, k);
    const s = scoreStats(prefix.map((r) => r.score), prefix.filter((r) => r.passed).length, LEDGER_SETTINGS, seed);
    return { k, index: prefix[k - 1].index, at: prefix[k - 1].sequencedAt, s };
  });
}

function drawPlots(container, series, hist) {
  const xLabel = (x) => `entry ${Math.round(x)}`;
  const evidenceMean = series.map((p) => ({
    x: p.index, y: p.s.mean, low: p.s.mean_ci?.low, high: p.s.mean_ci?.high,
    title: `first ${p.k} cited scores (to entry ${p.index}, ${p.at}): mean ${fixed4(p.s.mean)} [${fixed4(p.s.mean_ci?.low)}, ${fixed4(p.s.mean_ci?.high)}]`,
  }));
  const evidenceRate = series.map((p) => ({
    x: p.index, y: p.s.pass_rate, low: p.s.pass_rate_ci?.low, high: p.s.pass_rate_ci?.high,
    title: `first ${p.k} cited scores (to entry ${p.index}): pass rate ${fixed4(p.s.pass_rate)} [${fixed4(p.s.pass_rate_ci?.low)}, ${fixed4(p.s.pass_rate_ci?.high)}]`,
  }));
  const histMean = hist.map((p) => ({ x: p.size - 1, y: p.mean, low: p.low, high: p.high, title: `verified here at size ${p.size}: mean ${fixed4(p.mean)} [${fixed4(p.low)}, ${fixed4(p.high)}]` }));
  const histRate = hist.map((p) => ({ x: p.size - 1, y: p.rate, low: p.rlow, high: p.rhigh, title: `verified here at size ${p.size}: pass rate ${fixed4(p.rate)} [${fixed4(p.rlow)}, ${fixed4(p.rhigh)}]` }));
  container.replaceChildren(
    h("figure", { id: "plot-mean" },
      chart({ title: "Held-out mean, 95% BCa interval", xLabel, series: [
        { name: "as the cited scores arrived", cls: "series-evidence", points: evidenceMean },
        { name: "verified in this browser", cls: "series-history", points: histMean },
      ] })),
    h("figure", { id: "plot-pass-rate" },
      chart({ title: "Held-out pass rate, 95% Wilson interval", xLabel, series: [
        { name: "as the cited scores arrived", cls: "series-evidence", points: evidenceRate },
        { name: "verified in this browser", cls: "series-history", points: histRate },
      ] })),
    h("p", { class: "hint" },
      "x: log index. The first series is the statistics over the cited scores sequenced up to each point, recomputed in this browser; scores a case had before its latest one are not cited, so it is not the history of what the server showed. The second is each head at which this browser verified this class."));
}
