// What every page of the explorer shares: the element helpers, the checks
// and the page's status, the verified head, the head bar and the key
// banner. The pages (page-head.js, page-entries.js, page-classes.js with
// rules.js, page-settings.js) import it; app.js imports it and the pages,
// and does the routing and the start. It imports no page, and no page
// imports app.js.
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
// Everything the server sends is put in the page as text (textContent),
// never as markup, and never into a class name (tiers map to a fixed set).

import { ApiError, settings, verifyHead } from "./api.js";
import { CheckFailed, toHex } from "./merkle.js";

export const main = document.getElementById("main");
export const page = document.getElementById("page");


// --- DOM helpers ---------------------------------------------------------------

/** An element: h("p", {class: "x", id: "y", dataset: {status: "ok"}}, "text", child, …). */
export function h(tag, props = {}, ...children) {
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
export function fill(parent, ...children) {
  parent.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
}

export const short = (hex) => (typeof hex === "string" && hex.length > 16 ? `${hex.slice(0, 12)}…` : String(hex));
export const link = (href, text, props = {}) => h("a", { href, ...props }, text);
export const entryLink = (i) => link(`#/entries/${i}`, `#${i}`);

export function kv(rows) {
  return h("dl", { class: "kv" }, rows.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

export function microsAgo(micros) {
  const s = Math.round((Date.now() * 1000 - micros) / 1e6);
  if (s < 0) return `${-s} s in the future`;
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  if (s < 172800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
}

export function isoOfMicros(m) {
  if (!Number.isSafeInteger(m)) return "?";
  const d = new Date(Math.floor(m / 1000));
  return Number.isNaN(d.getTime()) ? "?" : d.toISOString();
}

/** A served value for a message: as JSON, cut short. */
export function quote(v) {
  let t;
  try {
    t = JSON.stringify(v) ?? String(v);
  } catch {
    t = String(v);
  }
  return t.length > 80 ? `${t.slice(0, 77)}…` : t;
}

/** A log index as the server must send it: a JSON number that is a safe non-negative integer. */
export const isIndex = (i) => typeof i === "number" && Number.isSafeInteger(i) && i >= 0;

/** The CSS class of a tier: one of a fixed set, whatever the server sends. */
const TIER_CLASSES = { bronze: "tier tier-bronze", silver: "tier tier-silver", gold: "tier tier-gold" };
export const tierClass = (t) => (typeof t === "string" && Object.hasOwn(TIER_CLASSES, t) ? TIER_CLASSES[t] : "tier tier-unknown");

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

// --- the page being shown (for app.js's routing) -------------------------------------

/** Starts a new page: what was pending for the page left counts for nothing. Returns its generation. */
export function startPage() {
  const gen = ++generation;
  resetPageState();
  pending++; // the page itself, until its function has returned
  return gen;
}

/** Whether `gen` is still the page shown. */
export const isCurrent = (gen) => gen === generation;

/** The page's function has returned: its own pending count is done. */
export function finishPage() {
  pending--;
  updatePageStatus();
}

/** The page's function threw: checks it could not finish fail, and `message` is raised. */
export function failPage(message) {
  // Checks the page could not finish are not left pending.
  for (const el of document.querySelectorAll('.check[data-status="pending"]')) {
    el.dataset.status = "fail";
    el.querySelector(".msg").textContent = `not finished: ${message}`;
  }
  pending = 0;
  failed++;
  raise(message);
  updatePageStatus();
}

/**
 * A check element `id` titled `title`, pending until `set` is called.
 * `gen` ties it to the page that made it: a result for a page already
 * left is dropped.
 */
export function check(id, title, gen = generation) {
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
export class NotChecked {
  constructor(message) {
    this.message = message;
  }
}

/** Sets `c` from a comparison of served values: fail, or ok only when the head is verified. */
export function selfCheck(c, unverified, ok, okMessage, failMessage) {
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
export function unverifiedReason(hd) {
  if (!settings.keyText()) return "not checked: no verifier key is pinned";
  if (hd.checkpoint) return null;
  if (hd.signed) return "not checked: the head is not verified (it is not consistent with the head this browser trusted)";
  return "not checked: the head is not verified";
}

let headState = null; // the result of verifyHead, and when (ms)
const HEAD_MAX_AGE_MS = 60_000;

/** The verified head: fetched and checked again after a minute, or when `force`d. */
export async function ensureHead(force = false) {
  if (!force && headState && Date.now() - headState.at < HEAD_MAX_AGE_MS) return headState;
  headState = { ...(await verifyHead()), at: Date.now() };
  return headState;
}

/** The head bar shown on every page: size, root, signature and consistency. */
export function headBar(hd, gen) {
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
      h("button", { id: "head-refresh", type: "button", onclick: () => refreshPage() }, "Refresh")),
    sig.el,
    cons.el);
  sig.set(hd.signature.status, hd.signature.message);
  cons.set(hd.consistency.status, hd.consistency.message);
}

export function keyBanner() {
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

/** Forgets the head verified so far: the next page fetches and checks it again. */
export function forgetHead() {
  headState = null;
}

/** What the head bar's Refresh button does (app.js sets it: the route again, with the head fetched anew). */
let refreshPage = () => {};
export function onRefresh(fn) {
  refreshPage = fn;
}

/** A decimal log index typed in a route or search (no sign, no leading zeros, safe), or null. */
export function indexOfText(text) {
  if (typeof text !== "string" || !/^(0|[1-9][0-9]*)$/.test(text)) return null;
  const i = Number(text);
  return Number.isSafeInteger(i) ? i : null;
}
