// The entries: the list (#/entries), one entry (#/entries/N) and search
// (#/find/TEXT), with the scan for a signer's enrolment. An entry's
// committed fields (schemas 2 and 3, docs/PRIVACY.md) are shown with their
// digests, a schema-3 companion (the value behind a handle) among them; for
// a reader with a role, the disclosures served with the entry are checked
// against the leaf and the values shown.

import { ApiError, checkServedEntry, fetchEntry, getJson, proveEntry } from "./api.js";
import { checkDisclosures, commitments, decodeLeaf, handleField, isDigest, keyId, verifyEnvelope } from "./envelope.js";
import { b64decode, chainHash, CheckFailed, equalBytes, parseHash, toHex } from "./merkle.js";
import {
  check, ensureHead, entryLink, fill, h, headBar, indexOfText, isIndex, kv, link, main, quote, selfCheck, short, unverifiedReason,
} from "./ui.js";

const PAGE_SIZE = 50;
// How far back an entry page looks for the enrolment of its signer.
const ENROLMENT_SCAN_LIMIT = 5000;

// --- the entry list ------------------------------------------------------------------

export async function entriesPage(hd, start, alive, gen) {
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

export async function findPage(hd, text, alive, gen) {
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

export async function entryPage(hd, index, search, alive, gen) {
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
  // Committed fields, and (for a reader with a role) the disclosures served beside the leaf.
  const committed = d ? commitments(d.kind, d.body) : [];
  // Schema 3: the identifier that names a value first holds a handle (docs/PRIVACY.md, "Handles").
  const hf = d && d.payload.schema >= 3 ? handleField(d.kind, d.body) : null;
  const given = (v) => v !== undefined && v !== null;
  const listed = (v) => Array.isArray(v) && v.length > 0;
  const disclosing = given(entry.disclosures) || given(entry.redacted);
  const cDisc = d && disclosing && (committed.length > 0 || listed(entry.disclosures) || listed(entry.redacted))
    ? check("check-disclosures", "Disclosed values:", gen) : null;
  const fieldRows = new Map(committed.map((c) => [c.path, committedRow(c, disclosing)]));
  fill(main,
    h("h1", {}, `Entry ${index}`, d ? h("span", { class: "kind" }, ` ${d.kind}`) : null),
    h("p", { class: "pager" },
      index > 0 ? link(`#/entries/${index - 1}`, "← previous", { id: "entry-prev" }) : null, " ",
      link(`#/entries?start=${Math.max(0, index - (index % PAGE_SIZE))}`, "list"), " ",
      link(`#/entries/${index + 1}`, "next →", { id: "entry-next" })),
    cSearch ? cSearch.el : null,
    cHash.el, cDecoded.el, cIncl.el, cSig.el, cChain.el, cDisc ? cDisc.el : null,
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
          ...(hf ? [[`handle (${hf.handlePath})`, handleNote(hf)]] : []),
        ])
      : h("p", { class: "error" }, `The leaf does not decode: ${decodeError}`),
    d ? h("h3", {}, "Payload body") : null,
    d ? h("pre", { class: "payload", id: "entry-payload" }, JSON.stringify(d.body, null, 2)) : null,
    committed.length > 0 ? h("h3", {}, "Committed fields") : null,
    committed.length > 0
      ? h("table", { class: "committed", id: "committed-table" },
          h("thead", {}, h("tr", {}, ["field", "commitment (_sd)", "value", "check"].map((t) => h("th", {}, t)))),
          h("tbody", {}, [...fieldRows.values()].map((r) => r.row)))
      : null,
    committed.length > 0
      ? h("p", { class: "hint" }, disclosing
        ? "Each disclosure served with this entry is hashed here (SHA-256, base64url) and must equal the commitment in the leaf; it must name that field and open it once."
        : "The leaf holds a commitment (the digest of a salted disclosure) in place of each of these values. The disclosures are served only to a reader with a role (a reader token, set under Key & token).")
      : null,
    h("h2", {}, "What this page does not check"),
    h("ul", { class: "unchecked" },
      h("li", {}, "That the signer was allowed to write this kind of event, and every other rule of docs/EVENTS.md: the ledger checks them at append time; a replay (ledger audit --projections) checks them again."),
      h("li", {}, "The chain hash beyond this link: the chain is not covered by the signed root, only the Merkle tree is."),
      h("li", {}, "Co-signatures inside the payload (curators, maintainers)."),
      hf && !hf.derived ? h("li", {}, `That ${hf.handlePath}, which is not the digest of ${hf.namePath}, is a handle an earlier entry gave to a ${hf.class} value: a replay of the log checks it (handle_not_derived).`) : null,
      hf ? h("li", {}, "That one value has one handle: the ledger checks it at its door, where it holds the disclosures.") : null,
      committed.length > 0 ? h("li", {}, "That every committed field was disclosed: a server can withhold a disclosure (the field then shows \"not disclosed\"). A disclosed value is the one the signer committed to, nothing more: the ledger checked it against the field's rule when it was written.") : null));

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
        // From schema 3 the identity is a handle (docs/PRIVACY.md, "Handles"): cut short, whole in its title.
        const identity = String(enr.identity);
        const showRole = (note) => roleCell.replaceChildren(
          `${roles} (`, isDigest(identity) ? h("code", { title: identity }, short(identity)) : identity, "), enrolled at ", entryLink(enr.index),
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
  if (cDisc) {
    await cDisc.run(async () => {
      const r = await checkDisclosures(d.kind, d.body, entry.disclosures ?? [], entry.redacted ?? []);
      for (const f of r.fields) fieldRows.get(f.path)?.show(f, unverified);
      if (r.problems.length > 0) {
        const more = r.problems.length > 1 ? ` (and ${r.problems.length - 1} more: ${r.problems.slice(1).join("; ")})` : "";
        throw new CheckFailed(`entry ${index}: ${r.problems[0]}${more}`);
      }
      const open = r.fields.filter((f) => f.status === "disclosed").length;
      const gone = r.fields.filter((f) => f.status === "redacted").length;
      return `${open} of ${r.fields.length} committed fields disclosed${gone ? `, ${gone} redacted` : ""}: each disclosure hashes in this browser to the commitment in the leaf, names that field and opens it once`;
    }, unverified);
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

// --- committed fields -----------------------------------------------------------------

/**
 * What one entry alone says of its schema-3 handle (`HandleField::derived`):
 * whether the identifier is the digest of the commitment in its companion.
 */
function handleNote(hf) {
  return h("span", { id: "entry-handle", dataset: { derived: String(hf.derived) } },
    h("code", {}, String(hf.handle)),
    hf.derived
      ? ` derived here: the digest of the commitment in ${hf.namePath} (this entry gives the ${hf.class} its handle)`
      : ` not the digest of the commitment in ${hf.namePath}: a handle an earlier entry gave (not checked here)`);
}

/**
 * A row of the committed-field table for `c` ({path, digest}): "committed"
 * until `show` sets what the disclosures gave (a value checked against the
 * leaf, a failure naming what is wrong, "redacted", or "not disclosed").
 */
function committedRow(c, disclosing) {
  const value = h("td", { class: "disclosed-value", id: `committed-value-${c.path}` }, "committed");
  const note = h("td", { class: "cell-status" }, disclosing ? "checking…" : "the value is disclosed only to a reader with a role");
  const row = h("tr", { id: `committed-${c.path}`, dataset: { status: disclosing ? "pending" : "none" } },
    h("td", {}, h("code", {}, c.path)),
    h("td", {}, h("code", { class: "digest", title: c.digest }, c.digest)),
    value,
    note);
  return {
    row,
    show(f, unverified) {
      if (f.status === "disclosed") {
        row.dataset.status = unverified ? "none" : "ok";
        value.textContent = String(f.value);
        note.textContent = unverified ? "as served: its disclosure hashes to the commitment" : "✓ disclosed: its disclosure hashes to the commitment in the leaf";
      } else if (f.status === "failed") {
        row.dataset.status = "fail";
        note.textContent = `✗ ${f.problem}`;
      } else if (f.status === "redacted") {
        row.dataset.status = "none";
        value.textContent = "redacted";
        note.textContent = "the server no longer holds its disclosure";
      } else {
        row.dataset.status = "none";
        note.textContent = "not disclosed";
      }
    },
  };
}
