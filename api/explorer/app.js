// The Evidence Ledger explorer: pages, routing and what each page checks.
//
// Nothing is shown as verified unless this browser verified it. Every
// check is an element with a stable id and `data-status`:
//   pending  not finished yet;
//   ok       checked in this browser, and it passed;
//   fail     checked in this browser, and it failed (also listed, naming
//            what failed, in the red #alarm box at the top);
//   none     not checked: no key pinned, the head not verified, or what
//            the check rests on cannot be proven here (a check that only
//            finds the server's answers consistent with each other is
//            "none", never "ok", unless the head it rests on is verified).
// `#page[data-status]` is the page as a whole: pending until every check
// has finished, then fail if any failed, none if any was not checked (or
// no key is pinned), ok otherwise.
//
// Routes (hash-based, so the server serves only fixed files):
//   #/                     the log head
//   #/entries[?start=N]    entries, 50 a page
//   #/entries/N            one entry
//   #/find/TEXT            an index, a leaf hash or an envelope id
//   #/classes              task classes
//   #/classes/NAME         one task class
//   #/settings             the pinned key, the read token, the trusted head
//
// Everything the server sends is put in the page as text (textContent),
// never as markup, and never into a class name (tiers map to a fixed set).

import { ApiError, checkServedEntry, fetchEntry, getJson, getText, pinnedKey, proveEntry, settings, verifyHead } from "./api.js";
import { decodeLeaf, evidenceScores, keyId, verifyEnvelope } from "./envelope.js";
import {
  CheckFailed, b64decode, b64encode, chainHash, equalBytes, leafHash, parseHash, parseProof, toHex, verifyConsistency, verifyInclusion,
} from "./merkle.js";
import { openCheckpoint, parseVerifierKey } from "./note.js";
import { chart } from "./plot.js";
import { bootstrapSeed, compareStats, sameBits, scoreStats } from "./stats.js";

const main = document.getElementById("main");
const page = document.getElementById("page");
const PAGE_SIZE = 50;
// How far back an entry page looks for the enrolment of its signer.
const ENROLMENT_SCAN_LIMIT = 5000;

// --- DOM helpers ---------------------------------------------------------------

/** An element: h("p", {class: "x", id: "y", dataset: {status: "ok"}}, "text", child, …). */
function h(tag, props = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null) continue;
    if (k === "class") e.className = v;
    else if (k === "dataset") Object.assign(e.dataset, v);
    else if (k === "text") e.textContent = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** Replaces `parent`'s children, leaving out null and false ones. */
function fill(parent, ...children) {
  parent.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

const short = (hex) => (typeof hex === "string" && hex.length > 16 ? `${hex.slice(0, 12)}…` : String(hex));
const link = (href, text, props = {}) => h("a", { href, ...props }, text);
const entryLink = (i) => link(`#/entries/${i}`, `#${i}`);

function kv(rows) {
  return h("dl", { class: "kv" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function microsAgo(micros) {
  const s = Math.round((Date.now() * 1000 - micros) / 1e6);
  if (s < 0) return `${-s} s in the future`;
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  if (s < 172800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
}

function isoOfMicros(m) {
  if (!Number.isSafeInteger(m)) return "?";
  const d = new Date(Math.floor(m / 1000));
  return Number.isNaN(d.getTime()) ? "?" : d.toISOString();
}

/** A served value for a message: as JSON, cut short. */
function quote(v) {
  let t;
  try {
    t = JSON.stringify(v) ?? String(v);
  } catch {
    t = String(v);
  }
  return t.length > 80 ? `${t.slice(0, 77)}…` : t;
}

/** A log index as the server must send it: a JSON number that is a safe non-negative integer. */
const isIndex = (i) => typeof i === "number" && Number.isSafeInteger(i) && i >= 0;

/** The CSS class of a tier: one of a fixed set, whatever the server sends. */
const TIER_CLASSES = { bronze: "tier tier-bronze", silver: "tier tier-silver", gold: "tier tier-gold" };
const tierClass = (t) => (typeof t === "string" && Object.hasOwn(TIER_CLASSES, t) ? TIER_CLASSES[t] : "tier tier-unknown");

// --- the alarm and the checks ---------------------------------------------------

let generation = 0; // bumped on every route change; stale async work stops
let pending = 0;
let failed = 0;
let unchecked = false;

function resetPageState() {
  pending = 0;
  failed = 0;
  unchecked = false;
  const list = document.getElementById("alarm-list");
  list.replaceChildren();
  const alarm = document.getElementById("alarm");
  alarm.hidden = true;
  alarm.dataset.status = "ok";
  page.dataset.status = "pending";
}

function raise(message) {
  const alarm = document.getElementById("alarm");
  alarm.hidden = false;
  alarm.dataset.status = "fail";
  document.getElementById("alarm-list").append(h("li", {}, message));
}

function updatePageStatus() {
  if (pending > 0) page.dataset.status = "pending";
  else if (failed > 0) page.dataset.status = "fail";
  else if (unchecked || !settings.keyText()) page.dataset.status = "none";
  else page.dataset.status = "ok";
}

/**
 * A check element `id` titled `title`, pending until `set` is called.
 * `gen` ties it to the page that made it: a result for a page already
 * left is dropped.
 */
function check(id, title, gen = generation) {
  const badge = h("span", { class: "badge" });
  const msg = h("span", { class: "msg" }, "checking…");
  const el = h("div", { class: "check", id, dataset: { status: "pending" } }, badge, h("strong", {}, title), " ", msg);
  let done = gen !== generation; // a check made for a page already left counts for nothing
  if (!done) pending++;
  return {
    el,
    set(status, message) {
      if (gen !== generation) return;
      el.dataset.status = status;
      badge.textContent = { ok: "verified", fail: "FAILED", none: "not checked", pending: "…" }[status] ?? status;
      msg.textContent = message;
      if (!done) {
        done = true;
        pending--;
      }
      if (status === "fail") {
        failed++;
        raise(message);
      }
      if (status === "none") unchecked = true;
      updatePageStatus();
    },
    /**
     * Runs `fn`; its result message means ok (a `notChecked(message)` result
     * means none), a CheckFailed means fail. With `unverified` (why the head
     * this rests on is not verified), a pass is only "none": the answers
     * agree with each other, which proves nothing without a verified head.
     */
    async run(fn, unverified = null) {
      try {
        const result = await fn();
        if (result instanceof NotChecked) this.set("none", result.message);
        else if (unverified) this.set("none", `${unverified} (as served: ${result})`);
        else this.set("ok", result);
      } catch (e) {
        if (e instanceof CheckFailed) this.set("fail", e.message);
        else if (e instanceof ApiError) this.set("fail", `could not be checked: ${e.message}`);
        else {
          console.error(e);
          this.set("fail", `could not be checked: ${e.message}`);
        }
      }
    },
  };
}

/** A check's result that is not a pass: what it found, and why that is not a verification. */
class NotChecked {
  constructor(message) {
    this.message = message;
  }
}

/** Sets `c` from a comparison of served values: fail, or ok only when the head is verified. */
function selfCheck(c, unverified, ok, okMessage, failMessage) {
  if (!ok) c.set("fail", failMessage);
  else if (unverified) c.set("none", `${unverified} (as served: ${okMessage})`);
  else c.set("ok", okMessage);
}

// --- the verified head ------------------------------------------------------------

/**
 * Why nothing can be verified against `hd`, or null when a key is pinned
 * and the head is verified (signed by it and not inconsistent with the
 * trusted head).
 */
function unverifiedReason(hd) {
  if (!settings.keyText()) return "not checked: no verifier key is pinned";
  if (hd.checkpoint) return null;
  if (hd.signed) return "not checked: the head is not verified (it is not consistent with the head this browser trusted)";
  return "not checked: the head is not verified";
}

let headState = null; // the result of verifyHead, and when (ms)
const HEAD_MAX_AGE_MS = 60_000;

/** The verified head: fetched and checked again after a minute, or when `force`d. */
async function ensureHead(force = false) {
  if (!force && headState && Date.now() - headState.at < HEAD_MAX_AGE_MS) return headState;
  headState = { ...(await verifyHead()), at: Date.now() };
  return headState;
}

/** The head bar shown on every page: size, root, signature and consistency. */
function headBar(hd, gen) {
  const bar = document.getElementById("headbar");
  const cp = hd.signed;
  const size = cp ? cp.size : hd.served?.size;
  const root = cp ? cp.rootHex : hd.served ? toHex(hd.served.root) : "?";
  const sig = check("check-head-signature", "Checkpoint signature:", gen);
  const cons = check("check-head-consistency", "Consistency with this browser's trusted head:", gen);
  bar.replaceChildren(
    h("div", { class: "headline" },
      h("span", {}, "Log head: size ", h("b", { id: "head-size" }, String(size ?? "?"))),
      h("span", {}, " root ", h("code", { id: "head-root", title: root }, short(root))),
      hd.checkpoint ? null : h("span", { class: "unverified" }, cp ? " (signed, but NOT verified: not consistent with the trusted head)" : " (as served, not verified)"),
      " ",
      h("button", { id: "head-refresh", type: "button", onclick: () => route(true) }, "Refresh")),
    sig.el,
    cons.el);
  sig.set(hd.signature.status, hd.signature.message);
  cons.set(hd.consistency.status, hd.consistency.message);
}

function keyBanner() {
  const b = document.getElementById("key-banner");
  const text = settings.keyText();
  if (!text) {
    b.dataset.status = "none";
    b.replaceChildren(
      h("strong", {}, "No verifier key is pinned. "),
      "Nothing on these pages is verified: everything is shown as the server sent it. ",
      link("#/settings", "Pin the log's verifier key"),
      " (get it from the log's operator, not from the server).");
  } else {
    b.dataset.status = "ok";
    b.replaceChildren("Pinned verifier key: ", h("code", { id: "pinned-key-text" }, text), " ", link("#/settings", "change"));
  }
}

// --- routing ----------------------------------------------------------------------

async function route(refreshHead = false) {
  const gen = ++generation;
  resetPageState();
  pending++; // the page itself, until its function has returned
  keyBanner();
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, query] = hash.split("?");
  const params = new URLSearchParams(query ?? "");
  let parts;
  try {
    parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  } catch {
    parts = ["?"];
  }
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("current", a.getAttribute("href").split("/")[1] === (parts[0] ?? ""));
  }
  fill(main, h("p", { class: "loading" }, "loading…"));
  const alive = () => gen === generation;
  try {
    if (parts[0] === "settings") {
      await settingsPage(alive);
      if (alive()) {
        pending--;
        updatePageStatus();
      }
      return;
    }
    const hd = await ensureHead(refreshHead);
    if (!alive()) return;
    headBar(hd, gen);
    if (parts.length === 0) await headPage(hd, alive, gen);
    else if (parts[0] === "entries" && parts.length === 1) await entriesPage(hd, indexOfText(params.get("start")), alive, gen);
    else if (parts[0] === "entries") await entryPage(hd, indexOfText(parts[1]), null, alive, gen);
    else if (parts[0] === "find") await findPage(hd, parts[1] ?? "", alive, gen);
    else if (parts[0] === "classes" && parts.length === 1) await classesPage(alive);
    else if (parts[0] === "classes") await classPage(hd, parts[1], alive, gen);
    else fill(main, h("p", {}, "No such page."));
  } catch (e) {
    if (!alive()) return;
    if (!(e instanceof CheckFailed)) console.error(e);
    let message = !(e instanceof ApiError)
      ? e.message
      : e.status
        ? `the server refused a request: ${e.message}`
        : `could not be checked: ${e.message}`;
    if (e instanceof ApiError && e.code === "read_token_required") message += " (set the read token on the Key & token page)";
    fill(main, h("p", { class: "error", id: "page-error" },
      e instanceof ApiError ? (e.status ? `The server answered: ${e.message}` : `The request failed: ${e.message}`) : `Error: ${e.message}`));
    // Checks the page could not finish are not left pending.
    for (const el of document.querySelectorAll('.check[data-status="pending"]')) {
      el.dataset.status = "fail";
      el.querySelector(".msg").textContent = `not finished: ${message}`;
    }
    pending = 0;
    failed++;
    raise(message);
    updatePageStatus();
    return;
  }
  if (alive()) {
    pending--;
    updatePageStatus();
  }
}

/** A decimal log index typed in a route or search (no sign, no leading zeros, safe), or null. */
function indexOfText(text) {
  if (typeof text !== "string" || !/^(0|[1-9][0-9]*)$/.test(text)) return null;
  const i = Number(text);
  return Number.isSafeInteger(i) ? i : null;
}

// --- the head page -------------------------------------------------------------------

async function headPage(hd, alive, gen) {
  const cp = hd.signed; // shown; checks use hd.checkpoint, the verified head
  const served = hd.served;
  const age = check("check-head-age", "Age of the head:", gen);
  fill(main,
    h("h1", {}, "Log head"),
    kv([
      ["origin", h("code", {}, cp?.origin ?? served?.origin ?? "?")],
      ["tree size", h("span", { id: "head-detail-size" }, String(cp?.size ?? served?.size ?? "?"))],
      ["root (hex)", h("code", { id: "head-detail-root" }, cp?.rootHex ?? (served ? toHex(served.root) : "?"))],
      ["root (base64, as signed)", h("code", {}, cp ? b64encode(cp.root) : served ? b64encode(served.root) : "?")],
      ["verified", h("span", { id: "head-verified" }, !cp
        ? "no"
        : !hd.checkpoint
          ? "no: signed by the pinned key, but NOT consistent with the head this browser trusted (nothing is checked against it)"
          : "yes: signed by the pinned key, checked in this browser")],
    ]),
    age.el,
    h("h2", {}, "The signed note"),
    h("pre", { class: "note", id: "head-note" }, hd.note),
    h("h2", {}, "What this page does not check"),
    h("ul", { class: "unchecked" },
      h("li", {}, "That the pinned key is the log's: it is the one thing trusted. Get it from the operator, not from this server."),
      h("li", {}, "That others see the same log: consistency is checked only against the last head this browser trusted. Witnesses and anchors kept elsewhere answer that (docs/WITNESS.md)."),
      h("li", {}, "That the server shows every entry: a server can withhold entries or answers; the log's shape is proven, its completeness only by a replay (ledger audit --projections)."),
      h("li", {}, "Witness cosignatures on the checkpoint are not checked here.")));
  const why = unverifiedReason(hd);
  if (why) {
    age.set("none", why);
    return;
  }
  const head = hd.checkpoint;
  if (head.size === 0) {
    age.set("none", "the log is empty");
    return;
  }
  await age.run(async () => {
    const last = head.size - 1;
    const e = await fetchEntry(last);
    if (!e.hashOk) throw new CheckFailed(`entry ${last}'s leaf does not hash to its stated leaf hash`);
    await proveEntry(last, e.leafHash, head);
    const d = decodeLeaf(e.leaf, `entry ${last}`);
    return `the last entry (${last}, ${d.kind}) was sequenced at ${d.sequencedAt} (${microsAgo(d.sequencedMicros)}, by the ledger's clock); its leaf and inclusion proof checked in this browser`;
  });
}

// --- the entry list ------------------------------------------------------------------

async function entriesPage(hd, start, alive, gen) {
  const size = hd.checkpoint?.size ?? hd.signed?.size ?? hd.served?.size ?? 0;
  if (!Number.isSafeInteger(start) || start < 0) start = Math.max(0, size - PAGE_SIZE);
  const answer = await getJson(`/v1/entries?start=${start}&limit=${PAGE_SIZE}`);
  if (!alive()) return;
  const unverified = unverifiedReason(hd);
  const c = check("check-list", "Leaves on this page:", gen);
  const rows = [];
  const bad = [];
  const listed = Array.isArray(answer?.entries) ? answer.entries : [];
  if (!Array.isArray(answer?.entries)) bad.push("the server's answer has no list of entries");
  if (listed.length > PAGE_SIZE) bad.push(`the server listed ${listed.length} entries where at most ${PAGE_SIZE} were asked for`);
  for (const [k, e] of listed.slice(0, PAGE_SIZE).entries()) {
    // The k-th entry of a list from `start` is entry start + k: anything else is not the log's order.
    const index = start + k;
    let status = "ok";
    let kind = e?.kind;
    let id = e?.id;
    let note = "";
    if (e?.index !== index) {
      status = "fail";
      note = `listed as entry ${quote(e?.index)} where entry ${index} belongs`;
    } else {
      try {
        const s = await checkServedEntry(e);
        const d = decodeLeaf(s.leaf, `entry ${index}`);
        kind = d.kind;
        id = d.id;
        if (!s.hashOk) {
          status = "fail";
          note = "its leaf does not hash to its stated leaf hash";
        } else if (d.kind !== e.kind || d.id !== e.id || d.signer !== e.signer || d.sequencedAt !== e.sequenced_at) {
          status = "fail";
          note = "the server's decoded fields differ from its leaf";
        }
      } catch (err) {
        status = "fail";
        note = err.message;
      }
    }
    if (status === "fail") bad.push(`entry ${index}: ${note}`);
    else if (unverified) status = "none";
    rows.push(h("tr", { id: `entry-row-${index}`, dataset: { status } },
      h("td", {}, entryLink(index)),
      h("td", {}, String(kind)),
      h("td", { class: "id" }, String(id)),
      h("td", {}, h("code", { title: String(e?.signer) }, short(e?.signer))),
      h("td", {}, String(e?.sequenced_at)),
      h("td", {}, h("code", { title: String(e?.leaf_hash) }, short(e?.leaf_hash))),
      h("td", { class: "cell-status" }, status === "fail" ? `✗ ${note}` : status === "none" ? "as served" : "✓")));
  }
  const shown = Math.min(listed.length, PAGE_SIZE);
  const next = isIndex(answer?.next) && answer.next > start ? answer.next : null;
  const nav = h("p", { class: "pager" },
    start > 0 ? link(`#/entries?start=${Math.max(0, start - PAGE_SIZE)}`, "← older", { id: "page-older" }) : null,
    ` entries ${start}–${start + shown - 1} of ${quote(answer?.tree_size)} (as served) `,
    next !== null ? link(`#/entries?start=${next}`, "newer →", { id: "page-newer" }) : null);
  fill(main,
    h("h1", {}, "Entries"),
    c.el,
    nav,
    h("table", { class: "entries", id: "entries-table" },
      h("thead", {}, h("tr", {}, ["index", "kind", "envelope id", "signer", "sequenced at", "leaf hash", "leaf"].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows)),
    h("p", { class: "hint" }, "Each row's leaf is re-hashed here and decoded from its own bytes, and the rows must be consecutive entries from the first one asked for. Its inclusion in the verified head is checked on the entry's page, not in this list."));
  if (bad.length > 0) c.set("fail", `${bad.length} of ${shown} listed entries do not check: ${bad[0]}`);
  else if (unverified) c.set("none", `${unverified} (as served: ${shown} consecutive leaves re-hash to their leaf hashes and decode)`);
  else c.set("ok", `${shown} consecutive entries from ${start}: leaves re-hashed to their leaf hashes and decoded in this browser (inclusion: open an entry)`);
}

// --- one entry -----------------------------------------------------------------------

// The enrolments seen so far, by key id: {index, roles, identity, publicKey, leafHash}.
// Taken from the listed entries as served: an enrolment is used only once
// its own leaf is proven included; revocations are shown as served.
const enrolments = new Map();
const revocations = new Map();
let scannedTo = 0;

function forgetScan() {
  enrolments.clear();
  revocations.clear();
  scannedTo = 0;
}

// The enrolment of `signer` at or before entry `upTo` (at it only for the
// genesis, whose operator enrols its own key in the entry it signs).
// Every listed entry must be the next one (index === scannedTo), and every
// page must list at least one: the scan ends after at most
// ENROLMENT_SCAN_LIMIT entries, or fails naming what the server got wrong.
// Scans run one at a time (a page left mid-scan may still be running one).
let scanQueue = Promise.resolve();
function findEnrolment(signer, upTo) {
  const run = scanQueue.then(() => scanForEnrolment(signer, upTo));
  scanQueue = run.catch(() => {});
  return run;
}

async function scanForEnrolment(signer, upTo) {
  if (enrolments.has(signer) && enrolments.get(signer).index <= upTo) return enrolments.get(signer);
  const limit = Math.min(upTo + 1, ENROLMENT_SCAN_LIMIT);
  while (scannedTo < limit) {
    const from = scannedTo;
    const page = await getJson(`/v1/entries?start=${from}&limit=${Math.min(1000, limit - from)}`);
    if (!Array.isArray(page?.entries)) throw new CheckFailed(`the server's list of entries from ${from} is not a list`);
    if (page.entries.length === 0) {
      throw new CheckFailed(`the server listed no entries from ${from}, below entry ${upTo} of the verified head, while this page looked for the signer's enrolment`);
    }
    for (const e of page.entries) {
      if (e?.index !== scannedTo) {
        throw new CheckFailed(`the server's list of entries from ${from} gives entry ${quote(e?.index)} where entry ${scannedTo} belongs`);
      }
      scannedTo = e.index + 1;
      let s;
      let d;
      try {
        s = await checkServedEntry(e);
        if (!s.hashOk) continue; // a bad leaf is not used for anything
        d = decodeLeaf(s.leaf);
      } catch {
        continue;
      }
      if (d.kind === "principal.enrolled" && typeof d.body.public_key === "string") {
        try {
          const pk = b64decode("public_key", d.body.public_key);
          const kid = await keyId(pk);
          if (!enrolments.has(kid)) {
            enrolments.set(kid, { index: e.index, roles: d.body.roles ?? [], identity: d.body.identity ?? "", publicKey: pk, leafHash: s.leafHash });
          }
        } catch {
          /* not a key: not an enrolment this page can use */
        }
      } else if (d.kind === "principal.revoked" && typeof d.body.key_id === "string" && !revocations.has(d.body.key_id)) {
        revocations.set(d.body.key_id, e.index);
      }
    }
  }
  const found = enrolments.get(signer);
  return found && found.index <= upTo ? found : null;
}

async function findPage(hd, text, alive, gen) {
  const q = text.trim();
  if (/^\d+$/.test(q)) {
    const i = indexOfText(q.replace(/^0+(?=[0-9])/, ""));
    if (i === null) {
      fill(main, h("p", { id: "find-none" }, "Not an entry index this page can count exactly: ", h("code", {}, q)));
      return;
    }
    // An index is the entry's own page (replaceState fires no hashchange).
    history.replaceState(null, "", `#/entries/${i}`);
    await entryPage(hd, i, null, alive, gen);
    return;
  }
  const size = hd.checkpoint?.size ?? hd.signed?.size ?? hd.served?.size;
  let index;
  let search;
  try {
    if (/^[0-9a-fA-F]{64}$/.test(q)) {
      search = { type: "leaf hash", value: q.toLowerCase() };
      const p = await getJson(`/v1/proofs/inclusion?leaf_hash=${search.value}&tree_size=${size}`);
      index = p?.index;
    } else {
      search = { type: "envelope id", value: q };
      const e = await getJson(`/v1/entries/by-id/${encodeURIComponent(q)}`);
      index = e?.index;
    }
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) {
      fill(main, h("h1", {}, "Not found"), h("p", { id: "find-none" }, `No entry has the ${/^[0-9a-fA-F]{64}$/.test(q) ? "leaf hash" : "envelope id"} `, h("code", {}, q), " in the server's answer. (A server can withhold an entry; a missing answer proves nothing.)"));
      return;
    }
    throw e;
  }
  if (!alive()) return;
  if (!isIndex(index)) {
    // An answer that names no entry: the page fails (route() shows it and raises the alarm).
    throw new CheckFailed(`the server answered the search for the ${search.type} ${search.value} with ${quote(index)}, which is not an entry index`);
  }
  await entryPage(hd, index, search, alive, gen);
}

async function entryPage(hd, index, search, alive, gen) {
  if (!isIndex(index)) {
    fill(main, h("p", {}, "Not an entry index."));
    return;
  }
  const served = await fetchEntry(index);
  if (!alive()) return;
  const { entry, leaf } = served;
  let decoded = null;
  let decodeError = null;
  try {
    decoded = decodeLeaf(leaf, `entry ${index}`);
  } catch (e) {
    decodeError = e.message;
  }
  const cHash = check("check-leaf-hash", "Leaf hash:", gen);
  const cDecoded = check("check-decoded", "Decoded from the leaf:", gen);
  const cIncl = check("check-inclusion", "Inclusion in the verified head:", gen);
  const cSig = check("check-signature", "Envelope signature:", gen);
  const cChain = check("check-chain", "Hash chain:", gen);
  const cSearch = search ? check("check-search", `Matches the ${search.type} searched:`, gen) : null;
  const roleCell = h("span", { id: "entry-role" }, "looking up…");
  const d = decoded;
  fill(main,
    h("h1", {}, `Entry ${index}`, d ? h("span", { class: "kind" }, ` ${d.kind}`) : null),
    h("p", { class: "pager" },
      index > 0 ? link(`#/entries/${index - 1}`, "← previous", { id: "entry-prev" }) : null, " ",
      link(`#/entries?start=${Math.max(0, index - (index % PAGE_SIZE))}`, "list"), " ",
      link(`#/entries/${index + 1}`, "next →", { id: "entry-next" })),
    cSearch ? cSearch.el : null,
    cHash.el, cDecoded.el, cIncl.el, cSig.el, cChain.el,
    h("h2", {}, "Decoded in this browser from the leaf bytes"),
    d
      ? kv([
          ["kind", h("span", { id: "entry-kind" }, d.kind)],
          ["envelope id", h("code", { id: "entry-id" }, d.id)],
          ["signer (key id)", h("code", { id: "entry-signer" }, d.signer)],
          ["signer's role", roleCell],
          ["issued at (the signer's claim)", d.issuedAt],
          ["sequenced at (the ledger's clock)", d.sequencedAt],
          ["leaf hash", h("code", { id: "entry-leaf-hash" }, toHex(served.leafHash))],
          ["chain hash (as served)", h("code", {}, entry.chain_hash)],
        ])
      : h("p", { class: "error" }, `The leaf does not decode: ${decodeError}`),
    d ? h("h3", {}, "Payload body") : null,
    d ? h("pre", { class: "payload", id: "entry-payload" }, JSON.stringify(d.body, null, 2)) : null,
    h("h2", {}, "What this page does not check"),
    h("ul", { class: "unchecked" },
      h("li", {}, "That the signer was allowed to write this kind of event, and every other rule of docs/EVENTS.md: the ledger checks them at append time; a replay (ledger audit --projections) checks them again."),
      h("li", {}, "The chain hash beyond this link: the chain is not covered by the signed root, only the Merkle tree is."),
      h("li", {}, "Co-signatures inside the payload (curators, maintainers).")));

  let cp = hd.checkpoint;
  if (cp && index >= cp.size) {
    // The entry is newer than the head verified so far: verify the current one.
    hd = await ensureHead(true);
    if (!alive()) return;
    headBar(hd, gen);
    cp = hd.checkpoint;
  }
  // Without a verified head, the checks below only find the server's answers
  // consistent with each other: "not checked", never "verified".
  const unverified = unverifiedReason(hd);

  selfCheck(cHash, unverified, served.hashOk,
    "SHA-256(0x00 ‖ leaf) recomputed in this browser equals the stated leaf hash",
    `entry ${index}: the leaf does not hash to its stated leaf hash ${quote(entry.leaf_hash)}`);

  if (!d) cDecoded.set("fail", `entry ${index}'s leaf is not a ledger event: ${decodeError}`);
  else {
    const diffs = [];
    if (entry.index !== index) diffs.push(`index ${entry.index}`);
    if (entry.kind !== d.kind) diffs.push(`kind ${entry.kind}`);
    if (entry.id !== d.id) diffs.push(`id ${entry.id}`);
    if (entry.signer !== d.signer) diffs.push(`signer ${entry.signer}`);
    if (entry.sequenced_at !== d.sequencedAt) diffs.push(`sequenced_at ${entry.sequenced_at}`);
    if (JSON.stringify(entry.payload) !== JSON.stringify(d.payload)) diffs.push("payload");
    selfCheck(cDecoded, unverified, diffs.length === 0,
      "envelope, payload, signer and sequencing time decoded here from the leaf; the server's decoded fields agree",
      `entry ${index}: the server's decoded fields differ from its own leaf (${diffs.join(", ")}); this page shows the leaf's`);
  }

  if (cSearch) {
    if (search.type === "leaf hash") {
      const ok = toHex(served.leafHash) === search.value;
      selfCheck(cSearch, unverified, ok, `this entry's leaf hashes to ${short(search.value)}`,
        `the server answered entry ${index} for leaf hash ${search.value}, but its leaf hashes to ${toHex(served.leafHash)}`);
    } else {
      const ok = d !== null && d.id === search.value;
      selfCheck(cSearch, unverified, ok, `this entry's leaf carries the envelope id ${search.value}`,
        `the server answered entry ${index} for envelope id ${search.value}, but its leaf carries ${d ? d.id : "no envelope"}`);
    }
  }

  if (unverified) {
    cIncl.set("none", unverified);
    cSig.set("none", unverified);
    roleCell.textContent = "not looked up (nothing is verified)";
  } else {
    await cIncl.run(async () => {
      if (index >= cp.size) throw new CheckFailed(`entry ${index} is not in the verified head of size ${cp.size} (refresh the head)`);
      const steps = await proveEntry(index, served.leafHash, cp);
      return `inclusion proof (${steps} steps) of entry ${index} reaches the verified root of size ${cp.size}, checked in this browser`;
    });
    if (!alive()) return;
    if (!d) cSig.set("fail", `entry ${index}: no envelope to check`);
    else {
      await cSig.run(async () => {
        const enr = await findEnrolment(d.signer, index);
        if (!enr) {
          roleCell.textContent = "unknown";
          if (index > ENROLMENT_SCAN_LIMIT) {
            throw new CheckFailed(`entry ${index}: the signer's enrolment is not among the first ${ENROLMENT_SCAN_LIMIT} entries this page scans`);
          }
          throw new CheckFailed(`entry ${index}: its signer ${short(d.signer)} is not enrolled by any entry up to it`);
        }
        const revoked = revocations.get(d.signer);
        const roles = Array.isArray(enr.roles) ? enr.roles.map(String).join(", ") : String(enr.roles);
        const showRole = (note) => roleCell.replaceChildren(
          `${roles} (${String(enr.identity)}), enrolled at `, entryLink(enr.index),
          revoked !== undefined ? ` — revoked at entry ${revoked} (as served, not proven)` : "", note);
        showRole(" (checking…)");
        try {
          await proveEntry(enr.index, enr.leafHash, cp, `enrolment entry ${enr.index}`);
        } catch (e) {
          showRole(" (NOT verified: that entry's inclusion proof failed)");
          forgetScan(); // what that scan found is not used again
          throw e;
        }
        showRole("");
        if (!(await verifyEnvelope(d, enr.publicKey))) {
          throw new CheckFailed(`entry ${index}: the envelope signature does not verify with the key enrolled at entry ${enr.index}`);
        }
        return `Ed25519 signature over the DSSE encoding verified in this browser with the key enrolled at entry ${enr.index} (whose leaf and inclusion were checked too)`;
      });
    }
  }
  if (!alive()) return;
  // One link, between two values the server states: never more than "as served" without a verified head.
  await cChain.run(async () => {
    const stated = parseHash(`entry ${index} chain_hash`, entry.chain_hash);
    let prev = new Uint8Array(32);
    let from = "the genesis value (32 zero bytes)";
    if (index > 0) {
      const p = await getJson(`/v1/entries/${index - 1}`);
      prev = parseHash(`entry ${index - 1} chain_hash`, p.chain_hash);
      from = `entry ${index - 1}'s chain hash as served`;
    }
    const got = await chainHash(prev, leaf);
    if (!equalBytes(got, stated)) throw new CheckFailed(`entry ${index}: the chain hash does not follow from ${from} and BLAKE3 of its leaf`);
    return `SHA-256(${from} ‖ BLAKE3(leaf)) recomputed in this browser equals the stated chain hash (the chain is not covered by the signed root)`;
  }, unverified);
}

// --- task classes --------------------------------------------------------------------

async function classesPage(alive) {
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
const LEDGER_SETTINGS = Object.freeze({ window_seconds: 30 * 24 * 3600, confidence: 0.95, resamples: 2000 });

/**
 * Throws `CheckFailed` unless the view states exactly the ledger's settings
 * and a window that ends at its stated time: checked before anything is
 * recomputed with them.
 */
function checkSettings(v) {
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
function checkRules(v, rec, recomputed, ruleRows) {
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

async function classPage(hd, name, alive, gen) {
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
      h("thead", {}, h("tr", {}, ["entry", "case", "score", "passed", "sequenced at", "leaf and inclusion"].map((t) => h("th", {}, t)))),
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
        h("td", {}, String(e?.index)), h("td", {}, String(e?.case_id)), h("td", {}, String(e?.score)), h("td", {}, "?"), h("td", {}, "?"), h("td", {}, "not checked")));
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
        h("td", {}, String(v.evidence[k]?.case_id ?? "?")),
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

// --- settings ------------------------------------------------------------------------

async function settingsPage(alive) {
  document.getElementById("headbar").replaceChildren();
  const keyInput = h("textarea", { id: "key-input", rows: "2", spellcheck: "false", placeholder: "name+hash+base64 key, e.g. localhost/evidence-ledger+7c1dab72+AZ51…" }, settings.keyText() ?? "");
  const keyMsg = h("p", { id: "key-message", class: "msg" });
  const tokenInput = h("input", { id: "token-input", type: "password", autocomplete: "off", placeholder: "read token (optional)" });
  tokenInput.value = settings.token() ?? "";
  const tokenMsg = h("p", { id: "token-message", class: "msg" }, settings.token() ? "A read token is set." : "No read token is set.");
  const serverKey = h("code", { id: "server-key" }, "…");
  const text = settings.keyText();
  const trusted = text ? settings.trustedNote(text) : null;
  fill(main,
    h("h1", {}, "Key and token"),
    h("h2", {}, "Pinned verifier key"),
    h("p", {}, "The log's C2SP note verifier key, ", h("code", {}, "name+keyhash+base64"), ". Every check on these pages trusts this key and nothing else; it is kept in this browser (localStorage)."),
    keyInput,
    h("p", {},
      h("button", { id: "key-pin", type: "button", onclick: async () => {
        try {
          const k = await parseVerifierKey(keyInput.value);
          settings.setKey(k.text);
          keyMsg.dataset.status = "ok";
          keyMsg.textContent = `Pinned ${k.text}.`;
          headState = null;
          keyBanner();
        } catch (e) {
          keyMsg.dataset.status = "fail";
          keyMsg.textContent = `Not pinned: ${e.message}`;
        }
      } }, "Pin this key"), " ",
      h("button", { id: "key-forget", type: "button", onclick: () => {
        settings.setKey(null);
        headState = null;
        keyMsg.dataset.status = "none";
        keyMsg.textContent = "No key is pinned: nothing is verified.";
        keyBanner();
      } }, "Unpin")),
    keyMsg,
    h("p", { class: "hint" }, "The server names its key as ", serverKey, ". Compare it with the key the operator gave you; a server that is not trusted can name any key, so pinning what it names proves only that its answers agree with each other."),
    h("h2", {}, "Read token"),
    h("p", {}, "When the server has a read token, send it as ", h("code", {}, "Authorization: Bearer …"), " (kept in this browser)."),
    tokenInput, " ",
    h("button", { id: "token-save", type: "button", onclick: () => {
      settings.setToken(tokenInput.value.trim() || null);
      headState = null;
      tokenMsg.textContent = settings.token() ? "A read token is set." : "No read token is set.";
    } }, "Save token"), " ",
    h("button", { id: "token-clear", type: "button", onclick: () => {
      settings.setToken(null);
      tokenInput.value = "";
      headState = null;
      tokenMsg.textContent = "No read token is set.";
    } }, "Clear"),
    tokenMsg,
    h("h2", {}, "Trusted head"),
    h("p", { id: "trusted-head" }, trusted ? `This browser trusts the checkpoint of size ${trusted.split("\n")[1]} for the pinned key; every new head must be proven consistent with it.` : "No head is trusted yet for the pinned key: the next one verified is trusted on first use."),
    h("button", { id: "trusted-forget", type: "button", onclick: () => {
      const k = settings.keyText();
      if (k) settings.setTrustedNote(k, null);
      headState = null;
      document.getElementById("trusted-head").textContent = "Forgotten: the next head verified is trusted on first use.";
    } }, "Forget the trusted head"));
  try {
    const named = (await getText("/v1/log/key")).trim();
    if (alive()) serverKey.textContent = named;
  } catch (e) {
    if (alive()) serverKey.textContent = `(unavailable: ${e.message})`;
  }
}

// --- start -----------------------------------------------------------------------------

document.getElementById("search-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const q = document.getElementById("search-input").value.trim();
  if (q) location.hash = `#/find/${encodeURIComponent(q)}`;
});
window.addEventListener("hashchange", () => route());
if (!window.isSecureContext || !crypto.subtle) {
  document.getElementById("main").replaceChildren(
    h("p", { class: "error", id: "page-error" }, "This page needs a secure context (https, or http on localhost) for WebCrypto; nothing can be verified here."));
  page.dataset.status = "fail";
} else {
  route();
}
