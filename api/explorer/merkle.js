// RFC 6962 / RFC 9162 hashing and proofs (docs/FORMAT.md §1–2), and the
// byte helpers every other module uses.
//
// A port of clients/python/src/evidence_ledger/merkle.py: leaf hash
// SHA-256(0x00 ‖ leaf), interior node SHA-256(0x01 ‖ left ‖ right),
// inclusion proofs nearest sibling first, consistency proofs in SUBPROOF
// order. SHA-256 is WebCrypto's (`crypto.subtle.digest`), so every hash
// is asynchronous. A proof binds a leaf hash, an index and a root, not
// always the tree size: callers verify against a (size, root) pair taken
// from one signed checkpoint. Nothing here fetches anything.

import { blake3 } from "./blake3.js";

/** A check that did not pass; `message` names what failed, for a person. */
export class CheckFailed extends Error {
  constructor(message) {
    super(message);
    this.name = "CheckFailed";
  }
}

// --- bytes -------------------------------------------------------------------

const HEX = "0123456789abcdef";

export function toHex(bytes) {
  let s = "";
  for (const b of bytes) s += HEX[b >> 4] + HEX[b & 15];
  return s;
}

/** 64 lower-case hex digits as 32 bytes; `CheckFailed` naming `what` otherwise. */
export function parseHash(what, text) {
  if (typeof text !== "string" || !/^[0-9a-f]{64}$/.test(text)) {
    throw new CheckFailed(`${what} is not a hash (64 lower-case hex digits)`);
  }
  const out = new Uint8Array(32);
  for (let i = 0; i < 32; i++) out[i] = parseInt(text.slice(2 * i, 2 * i + 2), 16);
  return out;
}

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

export function b64encode(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    s += B64[(n >> 18) & 63] + B64[(n >> 12) & 63];
    s += i + 1 < bytes.length ? B64[(n >> 6) & 63] : "=";
    s += i + 2 < bytes.length ? B64[n & 63] : "=";
  }
  return s;
}

/**
 * Standard base64 with padding, in its one canonical encoding (the ledger
 * refuses any other, docs/FORMAT.md §6); `CheckFailed` naming `what` otherwise.
 */
export function b64decode(what, text) {
  if (typeof text !== "string" || text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) {
    throw new CheckFailed(`${what} is not standard base64`);
  }
  const pad = text.endsWith("==") ? 2 : text.endsWith("=") ? 1 : 0;
  const out = new Uint8Array((text.length / 4) * 3 - pad);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    let n = 0;
    for (let j = 0; j < 4; j++) {
      const c = text[i + j];
      n = (n << 6) | (c === "=" ? 0 : B64.indexOf(c));
    }
    if (o < out.length) out[o++] = (n >> 16) & 255;
    if (o < out.length) out[o++] = (n >> 8) & 255;
    if (o < out.length) out[o++] = n & 255;
  }
  if (b64encode(out) !== text) throw new CheckFailed(`${what} is not canonical base64`);
  return out;
}

export function utf8(text) {
  return new TextEncoder().encode(text);
}

export function concat(...parts) {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

export function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

// --- hashes ------------------------------------------------------------------

export async function sha256(bytes) {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

/** RFC 6962 leaf hash. */
export function leafHash(leaf) {
  return sha256(concat(Uint8Array.of(0), leaf));
}

/** RFC 6962 interior node hash. */
export function nodeHash(left, right) {
  return sha256(concat(Uint8Array.of(1), left, right));
}

/** The hash-chain value of an entry: SHA-256(prev_chain ‖ BLAKE3(leaf)) (FORMAT.md §1). */
export function chainHash(prev, leaf) {
  return sha256(concat(prev, blake3(leaf)));
}

/** The longest proof a tree of up to 2^64 leaves can need. */
const MAX_PROOF_LEN = 128;

/**
 * The root an inclusion proof leads to (RFC 9162 §2.1.3.2). Sizes and
 * indices are Numbers: exact up to 2^53 entries, far beyond any log here.
 * Throws `CheckFailed` when the proof has the wrong length for the tree.
 */
export async function rootFromInclusion(index, size, leaf, proof) {
  if (!(index >= 0 && index < size)) {
    throw new CheckFailed(`entry ${index} is not below the tree size ${size}`);
  }
  if (proof.length > MAX_PROOF_LEN) throw new CheckFailed("the inclusion proof is longer than any tree needs");
  // fn and sn as BigInt: JavaScript's bit operators are 32-bit.
  let fn = BigInt(index);
  let sn = BigInt(size - 1);
  let r = leaf;
  for (const p of proof) {
    if (sn === 0n) throw new CheckFailed("the inclusion proof is longer than the tree needs");
    if ((fn & 1n) === 1n || fn === sn) {
      r = await nodeHash(p, r);
      if ((fn & 1n) === 0n) {
        while (fn !== 0n && (fn & 1n) === 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      r = await nodeHash(r, p);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new CheckFailed("the inclusion proof is shorter than the tree needs");
  return r;
}

/**
 * Throws `CheckFailed` unless `proof` puts the leaf hash `leaf` at `index`
 * in the tree (`size`, `root`). `what` names the entry and `rootName` the
 * root in the message.
 */
export async function verifyInclusion(index, size, leaf, proof, root, what = `entry ${index}`, rootName = `the root of size ${size}`) {
  let got;
  try {
    got = await rootFromInclusion(index, size, leaf, proof);
  } catch (e) {
    if (e instanceof CheckFailed) throw new CheckFailed(`inclusion proof of ${what}: ${e.message}`);
    throw e;
  }
  if (!equalBytes(got, root)) {
    throw new CheckFailed(`inclusion proof of ${what} does not reach ${rootName}`);
  }
}

/**
 * Throws `CheckFailed` unless `proof` shows (oldSize, oldRoot) is a prefix
 * of (newSize, newRoot) (RFC 9162 §2.1.4.2).
 */
export async function verifyConsistency(oldSize, oldRoot, newSize, newRoot, proof) {
  const what = `consistency proof from size ${oldSize} to ${newSize}`;
  if (!(oldSize >= 0 && oldSize <= newSize)) throw new CheckFailed(`${what}: the old size exceeds the new size`);
  if (proof.length > MAX_PROOF_LEN) throw new CheckFailed(`${what} is longer than any tree needs`);
  if (oldSize === 0) {
    if (proof.length !== 0) throw new CheckFailed(`${what}: a proof from size 0 is empty`);
    return;
  }
  if (oldSize === newSize) {
    if (proof.length !== 0 || !equalBytes(oldRoot, newRoot)) {
      throw new CheckFailed(`two different roots for size ${oldSize}`);
    }
    return;
  }
  const path = [...proof];
  let fn = BigInt(oldSize - 1);
  let sn = BigInt(newSize - 1);
  if ((BigInt(oldSize) & BigInt(oldSize - 1)) === 0n) {
    // oldSize is a power of two: the old root is itself a node of the new tree.
    path.unshift(oldRoot);
  }
  if (path.length === 0) throw new CheckFailed(`${what} is empty`);
  while ((fn & 1n) === 1n) {
    fn >>= 1n;
    sn >>= 1n;
  }
  let fr = path[0];
  let sr = path[0];
  for (const c of path.slice(1)) {
    if (sn === 0n) throw new CheckFailed(`${what} is longer than the trees need`);
    if ((fn & 1n) === 1n || fn === sn) {
      fr = await nodeHash(c, fr);
      sr = await nodeHash(c, sr);
      if ((fn & 1n) === 0n) {
        while (fn !== 0n && (fn & 1n) === 0n) {
          fn >>= 1n;
          sn >>= 1n;
        }
      }
    } else {
      sr = await nodeHash(sr, c);
    }
    fn >>= 1n;
    sn >>= 1n;
  }
  if (sn !== 0n) throw new CheckFailed(`${what} is shorter than the trees need`);
  if (!equalBytes(fr, oldRoot)) throw new CheckFailed(`${what} does not lead to the trusted root of size ${oldSize}`);
  if (!equalBytes(sr, newRoot)) throw new CheckFailed(`${what} does not lead to the signed root of size ${newSize}`);
}

/** A proof as served: a list of hex hashes. */
export function parseProof(what, items) {
  if (!Array.isArray(items)) throw new CheckFailed(`${what} is not a list of hashes`);
  return items.map((h, i) => parseHash(`${what}[${i}]`, h));
}

/** The RFC 6962 root of a list of leaf hashes (for the tests and small trees). */
export async function rootOf(leafHashes) {
  if (leafHashes.length === 0) return sha256(new Uint8Array(0));
  if (leafHashes.length === 1) return leafHashes[0];
  let k = 1;
  while (k * 2 < leafHashes.length) k *= 2;
  return nodeHash(await rootOf(leafHashes.slice(0, k)), await rootOf(leafHashes.slice(k)));
}
