// The explorer's side of the HTTP API (docs/API.md) and what it keeps in
// this browser.
//
// Kept in localStorage, never sent anywhere but to this origin:
// - the pinned note verifier key (the only thing the explorer trusts);
// - the read token, sent as `Authorization: Bearer <token>` when set
//   (`read_token_required` otherwise);
// - per pinned key, the last checkpoint this browser verified and trusted,
//   which every later one must be proven consistent with;
// - per pinned key and task class, the held-out numbers verified at each
//   tree size seen (the points of the plot's "verified here" series).
//
// `verifyHead` is the one place a head becomes "verified": signed by the
// pinned key, and not shown inconsistent with the trusted one (proven
// consistent, the same tree, or trusted on first use). A signed head that
// fails consistency (a fork or a rollback) is never used as the verified one.
//
// Every request gives up after `REQUEST_TIMEOUT_MS`: a server that does
// not answer makes the check that waited for it fail ("timed out"), it
// never leaves it pending.

import { CheckFailed, parseHash, parseProof, verifyConsistency, verifyInclusion, leafHash, b64decode, toHex } from "./merkle.js";
import { openCheckpoint, parseCheckpointBody, parseNote, parseVerifierKey } from "./note.js";

const STORE = "evidence-ledger.";

function load(name) {
  try {
    return localStorage.getItem(STORE + name);
  } catch {
    return null;
  }
}

function save(name, value) {
  if (value === null || value === "") localStorage.removeItem(STORE + name);
  else localStorage.setItem(STORE + name, value);
}

export const settings = {
  keyText: () => load("key"),
  setKey: (text) => save("key", text),
  token: () => load("token"),
  setToken: (text) => save("token", text),
  trustedNote: (keyText) => load(`trusted.${keyText}`),
  setTrustedNote: (keyText, note) => save(`trusted.${keyText}`, note),
  history: (keyText, taskClass) => {
    try {
      return JSON.parse(load(`history.${keyText}.${taskClass}`) ?? "[]");
    } catch {
      return [];
    }
  },
  setHistory: (keyText, taskClass, points) => save(`history.${keyText}.${taskClass}`, JSON.stringify(points)),
};

/** How long a request (with its retries and its body) may take before it fails. */
export const REQUEST_TIMEOUT_MS = 20_000;

/** An error answer of the server (problem+json), or a failed request (status 0). */
export class ApiError extends Error {
  constructor(path, status, code, detail) {
    super(code === TIMED_OUT
      ? `timed out: ${path} did not answer within ${REQUEST_TIMEOUT_MS / 1000} s`
      : `${path}: ${status ? `${status} ` : ""}${code}${detail ? ` (${detail})` : ""}`);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

const TIMED_OUT = "timed out";

function failedRequest(path, e) {
  if (e instanceof ApiError) return e;
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return new ApiError(path, 0, TIMED_OUT, "");
  return new ApiError(path, 0, "network error", e?.message ?? String(e));
}

async function request(path, signal) {
  const headers = {};
  const token = settings.token();
  if (token) headers.Authorization = `Bearer ${token}`;
  // A 503 carries Retry-After (the server is starting or busy): wait and
  // try again a few times, at most a few seconds in all.
  for (let attempt = 0; ; attempt++) {
    let resp;
    try {
      resp = await fetch(path, { headers, cache: "no-store", signal });
    } catch (e) {
      throw failedRequest(path, e);
    }
    if (resp.status === 503 && attempt < 3) {
      const wait = Math.min(Number(resp.headers.get("retry-after")) || 1, 2);
      await new Promise((r) => setTimeout(r, wait * 1000));
      continue;
    }
    if (!resp.ok) {
      let code = "error";
      let detail = "";
      try {
        const doc = await resp.json();
        if (typeof doc?.code === "string") code = doc.code;
        if (typeof doc?.detail === "string") detail = doc.detail;
      } catch (e) {
        if (signal.aborted) throw failedRequest(path, e);
        /* not problem+json */
      }
      throw new ApiError(path, resp.status, code, detail);
    }
    return resp;
  }
}

/** The body of `path` as text, within `REQUEST_TIMEOUT_MS` (headers, retries and body). */
export async function getText(path) {
  const signal = AbortSignal.timeout(REQUEST_TIMEOUT_MS);
  const resp = await request(path, signal);
  try {
    return await resp.text();
  } catch (e) {
    throw failedRequest(path, e);
  }
}

/** The body of `path` as JSON; `ApiError` ("not JSON") when it is not. */
export async function getJson(path) {
  const text = await getText(path);
  try {
    return JSON.parse(text);
  } catch {
    throw new ApiError(path, 0, "the answer is not JSON", "");
  }
}

/** The pinned key, parsed; null when none is pinned. Throws when the pinned text is not a key. */
export async function pinnedKey() {
  const text = settings.keyText();
  return text ? parseVerifierKey(text) : null;
}

/**
 * Fetches `/checkpoint` and verifies it. Returns
 * {key, checkpoint (the verified head, or null), signed (signed by the
 *  pinned key, whether or not consistent; for display only), served
 *  (unverified size and root), signature: {status, message},
 *  consistency: {status, message}}.
 * `checkpoint` is null unless the signature verified and consistency did
 * not fail: a head that forks from or rolls back the trusted one is not
 * verified, and nothing is checked against it.
 * Status is "ok" (checked and passed), "fail" (checked and failed) or
 * "none" (not checked: no key pinned, or nothing to compare with).
 */
export async function verifyHead() {
  const note = await getText("/checkpoint");
  let served = null;
  try {
    served = parseCheckpointBody(parseNote(note).textString);
  } catch {
    /* shown as unparsable below */
  }
  const out = { key: null, checkpoint: null, signed: null, served, note, signature: null, consistency: null };
  let key;
  try {
    key = await pinnedKey();
  } catch (e) {
    out.signature = { status: "fail", message: `the pinned key is not a verifier key: ${e.message}` };
    out.consistency = { status: "none", message: "not checked: no usable key" };
    return out;
  }
  if (!key) {
    out.signature = { status: "none", message: "not verified: no verifier key is pinned in this browser" };
    out.consistency = { status: "none", message: "not checked: no verifier key is pinned" };
    return out;
  }
  out.key = key;
  let cp;
  try {
    cp = await openCheckpoint(note, key);
  } catch (e) {
    if (!(e instanceof CheckFailed)) throw e;
    out.signature = { status: "fail", message: e.message };
    out.consistency = { status: "none", message: "not checked: the checkpoint is not verified" };
    return out;
  }
  out.signed = cp;
  out.signature = { status: "ok", message: `checkpoint signature verified in this browser with the pinned key ${key.text}` };
  out.consistency = await checkConsistency(key, cp);
  if (out.consistency.status !== "fail") out.checkpoint = cp;
  return out;
}

// Compares a signed checkpoint with the one this browser trusted last,
// and trusts it once it is proven to extend it.
async function checkConsistency(key, cp) {
  const stored = settings.trustedNote(key.text);
  let trusted = null;
  if (stored) {
    try {
      trusted = await openCheckpoint(stored, key, "trusted checkpoint");
    } catch (e) {
      // Kept as it is: a damaged note is not a reason to trust whatever comes next.
      return {
        status: "fail",
        message: `the trusted head stored in this browser cannot be read (${e.message}); nothing was checked for consistency. "Forget the trusted head" on the Key & token page starts trust on first use again`,
      };
    }
  }
  if (!trusted) {
    settings.setTrustedNote(key.text, cp.note);
    return {
      status: "none",
      message: `no earlier head trusted in this browser for this key: this one (size ${cp.size}) is now the trusted head (trust on first use); nothing was checked for consistency`,
    };
  }
  if (trusted.size === cp.size) {
    if (trusted.rootHex !== cp.rootHex) {
      return { status: "fail", message: `two different signed roots for size ${cp.size}: the log forked from the head this browser trusted` };
    }
    return { status: "ok", message: `the same tree as the head this browser trusted (size ${cp.size})` };
  }
  if (trusted.size > cp.size) {
    return {
      status: "fail",
      message: `the server's checkpoint (size ${cp.size}) is older than the head this browser trusted (size ${trusted.size})`,
    };
  }
  try {
    const answer = await getJson(`/v1/proofs/consistency?first=${trusted.size}&second=${cp.size}`);
    if (answer.first !== trusted.size || answer.second !== cp.size) {
      throw new CheckFailed(`asked for a consistency proof ${trusted.size} → ${cp.size}, answered ${answer.first} → ${answer.second}`);
    }
    await verifyConsistency(trusted.size, trusted.root, cp.size, cp.root, parseProof("consistency proof", answer.proof));
  } catch (e) {
    if (!(e instanceof CheckFailed)) throw e;
    return { status: "fail", message: `not consistent with the head this browser trusted (size ${trusted.size}): ${e.message}` };
  }
  settings.setTrustedNote(key.text, cp.note);
  return {
    status: "ok",
    message: `consistency proof from the head this browser trusted (size ${trusted.size}) to size ${cp.size} verified in this browser; size ${cp.size} is now the trusted head`,
  };
}

/**
 * Proves entry `index` with leaf hash `leafHashBytes` into the verified
 * checkpoint `cp` (fetching the proof at exactly that tree size).
 */
export async function proveEntry(index, leafHashBytes, cp, what = `entry ${index}`) {
  const p = await getJson(`/v1/proofs/inclusion?index=${index}&tree_size=${cp.size}`);
  if (p.index !== index || p.tree_size !== cp.size) {
    throw new CheckFailed(`asked for the proof of ${what} at size ${cp.size}, answered entry ${p.index} at size ${p.tree_size}`);
  }
  if (p.leaf_hash !== toHex(leafHashBytes)) {
    throw new CheckFailed(`the inclusion proof answered for ${what} is of another leaf hash`);
  }
  const proof = parseProof(`inclusion proof of ${what}`, p.proof);
  await verifyInclusion(index, cp.size, leafHashBytes, proof, cp.root, what, `the verified root (size ${cp.size})`);
  return proof.length;
}

/** An entry as served, with its leaf bytes re-hashed: {entry, leaf, leafHash, hashOk}. */
export async function fetchEntry(index) {
  const entry = await getJson(`/v1/entries/${index}`);
  return checkServedEntry(entry);
}

export async function checkServedEntry(entry) {
  const leaf = b64decode(`entry ${entry.index} leaf`, entry.leaf);
  const lh = await leafHash(leaf);
  let stated = null;
  try {
    stated = parseHash("leaf_hash", entry.leaf_hash);
  } catch {
    stated = null;
  }
  return { entry, leaf, leafHash: lh, hashOk: stated !== null && toHex(stated) === toHex(lh) };
}
