// Leaf records and DSSE envelopes (docs/FORMAT.md §6–8), decoded in the browser.
//
// A port of the reading half of clients/python/src/evidence_ledger/envelope.py.
// A leaf is the canonical JSON of {"envelope", "sequenced_at", "v": 1}; the
// envelope's payload is base64 of the canonical JSON {"schema": 1, "id",
// "signer", "issued_at", "event": {"kind", "body"}}, signed with Ed25519
// over DSSE's pre-authentication encoding by the key whose id (lower-case
// hex SHA-256 of the raw public key) is `signer`.
//
// What it leaves out: it does not check that the bytes are in canonical
// form (the ledger refuses any other at its door, and the leaf hash, which
// is checked, covers the exact bytes), and it reads JSON with the browser's
// parser, which keeps the last of duplicated keys where the ledger refuses
// them.

import { CheckFailed, b64decode, concat, sha256, toHex, utf8 } from "./merkle.js";
import { ed25519Verify } from "./note.js";

export const PAYLOAD_TYPE = "application/vnd.evidence-ledger.event+json";

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
  if (!keysAre(payload, ["schema", "id", "signer", "issued_at", "event"]) || payload.schema !== 1) {
    throw new CheckFailed(`${what}: the payload is not {schema: 1, id, signer, issued_at, event}`);
  }
  if (!keysAre(payload.event, ["kind", "body"]) || typeof payload.event.kind !== "string" || typeof payload.event.body !== "object" || payload.event.body === null) {
    throw new CheckFailed(`${what}: the payload's event is not {kind, body}`);
  }
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
