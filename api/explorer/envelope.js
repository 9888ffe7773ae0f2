// Leaf records and DSSE envelopes (docs/FORMAT.md §6–8), and the
// disclosures of committed values (docs/PRIVACY.md), decoded in the browser.
//
// A port of the reading half of clients/python/src/evidence_ledger/envelope.py
// and disclose.py. A leaf is the canonical JSON of {"envelope",
// "sequenced_at", "v": 1}; the envelope's payload is base64 of the canonical
// JSON {"schema": 1, 2 or 3, "id", "signer", "issued_at", "event": {"kind",
// "body"}}, signed with Ed25519 over DSSE's pre-authentication encoding by
// the key whose id (lower-case hex SHA-256 of the raw public key) is
// `signer`. Schema 1 holds every value in clear; schema 2 holds each
// sensitive field as a commitment {"_sd": digest}, the base64url of the
// SHA-256 of a disclosure: base64url of the canonical JSON [salt, field,
// value] (RFC 9901's shape). Schema 3 also names case ids, identities and
// workflow ids by handles: where such a value is first named, the event
// holds its companion (`case_name`, ...), the value committed like any
// sensitive field, and the identifier holds the handle (docs/PRIVACY.md,
// "Handles"). Disclosures reach only readers with a role.
//
// What it leaves out: it does not check that the bytes are in canonical
// form (the ledger refuses any other at its door, and the leaf hash, which
// is checked, covers the exact bytes), and it reads JSON with the browser's
// parser, which keeps the last of duplicated keys where the ledger refuses
// them. A disclosure's canonical form is checked (its digest covers it); its
// value must be a string, as the ledger requires at its door.

import { CheckFailed, b64decode, concat, equalBytes, sha256, toHex, utf8 } from "./merkle.js";
import { ed25519Verify } from "./note.js";

export const PAYLOAD_TYPE = "application/vnd.evidence-ledger.event+json";
/**
 * The payload schemas: 1 (values in clear), 2 (sensitive values as
 * commitments) and 3 (also case ids, identities and workflow ids as handles).
 */
const SCHEMA_CLEAR = 1;
const SCHEMA_HANDLES = 3;
const SCHEMAS = [SCHEMA_CLEAR, 2, SCHEMA_HANDLES];

const RFC3339_Z = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$/;

/** Microseconds since the Unix epoch of an RFC 3339 UTC timestamp, or null. */
export function parseUtcMicros(text) {
  const m = typeof text === "string" ? RFC3339_Z.exec(text) : null;
  if (!m) return null;
  const [y, mo, d, h, mi, s] = m.slice(1, 7).map(Number);
  const ms = Date.UTC(y, mo - 1, d, h, mi, s);
  const check = new Date(ms);
  if (check.getUTCFullYear() !== y || check.getUTCMonth() !== mo - 1 || check.getUTCDate() !== d || h > 23 || mi > 59 || s > 59) {
    return null;
  }
  const frac = (m[7] ?? "").padEnd(9, "0");
  return ms * 1000 + Number(frac.slice(0, 6));
}

function keysAre(obj, keys) {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) return false;
  const have = Object.keys(obj).sort();
  const want = [...keys].sort();
  return have.length === want.length && have.every((k, i) => k === want[i]);
}

function parseJson(what, bytes) {
  let text;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new CheckFailed(`${what} is not UTF-8`);
  }
  try {
    return JSON.parse(text);
  } catch {
    throw new CheckFailed(`${what} is not JSON`);
  }
}

/**
 * Decodes a leaf record (bytes). Returns {envelope: {payloadBytes, keyid,
 * signature}, payload, id, kind, signer, issuedAt, body, sequencedAt (the
 * text), sequencedMicros}. Throws `CheckFailed` naming what is malformed.
 */
export function decodeLeaf(leaf, what = "leaf") {
  const obj = parseJson(what, leaf);
  if (!keysAre(obj, ["envelope", "sequenced_at", "v"])) {
    throw new CheckFailed(`${what} is not a leaf record {envelope, sequenced_at, v}`);
  }
  if (obj.v !== 1) throw new CheckFailed(`${what}: leaf version ${JSON.stringify(obj.v)} is not 1`);
  const sequencedMicros = parseUtcMicros(obj.sequenced_at);
  if (sequencedMicros === null) throw new CheckFailed(`${what}.sequenced_at is not an RFC 3339 UTC time`);
  const env = obj.envelope;
  if (!keysAre(env, ["payload", "payloadType", "signatures"])) {
    throw new CheckFailed(`${what}.envelope is not a DSSE envelope`);
  }
  if (env.payloadType !== PAYLOAD_TYPE) throw new CheckFailed(`${what}.envelope.payloadType is not ${PAYLOAD_TYPE}`);
  if (!Array.isArray(env.signatures) || env.signatures.length !== 1 || !keysAre(env.signatures[0], ["keyid", "sig"])) {
    throw new CheckFailed(`${what}.envelope does not carry exactly one {keyid, sig} signature`);
  }
  const payloadBytes = b64decode(`${what}.envelope.payload`, env.payload);
  const signature = b64decode(`${what}.envelope.signatures[0].sig`, env.signatures[0].sig);
  if (signature.length !== 64) throw new CheckFailed(`${what}: an Ed25519 signature is 64 bytes`);
  const payload = parseJson(`${what}.envelope.payload`, payloadBytes);
  if (!keysAre(payload, ["schema", "id", "signer", "issued_at", "event"]) || !SCHEMAS.includes(payload.schema)) {
    throw new CheckFailed(`${what}: the payload is not {schema: 1, 2 or 3, id, signer, issued_at, event}`);
  }
  if (!keysAre(payload.event, ["kind", "body"]) || typeof payload.event.kind !== "string" || typeof payload.event.body !== "object" || payload.event.body === null) {
    throw new CheckFailed(`${what}: the payload's event is not {kind, body}`);
  }
  checkForm(payload, what);
  for (const f of ["id", "signer", "issued_at"]) {
    if (typeof payload[f] !== "string") throw new CheckFailed(`${what}: the payload's ${f} is not a string`);
  }
  if (env.signatures[0].keyid !== payload.signer) {
    throw new CheckFailed(`${what}: the signature's key id is not the payload's signer`);
  }
  return {
    envelope: { payloadBytes, keyid: env.signatures[0].keyid, signature },
    payload,
    id: payload.id,
    kind: payload.event.kind,
    signer: payload.signer,
    issuedAt: payload.issued_at,
    body: payload.event.body,
    sequencedAt: obj.sequenced_at,
    sequencedMicros,
  };
}

/** DSSE pre-authentication encoding: "DSSEv1" SP len(type) SP type SP len(payload) SP payload. */
export function pae(payloadType, payload) {
  const t = utf8(payloadType);
  return concat(utf8(`DSSEv1 ${t.length} `), t, utf8(` ${payload.length} `), payload);
}

/** A principal's key id: lower-case hex SHA-256 of its raw 32-byte public key. */
export async function keyId(publicKey) {
  return toHex(await sha256(publicKey));
}

/**
 * Whether the decoded leaf's envelope signature verifies with `publicKey`
 * (raw 32 bytes), whose key id must be the envelope's. WebCrypto's Ed25519
 * check, not ed25519-dalek's `verify_strict`: see README.md.
 */
export async function verifyEnvelope(decoded, publicKey) {
  if ((await keyId(publicKey)) !== decoded.envelope.keyid) return false;
  const key = await crypto.subtle.importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"]);
  return ed25519Verify(key, pae(PAYLOAD_TYPE, decoded.envelope.payloadBytes), decoded.envelope.signature);
}

/**
 * The held-out statistics' inputs from cited evidence leaves (a port of
 * evidence.py's `held_out_from_evidence`): `cited` is a list of {index,
 * leaf (bytes), caseId (as the view states it)} in the order the view
 * cites them. `windowStartMicros` is required (a view that states no
 * window start fails: nothing is skipped). Returns {scores, passed, rows};
 * throws `CheckFailed` naming the entry that cannot be evidence for
 * `taskClass`.
 */
export function evidenceScores(taskClass, cited, windowStartMicros) {
  if (!Number.isSafeInteger(windowStartMicros)) throw new CheckFailed("the view states no window start (window_start_micros)");
  const scores = [];
  const rows = [];
  let passed = 0;
  const seen = new Set();
  const cases = new Set();
  for (const c of cited) {
    const what = `evidence entry ${c.index}`;
    if (seen.has(c.index)) throw new CheckFailed(`${what} appears more than once`);
    seen.add(c.index);
    let leaf;
    try {
      leaf = decodeLeaf(c.leaf, what);
    } catch (e) {
      throw new CheckFailed(`${what} is not a ledger event: ${e.message}`);
    }
    if (leaf.kind !== "score.recorded") throw new CheckFailed(`${what} is a ${leaf.kind}, not a score`);
    const body = leaf.body;
    if (body.task_class !== taskClass) throw new CheckFailed(`${what} is a score of \`${body.task_class}\`, not of \`${taskClass}\``);
    if (leaf.sequencedMicros < windowStartMicros) {
      throw new CheckFailed(`${what} was sequenced before the window starts`);
    }
    const caseId = body.case_id;
    if (typeof caseId !== "string") throw new CheckFailed(`${what} names no case`);
    if (c.caseId != null && c.caseId !== caseId) throw new CheckFailed(`${what} names case \`${caseId}\`; the view says \`${c.caseId}\``);
    if (cases.has(caseId)) throw new CheckFailed(`${what}: case \`${caseId}\` is cited twice (only the latest score of a case counts)`);
    cases.add(caseId);
    const s = body.score;
    const p = s?.passed;
    const v = s?.score;
    if (typeof p !== "boolean" || typeof v !== "number" || !Number.isFinite(v)) {
      throw new CheckFailed(`${what}: its score is not {passed: bool, score: number}`);
    }
    if (p) passed++;
    scores.push(v);
    rows.push({ index: c.index, caseId, score: v, passed: p, sequencedAt: leaf.sequencedAt, sequencedMicros: leaf.sequencedMicros });
  }
  return { scores, passed, rows };
}

// --- committed fields and their disclosures (docs/PRIVACY.md) -------------------------

/**
 * The fields schemas 2 and 3 commit, for each kind, in order
 * (`events::disclose::committed_paths`). A schema-3 companion (HANDLES)
 * comes last; schemas 1 and 2 hold none.
 */
export const COMMITTED = {
  "principal.enrolled": ["identity_name"],
  "principal.revoked": ["reason"],
  "case.added": ["title", "disposition", "difficulty", "provenance.source_ref", "case_name"],
  "case.retired": ["reason"],
  "case.proposed": ["draft.title", "draft.disposition", "draft.difficulty", "production_ref", "draft.case_name"],
  "proposal.rejected": ["reason"],
  "score.recorded": ["operator_fingerprint"],
  "rag.capability.minted": ["workflow_name"],
  "rag.record.quarantined": ["reason"],
  "field.redacted": ["reason"],
};

/**
 * Where each kind names a sensitive value first (`events::disclose::handle_field`):
 * what the handle names, the identifier's path (the handle, in schema 3) and
 * its companion's (the value, committed).
 */
export const HANDLES = {
  "case.added": { class: "case", handle: "case_id", name: "case_name" },
  "case.proposed": { class: "case", handle: "draft.case_id", name: "draft.case_name" },
  "principal.enrolled": { class: "identity", handle: "identity", name: "identity_name" },
  "rag.capability.minted": { class: "workflow", handle: "workflow_id", name: "workflow_name" },
};

const committedPaths = (kind) => (Object.hasOwn(COMMITTED, kind) ? COMMITTED[kind] : []);

function valueAt(body, path) {
  let v = body;
  for (const part of path.split(".")) {
    if (v === null || typeof v !== "object" || Array.isArray(v) || !Object.hasOwn(v, part)) return undefined;
    v = v[part];
  }
  return v;
}

/** Whether `v` has the form of a commitment: {"_sd": string} and nothing else. */
const isCommitment = (v) => keysAre(v, ["_sd"]) && typeof v._sd === "string";

const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/** Base64url without padding. */
export function b64url(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    s += B64URL[(n >> 18) & 63] + B64URL[(n >> 12) & 63];
    if (i + 1 < bytes.length) s += B64URL[(n >> 6) & 63];
    if (i + 2 < bytes.length) s += B64URL[n & 63];
  }
  return s;
}

/** The bytes of base64url without padding in its one canonical encoding (no stray bits), or null. */
export function b64urlDecode(text) {
  if (typeof text !== "string" || !/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) return null;
  const out = new Uint8Array(Math.floor((text.length * 6) / 8));
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    const chunk = text.slice(i, i + 4);
    let n = 0;
    for (let j = 0; j < 4; j++) n = (n << 6) | (j < chunk.length ? B64URL.indexOf(chunk[j]) : 0);
    for (let j = 0; j < chunk.length - 1; j++) out[o++] = (n >> (16 - 8 * j)) & 255;
  }
  return b64url(out) === text ? out : null;
}

/** Whether `d` is the base64url (no padding) of a 32-byte SHA-256 digest. */
export function isDigest(d) {
  return typeof d === "string" && d.length === 43 && b64urlDecode(d)?.length === 32;
}

/**
 * The committed fields of an event body, in order: [{path, digest}]
 * (the fields of its kind that hold a commitment).
 */
export function commitments(kind, body) {
  const out = [];
  for (const path of committedPaths(kind)) {
    const v = valueAt(body, path);
    if (isCommitment(v)) out.push({ path, digest: v._sd });
  }
  return out;
}

/**
 * The identifier of an event body that names a sensitive value where that
 * value is first named, or null for the other kinds: {class, handlePath,
 * handle (the value in clear in schemas 1 and 2, its handle in schema 3),
 * namePath, name (the companion as the body holds it, or undefined),
 * derived}. `derived`: the handle is the digest of the commitment beside
 * it, so this event gives the value its handle. Otherwise a schema-3 handle
 * must be one an earlier entry gave for that class (or a value in clear from
 * before the switch): only a replay of the log can tell
 * (`handle_not_derived`), not one entry alone.
 */
export function handleField(kind, body) {
  const spec = Object.hasOwn(HANDLES, kind) ? HANDLES[kind] : null;
  if (!spec) return null;
  const handle = valueAt(body, spec.handle);
  const name = valueAt(body, spec.name);
  return {
    class: spec.class, handlePath: spec.handle, handle, namePath: spec.name, name,
    derived: isCommitment(name) && typeof handle === "string" && name._sd === handle,
  };
}

/**
 * The ledger's rule on a payload's form (`events::disclose::check_form`):
 * schema 1 holds every sensitive value in clear, schemas 2 and 3 a
 * commitment in each, whose digest is base64url of 32 bytes; schema 3 holds
 * the companion of an identifier that names a value first (HANDLES), and
 * schemas 1 and 2 hold none. Throws `CheckFailed` naming the field.
 */
function checkForm(payload, what) {
  const clear = payload.schema === SCHEMA_CLEAR;
  const { kind, body } = payload.event;
  for (const path of committedPaths(kind)) {
    const v = valueAt(body, path);
    if (isCommitment(v)) {
      if (clear) throw new CheckFailed(`${what}: schema 1 holds event.body.${path} in clear, but it holds a commitment`);
      if (!isDigest(v._sd)) throw new CheckFailed(`${what}: the commitment in event.body.${path} is not base64url of a 32-byte digest`);
    } else if (v !== undefined && !clear) {
      throw new CheckFailed(`${what}: schema ${payload.schema} holds a commitment in event.body.${path}, but it holds ${typeof v === "string" ? "the value in clear" : "no commitment"}`);
    }
  }
  const hf = handleField(kind, body);
  if (hf) {
    const holds = hf.name !== undefined;
    if (holds && payload.schema < SCHEMA_HANDLES) {
      throw new CheckFailed(`${what}: schema ${payload.schema} has no field event.body.${hf.namePath} (schema 3 adds it), but the payload holds it`);
    }
    if (!holds && payload.schema >= SCHEMA_HANDLES) {
      throw new CheckFailed(`${what}: schema 3 commits in event.body.${hf.namePath} the value event.body.${hf.handlePath} is the handle of, but the payload does not hold it`);
    }
  }
}

/** The digest of a disclosure: base64url of the SHA-256 of its bytes. */
export async function disclosureDigest(disclosure) {
  return b64url(await sha256(utf8(disclosure)));
}

/**
 * Takes a disclosure apart (`events::disclose::parse`): base64url without
 * padding of the canonical JSON [salt, field, value], the salt base64url of
 * 16 to 64 bytes; the value a string (the ledger's rule). Returns {field,
 * value}; throws `CheckFailed` saying what is malformed.
 */
export function parseDisclosure(disclosure, what = "the disclosure") {
  const malformed = (why) => new CheckFailed(`${what} is malformed: ${why}`);
  const bytes = b64urlDecode(disclosure);
  if (bytes === null) throw malformed("not base64url without padding");
  let parts;
  try {
    parts = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw malformed("not JSON");
  }
  if (!Array.isArray(parts)) throw malformed("not a JSON array");
  if (parts.length !== 3) throw malformed("not three elements");
  const [salt, field, value] = parts;
  if (typeof salt !== "string" || typeof field !== "string") throw malformed("the salt and the field must be strings");
  if (typeof value !== "string") throw malformed("the value is not a string");
  // Canonical JSON of three strings is what JSON.stringify writes (docs/FORMAT.md §7).
  if (!equalBytes(utf8(JSON.stringify(parts)), bytes)) throw malformed("not canonical JSON");
  const s = b64urlDecode(salt);
  if (s === null || s.length < 16 || s.length > 64) throw malformed("the salt must be base64url of 16 to 64 bytes");
  return { field, value };
}

/**
 * Checks the disclosures served with an entry against the commitments in
 * its leaf, as `events::disclose::check_disclosed` does, but judging each
 * disclosure on its own so that every one that fails is named: each must
 * hash to a commitment of the leaf, be well formed, name the field holding
 * that commitment, and open it once. Returns {fields: [{path, digest,
 * status: "disclosed"|"failed"|"redacted"|"committed", value, problem}],
 * problems: [message]} in field order; `redacted` (the fields the server
 * says it no longer holds a disclosure for) must be committed fields that
 * are not disclosed.
 */
export async function checkDisclosures(kind, body, disclosures, redacted = []) {
  const fields = commitments(kind, body).map((c) => ({ ...c, status: "committed", value: null, problem: null }));
  const problems = [];
  const fail = (f, message) => {
    problems.push(message);
    if (f && f.status !== "failed") {
      f.status = "failed";
      f.problem = message;
    }
  };
  if (!Array.isArray(disclosures) || !disclosures.every((d) => typeof d === "string")) {
    problems.push("the answer's disclosures are not a list of strings");
    return { fields, problems };
  }
  for (const [i, d] of disclosures.entries()) {
    const want = await disclosureDigest(d);
    const f = fields.find((x) => x.digest === want);
    if (!f) {
      // Which field it was meant for, when it still says.
      let named = null;
      try {
        named = fields.find((x) => x.path === parseDisclosure(d).field) ?? null;
      } catch {
        named = null;
      }
      fail(named, `disclosure ${i}${named ? ` (of ${named.path})` : ""} matches no commitment in the entry (a wrong value or salt, or another entry's)`);
      continue;
    }
    let opened;
    try {
      opened = parseDisclosure(d, `disclosure ${i}`);
    } catch (e) {
      fail(f, `${e.message} (it opens ${f.path})`);
      continue;
    }
    if (opened.field !== f.path) fail(f, `disclosure ${i} names ${opened.field} but opens ${f.path}`);
    else if (f.status === "disclosed") fail(f, `disclosure ${i} opens ${f.path} twice`);
    else if (f.status !== "failed") {
      f.status = "disclosed";
      f.value = opened.value;
    }
  }
  if (!Array.isArray(redacted) || !redacted.every((r) => typeof r === "string")) {
    problems.push("the answer's redacted fields are not a list of strings");
    return { fields, problems };
  }
  for (const path of redacted) {
    const f = fields.find((x) => x.path === path);
    if (!f) fail(null, `${path} is said to be redacted, but it is not a committed field of the entry`);
    else if (f.status === "disclosed") fail(f, `${path} is said to be redacted, but it is disclosed`);
    else if (f.status === "committed") f.status = "redacted";
  }
  return { fields, problems };
}
