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
// pinned key, then proven consistent with the trusted one.

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

/** An error answer of the server (problem+json), or a failed request. */
export class ApiError extends Error {
  constructor(path, status, code, detail) {
    super(`${path}: ${status ? `${status} ` : ""}${code}${detail ? ` (${detail})` : ""}`);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
  }
}

async function request(path) {
  const headers = {};
  const token = settings.token();
  if (token) headers.Authorization = `Bearer ${token}`;
  // A 503 carries Retry-After (the server is starting or busy): wait and
  // try again a few times, at most a few seconds in all.
  for (let attempt = 0; ; attempt++) {
    let resp;
    try {
      resp = await fetch(path, { headers, cache: "no-store" });
    } catch (e) {
      throw new ApiError(path, 0, "network error", e.message);
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
        code = doc.code ?? code;
        detail = doc.detail ?? "";
      } catch {
        /* not problem+json */
      }
      throw new ApiError(path, resp.status, code, detail);
    }
    return resp;
  }
}

export async function getJson(path) {
  return (await request(path)).json();
}

export async function getText(path) {
  return (await request(path)).text();
}

/** The pinned key, parsed; null when none is pinned. Throws when the pinned text is not a key. */
export async function pinnedKey() {
  const text = settings.keyText();
  return text ? parseVerifierKey(text) : null;
}

/**
 * Fetches `/checkpoint` and verifies it. Returns
 * {key, checkpoint (verified, or null), served (unverified size and root),
 *  signature: {status, message}, consistency: {status, message}}.
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
  const out = { key: null, checkpoint: null, served, note, signature: null, consistency: null };
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
  out.checkpoint = cp;
  out.signature = { status: "ok", message: `checkpoint signature verified in this browser with the pinned key ${key.text}` };
  out.consistency = await checkConsistency(key, cp);
  return out;
}

// Compares a verified checkpoint with the one this browser trusted last,
// and trusts it once it is proven to extend it.
async function checkConsistency(key, cp) {
  const stored = settings.trustedNote(key.text);
  let trusted = null;
  if (stored) {
    try {
      trusted = await openCheckpoint(stored, key, "trusted checkpoint");
    } catch {
      trusted = null; // not this key's (or damaged): start again from this one
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
