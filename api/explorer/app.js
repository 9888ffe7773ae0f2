// The Evidence Ledger explorer: pages, routing and what each page checks.
//
// Nothing is shown as verified unless this browser verified it. Every
// check is an element with a stable id and `data-status`:
//   pending  not finished yet;
//   ok       checked in this browser, and it passed;
//   fail     checked in this browser, and it failed (also listed, naming
//            what failed, in the red #alarm box at the top);
//   none     not checked (no key pinned, or nothing to check against).
// `#page[data-status]` is the page as a whole: pending until every check
// has finished, then fail if any failed, none with no key, ok otherwise.
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
// never as markup.

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

const isoOfMicros = (m) => new Date(Math.floor(m / 1000)).toISOString();

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
    /** Runs `fn`; its result message means ok, a CheckFailed means fail. */
    async run(fn) {
      try {
        this.set("ok", await fn());
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

// --- the verified head ------------------------------------------------------------

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
  const cp = hd.checkpoint;
  const size = cp ? cp.size : hd.served?.size;
  const root = cp ? cp.rootHex : hd.served ? toHex(hd.served.root) : "?";
  const sig = check("check-head-signature", "Checkpoint signature:", gen);
  const cons = check("check-head-consistency", "Consistency with this browser's trusted head:", gen);
  bar.replaceChildren(
    h("div", { class: "headline" },
      h("span", {}, "Log head: size ", h("b", { id: "head-size" }, String(size ?? "?"))),
      h("span", {}, " root ", h("code", { id: "head-root", title: root }, short(root))),
      cp ? null : h("span", { class: "unverified" }, " (as served, not verified)"),
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
    else if (parts[0] === "entries" && parts.length === 1) await entriesPage(hd, Number(params.get("start") ?? NaN), alive, gen);
    else if (parts[0] === "entries") await entryPage(hd, Number(parts[1]), null, alive, gen);
    else if (parts[0] === "find") await findPage(hd, parts[1] ?? "", alive, gen);
    else if (parts[0] === "classes" && parts.length === 1) await classesPage(alive);
    else if (parts[0] === "classes") await classPage(hd, parts[1], alive, gen);
    else fill(main, h("p", {}, "No such page."));
  } catch (e) {
    if (!alive()) return;
    console.error(e);
    let message = e instanceof ApiError ? `the server refused a request: ${e.message}` : e.message;
    if (e instanceof ApiError && e.code === "read_token_required") message += " (set the read token on the Key & token page)";
    fill(main, h("p", { class: "error", id: "page-error" }, e instanceof ApiError ? `The server answered: ${e.message}` : `Error: ${e.message}`));
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

// --- the head page -------------------------------------------------------------------

async function headPage(hd, alive, gen) {
  const cp = hd.checkpoint;
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
        : hd.consistency.status === "fail"
          ? "signed by the pinned key, but NOT consistent with the head this browser trusted"
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
  if (!cp) {
    age.set("none", "not verified: no verified head");
    return;
  }
  if (cp.size === 0) {
    age.set("none", "the log is empty");
    return;
  }
  await age.run(async () => {
    const last = cp.size - 1;
    const e = await fetchEntry(last);
    if (!e.hashOk) throw new CheckFailed(`entry ${last}'s leaf does not hash to its stated leaf hash`);
    await proveEntry(last, e.leafHash, cp);
    const d = decodeLeaf(e.leaf, `entry ${last}`);
    return `the last entry (${last}, ${d.kind}) was sequenced at ${d.sequencedAt} (${microsAgo(d.sequencedMicros)}, by the ledger's clock); its leaf and inclusion proof checked in this browser`;
  });
}

// --- the entry list ------------------------------------------------------------------

async function entriesPage(hd, start, alive, gen) {
  const size = hd.checkpoint?.size ?? hd.served?.size ?? 0;
  if (!Number.isInteger(start) || start < 0) start = Math.max(0, size - PAGE_SIZE);
  const answer = await getJson(`/v1/entries?start=${start}&limit=${PAGE_SIZE}`);
  if (!alive()) return;
  const c = check("check-list", "Leaves on this page:", gen);
  const rows = [];
  const bad = [];
  for (const e of answer.entries) {
    let status = "ok";
    let kind = e.kind;
    let id = e.id;
    let note = "";
    try {
      const s = await checkServedEntry(e);
      const d = decodeLeaf(s.leaf, `entry ${e.index}`);
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
    if (status === "fail") bad.push(`entry ${e.index}: ${note}`);
    rows.push(h("tr", { id: `entry-row-${e.index}`, dataset: { status } },
      h("td", {}, entryLink(e.index)),
      h("td", {}, kind),
      h("td", { class: "id" }, id),
      h("td", {}, h("code", { title: e.signer }, short(e.signer))),
      h("td", {}, e.sequenced_at),
      h("td", {}, h("code", { title: e.leaf_hash }, short(e.leaf_hash))),
      h("td", { class: "cell-status" }, status === "ok" ? "✓" : `✗ ${note}`)));
  }
  const nav = h("p", { class: "pager" },
    start > 0 ? link(`#/entries?start=${Math.max(0, start - PAGE_SIZE)}`, "← older", { id: "page-older" }) : null,
    ` entries ${start}–${start + answer.entries.length - 1} of ${answer.tree_size} `,
    answer.next != null ? link(`#/entries?start=${answer.next}`, "newer →", { id: "page-newer" }) : null);
  fill(main,
    h("h1", {}, "Entries"),
    c.el,
    nav,
    h("table", { class: "entries", id: "entries-table" },
      h("thead", {}, h("tr", {}, ["index", "kind", "envelope id", "signer", "sequenced at", "leaf hash", "leaf"].map((t) => h("th", {}, t)))),
      h("tbody", {}, rows)),
    h("p", { class: "hint" }, "Each row's leaf is re-hashed here and decoded from its own bytes. Its inclusion in the verified head is checked on the entry's page, not in this list."));
  if (bad.length > 0) c.set("fail", `${bad.length} of ${answer.entries.length} leaves do not check: ${bad[0]}`);
  else c.set("ok", `${answer.entries.length} leaves re-hashed to their leaf hashes and decoded in this browser (inclusion: open an entry)`);
}

// --- one entry -----------------------------------------------------------------------

// The enrolments seen so far, by key id: {index, roles, identity, publicKey, leafHash}.
const enrolments = new Map();
const revocations = new Map();
let scannedTo = 0;

// The enrolment of `signer` at or before entry `upTo` (at it only for the
// genesis, whose operator enrols its own key in the entry it signs).
async function findEnrolment(signer, upTo) {
  if (enrolments.has(signer) && enrolments.get(signer).index <= upTo) return enrolments.get(signer);
  const limit = Math.min(upTo + 1, ENROLMENT_SCAN_LIMIT);
  while (scannedTo < limit) {
    const page = await getJson(`/v1/entries?start=${scannedTo}&limit=${Math.min(1000, limit - scannedTo)}`);
    if (page.entries.length === 0) break;
    for (const e of page.entries) {
      const s = await checkServedEntry(e);
      if (!s.hashOk) continue; // a bad leaf is not used for anything
      let d;
      try {
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
      scannedTo = e.index + 1;
    }
  }
  const found = enrolments.get(signer);
  return found && found.index <= upTo ? found : null;
}

async function findPage(hd, text, alive, gen) {
  const q = text.trim();
  if (/^\d+$/.test(q)) {
    // An index is the entry's own page (replaceState fires no hashchange).
    history.replaceState(null, "", `#/entries/${Number(q)}`);
    await entryPage(hd, Number(q), null, alive, gen);
    return;
  }
  const cp = hd.checkpoint;
  const size = cp?.size ?? hd.served?.size;
  let index;
  let search;
  try {
    if (/^[0-9a-fA-F]{64}$/.test(q)) {
      const p = await getJson(`/v1/proofs/inclusion?leaf_hash=${q.toLowerCase()}&tree_size=${size}`);
      index = p.index;
      search = { type: "leaf hash", value: q.toLowerCase() };
    } else {
      const e = await getJson(`/v1/entries/by-id/${encodeURIComponent(q)}`);
      index = e.index;
      search = { type: "envelope id", value: q };
    }
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) {
      fill(main, h("h1", {}, "Not found"), h("p", { id: "find-none" }, `No entry has the ${/^[0-9a-fA-F]{64}$/.test(q) ? "leaf hash" : "envelope id"} `, h("code", {}, q), " in the server's answer. (A server can withhold an entry; a missing answer proves nothing.)"));
      return;
    }
    throw e;
  }
  if (!alive()) return;
  await entryPage(hd, index, search, alive, gen);
}

async function entryPage(hd, index, search, alive, gen) {
  if (!Number.isInteger(index) || index < 0) {
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

  const key = settings.keyText();
  let cp = hd.checkpoint;
  if (cp && index >= cp.size) {
    // The entry is newer than the head verified so far: verify the current one.
    hd = await ensureHead(true);
    if (!alive()) return;
    headBar(hd, gen);
    cp = hd.checkpoint;
  }

  cHash.set(served.hashOk ? "ok" : "fail",
    served.hashOk ? "SHA-256(0x00 ‖ leaf) recomputed in this browser equals the stated leaf hash" : `entry ${index}: the leaf does not hash to its stated leaf hash ${entry.leaf_hash}`);

  if (!d) cDecoded.set("fail", `entry ${index}'s leaf is not a ledger event: ${decodeError}`);
  else {
    const diffs = [];
    if (entry.index !== index) diffs.push(`index ${entry.index}`);
    if (entry.kind !== d.kind) diffs.push(`kind ${entry.kind}`);
    if (entry.id !== d.id) diffs.push(`id ${entry.id}`);
    if (entry.signer !== d.signer) diffs.push(`signer ${entry.signer}`);
    if (entry.sequenced_at !== d.sequencedAt) diffs.push(`sequenced_at ${entry.sequenced_at}`);
    if (JSON.stringify(entry.payload) !== JSON.stringify(d.payload)) diffs.push("payload");
    cDecoded.set(diffs.length ? "fail" : "ok", diffs.length
      ? `entry ${index}: the server's decoded fields differ from its own leaf (${diffs.join(", ")}); this page shows the leaf's`
      : "envelope, payload, signer and sequencing time decoded here from the leaf; the server's decoded fields agree");
  }

  if (cSearch) {
    if (search.type === "leaf hash") {
      const ok = toHex(served.leafHash) === search.value;
      cSearch.set(ok ? "ok" : "fail", ok ? `this entry's leaf hashes to ${short(search.value)}` : `the server answered entry ${index} for leaf hash ${search.value}, but its leaf hashes to ${toHex(served.leafHash)}`);
    } else {
      const ok = d !== null && d.id === search.value;
      cSearch.set(ok ? "ok" : "fail", ok ? `this entry's leaf carries the envelope id ${search.value}` : `the server answered entry ${index} for envelope id ${search.value}, but its leaf carries ${d ? d.id : "no envelope"}`);
    }
  }

  if (!key || !cp) {
    const why = key ? "not checked: the head is not verified" : "not checked: no verifier key is pinned";
    cIncl.set("none", why);
    cSig.set("none", why);
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
        const showRole = (note) => roleCell.replaceChildren(
          `${enr.roles.join(", ")} (${enr.identity}), enrolled at `, entryLink(enr.index),
          revoked !== undefined ? ` — revoked at entry ${revoked}` : "", note);
        showRole(" (checking…)");
        try {
          await proveEntry(enr.index, enr.leafHash, cp, `enrolment entry ${enr.index}`);
        } catch (e) {
          showRole(" (NOT verified: that entry's inclusion proof failed)");
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
  });
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

/** The tier the rules' outcomes give (docs/PROJECTIONS.md, "Recommendation rules"). */
function tierFromOutcomes(current, rationale) {
  const of = (tier) => rationale.filter((o) => o.rule.startsWith(`${tier}.`));
  if (current !== "bronze") {
    const kept = of(current);
    if (kept.length > 0 && !kept.every((o) => o.holds)) return BELOW[current];
  }
  const next = ABOVE[current];
  if (next) {
    const up = of(next);
    if (up.length > 0 && up.every((o) => o.holds)) return next;
  }
  return current;
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
  const markStats = (status) => {
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

  const statRows = h("tbody", {});
  const evidenceRows = h("tbody", {});
  const plots = h("div", { class: "plots", id: "plots" });
  const ruleRows = rec.rationale.map((o, i) => {
    const mark = h("td", { class: "rule-check", id: `rule-check-${i}` }, "as served");
    return {
      o,
      mark,
      row: h("tr", { id: `rule-${i}`, dataset: { holds: String(o.holds) } },
        h("td", {}, h("code", {}, o.rule)),
        h("td", { class: o.holds ? "rule-pass" : "rule-fail" }, o.holds ? "pass" : "fail"),
        h("td", {}, o.detail),
        mark),
    };
  });
  const failures = v.failures ?? {};
  const shared = v.shared_kernel_failures ?? {};
  fill(main,
    h("h1", {}, "Task class ", h("span", { id: "class-name" }, v.task_class)),
    kv([
      ["current tier", h("span", { id: "class-tier", class: `tier tier-${v.tier}` }, v.tier)],
      ["recommended tier", h("span", { id: "class-recommended", class: `tier tier-${rec.recommended_tier}` }, rec.recommended_tier)],
      ["requires human approval", String(rec.requires_human_approval)],
      ["computed at", `${isoOfMicros(v.now_micros)} (tree size ${v.tree_size}), window from ${isoOfMicros(v.window_start_micros)} (${v.settings.window_seconds / 86400} days)`],
      ["held-out mean", h("span", { id: "class-mean" }, `${fixed4(v.held_out.mean)} [${fixed4(v.held_out.mean_ci?.low)}, ${fixed4(v.held_out.mean_ci?.high)}] (BCa, ${v.settings.confidence * 100}%, ${v.settings.resamples} resamples) `, statsMark())],
      ["held-out pass rate", h("span", { id: "class-pass-rate" }, `${fixed4(v.held_out.pass_rate)} [${fixed4(v.held_out.pass_rate_ci?.low)}, ${fixed4(v.held_out.pass_rate_ci?.high)}] (Wilson), ${v.held_out.passed} of ${v.held_out.cases} `, statsMark())],
    ]),
    cSig.el, cHead.el, cEvid.el, cStats.el, cRules.el, cPlot.el,
    h("h2", {}, "Recommendation: ", rec.current_tier, " → ", rec.recommended_tier),
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
      ["cost in the window", h("span", { id: "class-cost" }, v.cost_usd_in_window === null ? "—" : `$${v.cost_usd_in_window}`)],
      ["scores in the window", `${v.scores_in_window} (${v.shared_kernel_scores_in_window} shared-kernel)`],
      ["runs in the window", String(v.runs_in_window)],
      ["latest run", v.latest_run ? `${v.latest_run.run_id} (${v.latest_run.isolation}, started ${isoOfMicros(v.latest_run.started_micros)})` : "—"],
      ["active cases by curation class", Object.entries(v.active_cases_by_curation_class ?? {}).map(([k, n]) => `${k}: ${n}`).join(", ") || "—"],
      ["pending proposals", String(v.pending_proposals)],
      ["all cases (shown only)", `${v.all_cases.cases} cases, mean ${fixed4(v.all_cases.mean)}, pass rate ${fixed4(v.all_cases.pass_rate)}`],
    ]),
    h("h2", {}, "Evidence: the held-out scores the statistics use"),
    h("table", { class: "evidence", id: "evidence-table" },
      h("thead", {}, h("tr", {}, ["entry", "case", "score", "passed", "sequenced at", "leaf and inclusion"].map((t) => h("th", {}, t)))),
      evidenceRows),
    h("h2", {}, "What this page does not check"),
    h("ul", { class: "unchecked" },
      h("li", {}, "That nothing was left out: a server can omit a newer, lower score, a block failure or a case and keep every cited entry real. Only a replay of the whole log (ledger audit --projections, the Python package's Gate) or the committed state (ledger state) proves completeness."),
      h("li", {}, "The tier, failures, cost, runs, case counts and all-cases numbers: they are shown as served."),
      h("li", {}, "The rules' thresholds and case counts: they come from the class's registration and case entries, which this page does not replay."),
      h("li", {}, "The window's start and the view's time: they are the server's statement (an audit holds them to its own clock).")));

  const key = settings.keyText();
  if (!key || !hd.checkpoint) {
    const why = key ? "not checked: the head is not verified" : "not checked: no verifier key is pinned";
    for (const c of [cSig, cHead, cEvid, cStats, cRules, cPlot]) c.set("none", why);
    markStats("none");
    for (const e of v.evidence) {
      evidenceRows.append(h("tr", { id: `evidence-${e.index}`, dataset: { status: "none" } },
        h("td", {}, entryLink(e.index)), h("td", {}, e.case_id), h("td", {}, String(e.score)), h("td", {}, "?"), h("td", {}, "?"), h("td", {}, "not checked")));
    }
    return;
  }
  const pinned = await pinnedKey();
  const head = hd.checkpoint;

  // 1. The projection's own checkpoint: signed, and the tree it states.
  let pcp = null;
  await cSig.run(async () => {
    pcp = await openCheckpoint(p.checkpoint, pinned, "projection checkpoint");
    if (p.tree_size !== pcp.size || p.root !== pcp.rootHex) {
      throw new CheckFailed(`the projection's tree size or root (${p.tree_size}, ${short(p.root)}) differs from its signed checkpoint (${pcp.size}, ${short(pcp.rootHex)})`);
    }
    if (v.tree_size !== pcp.size || v.root !== pcp.rootHex) {
      throw new CheckFailed(`the view was computed at another tree (${v.tree_size}, ${short(v.root)}) than its signed checkpoint (${pcp.size})`);
    }
    return `signed by the pinned key at size ${pcp.size}; the projection and its view state that tree`;
  });
  if (!alive()) return;
  if (!pcp || cSig.el.dataset.status !== "ok") {
    for (const c of [cHead, cEvid, cStats, cRules, cPlot]) c.set("none", "not checked: the projection's checkpoint is not verified");
    markStats("none");
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
    await verifyConsistency(a.size, a.root, b.size, b.root, parseProof("consistency proof", answer.proof));
    return pcp.size < head.size
      ? `computed at size ${pcp.size}, a prefix of the verified head (size ${head.size}): consistency proof checked in this browser`
      : `computed at size ${pcp.size}, which extends the verified head (size ${head.size}): consistency proof checked in this browser`;
  });
  if (!alive()) return;

  // 3. Every evidence entry: the one the view cites, its leaf re-hashed, included under the projection's root.
  const leaves = [];
  await cEvid.run(async () => {
    const claimed = v.evidence.map((e) => `${e.index}:${e.leaf_hash}`);
    const given = p.evidence.map((e) => `${e.index}:${e.leaf_hash}`);
    if (claimed.length !== given.length || claimed.some((c, i) => c !== given[i])) {
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
        h("td", {}, v.evidence[k]?.case_id ?? "?"),
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
    for (const c of [cStats, cRules, cPlot]) c.set("none", "not checked: the evidence does not verify");
    markStats("none");
    return;
  }

  // 4. The held-out statistics from exactly those leaves.
  let recomputed = null;
  let rows = [];
  await cStats.run(async () => {
    const cited = v.evidence.map((e, i) => ({ index: e.index, leaf: leaves[i], caseId: e.case_id }));
    const ev = evidenceScores(v.task_class, cited, v.window_start_micros);
    rows = ev.rows;
    for (const [i, r] of ev.rows.entries()) {
      if (!sameBits(v.evidence[i].score, r.score)) {
        throw new CheckFailed(`evidence entry ${r.index}: the view states score ${v.evidence[i].score}, its leaf says ${r.score}`);
      }
    }
    recomputed = scoreStats(ev.scores, ev.passed, v.settings, bootstrapSeed(v.task_class));
    const cmp = compareStats(v.held_out, recomputed);
    for (const r of cmp) {
      statRows.append(h("tr", { id: `stat-${r.field.replace(".", "-")}`, dataset: { status: r.status } },
        h("td", {}, STAT_LABELS[r.field]),
        h("td", {}, show(r.served)),
        h("td", {}, show(r.recomputed)),
        h("td", { class: "cell-status" }, r.status === "ok" ? `✓ ${r.note}` : "✗ differs")));
    }
    const bad = cmp.find((r) => r.status === "fail");
    if (bad) throw new CheckFailed(`${STAT_LABELS[bad.field]} recomputed ${show(bad.recomputed)} ≠ served ${show(bad.served)}`);
    const approx = cmp.filter((r) => r.note !== "bit for bit").length;
    return approx === 0
      ? `count, mean, BCa interval (SplitMix64, BLAKE3 seed), passes, pass rate and Wilson interval recomputed in this browser from the ${ev.scores.length} evidence leaves: equal to the served ones bit for bit`
      : `recomputed in this browser from the ${ev.scores.length} evidence leaves: equal, ${approx} interval endpoint(s) only to 1e-12 (libm rounding; see the table)`;
  });
  if (!alive()) return;
  markStats(cStats.el.dataset.status);

  // 5. The recommendation follows from its rules; the rules the evidence decides agree with it.
  await cRules.run(async () => {
    const expected = tierFromOutcomes(rec.current_tier, rec.rationale);
    if (rec.current_tier !== v.tier) throw new CheckFailed(`the recommendation starts from ${rec.current_tier}, the view's tier is ${v.tier}`);
    if (expected !== rec.recommended_tier) {
      throw new CheckFailed(`the rules' outcomes give ${expected}, the recommendation says ${rec.recommended_tier}`);
    }
    if (!rec.requires_human_approval) throw new CheckFailed("the recommendation does not require human approval");
    if (!recomputed || cStats.el.dataset.status !== "ok") return `the recommended tier follows from the rules' outcomes as served (the statistics did not verify, so no rule was checked against them)`;
    let checkedRules = 0;
    for (const { o, mark } of ruleRows) {
      const lb = /^lower 95% bound (-?[0-9.]+); \w+ needs at least (\S+)$/.exec(o.detail);
      const sc = /^(\d+) of (\d+) active held-out cases/.exec(o.detail);
      if (o.rule.endsWith(".lower_bound_meets_threshold") && lb && recomputed.mean_ci) {
        const want = rustFixed(recomputed.mean_ci.low, 4);
        const threshold = Number(lb[2]);
        if (lb[1] !== want) throw new CheckFailed(`${o.rule}: the rule states a lower bound of ${lb[1]}, the recomputed one is ${want}`);
        if (o.holds !== recomputed.mean_ci.low >= threshold) throw new CheckFailed(`${o.rule}: the recomputed lower bound ${want} against ${threshold} gives ${!o.holds}, the rule says ${o.holds}`);
        mark.textContent = "✓ bound recomputed";
        mark.dataset.status = "ok";
        checkedRules++;
      } else if (o.rule.endsWith(".every_case_scored_in_window") && sc) {
        if (Number(sc[1]) !== recomputed.cases) throw new CheckFailed(`${o.rule}: the rule counts ${sc[1]} scored held-out cases, the evidence has ${recomputed.cases}`);
        mark.textContent = "✓ scored cases = evidence";
        mark.dataset.status = "ok";
        checkedRules++;
      }
    }
    return `the recommended tier (${rec.recommended_tier}) follows from the rules' outcomes; ${checkedRules} rule(s) checked against the recomputed statistics, the others are as served`;
  });
  if (!alive()) return;

  // 6. Over time: the statistics over the cited scores as they arrived, and what this browser verified before.
  if (cStats.el.dataset.status === "ok") {
    const allOk = [cSig, cHead, cEvid, cStats].every((c) => c.el.dataset.status === "ok");
    await cPlot.run(async () => {
      await new Promise((r) => setTimeout(r, 0)); // let the page paint first
      const hist = recordHistory(key, v, recomputed, allOk);
      const series = overTime(v, rows);
      if (!alive()) return "";
      drawPlots(plots, series, hist);
      return `${series.length} points recomputed in this browser from the cited scores in log order (the last one is the verified statistic), and ${hist.length} head(s) verified in this browser`;
    });
  } else {
    cPlot.set("none", "not drawn: the statistics did not verify");
  }
}

/** Keeps the verified held-out numbers of this tree size for the "verified here" series. */
function recordHistory(key, v, s, ok) {
  let hist = settings.history(key, v.task_class);
  if (ok && s.cases > 0) {
    hist = hist.filter((p) => p.size !== v.tree_size);
    hist.push({
      size: v.tree_size, at: v.now_micros, mean: s.mean, low: s.mean_ci.low, high: s.mean_ci.high,
      rate: s.pass_rate, rlow: s.pass_rate_ci.low, rhigh: s.pass_rate_ci.high,
    });
    hist.sort((a, b) => a.size - b.size);
    hist = hist.slice(-100);
    settings.setHistory(key, v.task_class, hist);
  }
  return hist;
}

/**
 * The held-out statistics over the first k cited scores in log order, for
 * up to 16 values of k ending with all of them: how the numbers built up as
 * the scores the view counts arrived. Scores a case had before its latest
 * are not cited, so this is not a history of what the server showed.
 */
function overTime(v, rows) {
  const ordered = [...rows].sort((a, b) => a.index - b.index);
  const n = ordered.length;
  if (n === 0) return [];
  const ks = new Set();
  const steps = Math.min(16, n);
  for (let i = 1; i <= steps; i++) ks.add(Math.max(1, Math.round((i * n) / steps)));
  const seed = bootstrapSeed(v.task_class);
  return [...ks].sort((a, b) => a - b).map((k) => {
    const prefix = ordered.slice(0, k);
    const s = scoreStats(prefix.map((r) => r.score), prefix.filter((r) => r.passed).length, v.settings, seed);
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
