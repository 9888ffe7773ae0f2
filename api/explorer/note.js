// Note verifier keys, C2SP signed notes and tlog checkpoints (docs/FORMAT.md §9).
//
// A port of clients/python/src/evidence_ledger/note.py, verifying with
// WebCrypto's Ed25519 (Chromium 137 and later; any browser with
// `crypto.subtle` and Ed25519 in a secure context). A verifier key is
// `<name>+<key hash>+base64(0x01 ‖ 32-byte public key)`, its key hash the
// first 4 bytes of SHA-256(name ‖ "\n" ‖ 0x01 ‖ public key). A note is text
// ending in "\n", a blank line, and lines `— <name> base64(key hash ‖
// signature)`. A checkpoint is the note text `<origin>\n<size>\n<base64
// root>\n`, the origin being the key's name. What this module leaves out:
// witness cosignatures (type 0x04) are ignored like any other key's line,
// so a witness policy is not checked here.

import { CheckFailed, b64decode, concat, equalBytes, sha256, toHex, utf8 } from "./merkle.js";

const SIG_PREFIX = "\u2014 ";

function isValidKeyName(name) {
  return name.length > 0 && !name.includes("+") && !/\s/.test(name);
}

/** A parsed note verifier key: `{text, name, hash (Number), publicKey, cryptoKey}`. */
export async function parseVerifierKey(text) {
  text = String(text).trim();
  const first = text.indexOf("+");
  const second = first < 0 ? -1 : text.indexOf("+", first + 1);
  if (second < 0) throw new CheckFailed("a verifier key is name+hash+base64 key");
  const name = text.slice(0, first);
  const hashHex = text.slice(first + 1, second);
  const keyB64 = text.slice(second + 1);
  if (!isValidKeyName(name)) throw new CheckFailed(`\`${name}\` is not a valid key name`);
  if (!/^[0-9a-f]{8}$/.test(hashHex)) throw new CheckFailed("the key hash must be 8 lower-case hex digits");
  const typed = b64decode("the verifier key", keyB64);
  if (typed.length !== 33 || typed[0] !== 1) throw new CheckFailed("the verifier key must be an Ed25519 (type 0x01) key of 32 bytes");
  const h = await sha256(concat(utf8(name), utf8("\n"), typed));
  if (toHex(h.subarray(0, 4)) !== hashHex) throw new CheckFailed("the key hash does not match the name and key");
  const publicKey = typed.subarray(1);
  let cryptoKey;
  try {
    cryptoKey = await crypto.subtle.importKey("raw", publicKey, { name: "Ed25519" }, false, ["verify"]);
  } catch (e) {
    throw new CheckFailed(`this browser cannot import an Ed25519 key (WebCrypto Ed25519 needs Chromium 137 or later): ${e.message}`);
  }
  return { text, name, hash: parseInt(hashHex, 16), publicKey, cryptoKey };
}

/** Ed25519 verification of `signature` over `message` with a WebCrypto key. */
export async function ed25519Verify(cryptoKey, message, signature) {
  if (signature.length !== 64) return false;
  return crypto.subtle.verify({ name: "Ed25519" }, cryptoKey, signature, message);
}

/** Splits a signed note into its text (bytes) and signature lines; verifies nothing. */
export function parseNote(note, what = "checkpoint") {
  if (typeof note !== "string") throw new CheckFailed(`${what} is not text`);
  for (const ch of note) {
    if (ch < " " && ch !== "\n") throw new CheckFailed(`${what}: a signed note holds no control characters but newlines`);
  }
  const split = note.lastIndexOf("\n\n");
  if (split < 0) throw new CheckFailed(`${what}: no blank line before the signatures`);
  const text = note.slice(0, split + 1);
  const sigs = note.slice(split + 2);
  if (!sigs || !sigs.endsWith("\n")) throw new CheckFailed(`${what}: the signature block ends in a newline`);
  const signatures = [];
  for (const line of sigs.slice(0, -1).split("\n")) {
    if (!line.startsWith(SIG_PREFIX)) throw new CheckFailed(`${what}: a signature line starts with an em dash and a space`);
    const rest = line.slice(SIG_PREFIX.length);
    const sp = rest.indexOf(" ");
    const name = sp < 0 ? rest : rest.slice(0, sp);
    const sigB64 = sp < 0 ? "" : rest.slice(sp + 1);
    let raw;
    try {
      raw = b64decode("signature", sigB64);
    } catch {
      throw new CheckFailed(`${what}: a signature is not base64`);
    }
    if (!isValidKeyName(name) || raw.length < 5) throw new CheckFailed(`${what}: malformed signature line`);
    const hash = ((raw[0] << 24) | (raw[1] << 16) | (raw[2] << 8) | raw[3]) >>> 0;
    signatures.push({ name, hash, signature: raw.subarray(4) });
    if (signatures.length > 100) throw new CheckFailed(`${what}: more than 100 signatures`);
  }
  return { text: utf8(text), textString: text, signatures };
}

/**
 * The text of a note signed by `key` (a parsed verifier key). Throws
 * `CheckFailed` when no line of that key's name and hash is there, or when
 * one is and does not verify (the note is refused whole then, as Go's
 * `note.Open` does).
 */
export async function openNote(note, key, what = "checkpoint") {
  const parsed = parseNote(note, what);
  let found = false;
  for (const sig of parsed.signatures) {
    if (sig.name === key.name && sig.hash === key.hash) {
      if (!(await ed25519Verify(key.cryptoKey, parsed.text, sig.signature))) {
        throw new CheckFailed(`${what} signature invalid for key ${key.text}`);
      }
      found = true;
    }
  }
  if (!found) throw new CheckFailed(`${what} carries no signature by the pinned key ${key.text}`);
  return parsed.textString;
}

/** The origin, size and root (bytes) of a C2SP tlog-checkpoint body. */
export function parseCheckpointBody(text, what = "checkpoint") {
  const lines = text.split("\n");
  if (lines.length < 4 || lines[lines.length - 1] !== "") {
    throw new CheckFailed(`${what}: a checkpoint body is origin, size and root lines`);
  }
  const [origin, sizeText, rootText] = lines;
  if (!origin) throw new CheckFailed(`${what}: empty origin`);
  if (!/^(0|[1-9][0-9]*)$/.test(sizeText)) throw new CheckFailed(`${what}: the size is a decimal number without leading zeros`);
  const size = Number(sizeText);
  if (!Number.isSafeInteger(size)) throw new CheckFailed(`${what}: the size is beyond what this page can count exactly`);
  let root;
  try {
    root = b64decode("root", rootText);
  } catch {
    throw new CheckFailed(`${what}: the root is not base64`);
  }
  if (root.length !== 32) throw new CheckFailed(`${what}: the root is not 32 bytes`);
  if (lines.slice(3, -1).some((l) => l === "")) throw new CheckFailed(`${what}: empty extension line`);
  return { origin, size, root };
}

/**
 * A checkpoint verified with `key`: `{origin, size, root, rootHex, note}`.
 * Checks the signature first, then that the body is a checkpoint whose
 * origin is the key's name.
 */
export async function openCheckpoint(note, key, what = "checkpoint") {
  const text = await openNote(note, key, what);
  const cp = parseCheckpointBody(text, what);
  if (cp.origin !== key.name) throw new CheckFailed(`${what}: origin \`${cp.origin}\` is not the pinned key's name \`${key.name}\``);
  return { ...cp, rootHex: toHex(cp.root), note };
}

/** Whether two verified checkpoints name the same tree. */
export function sameTree(a, b) {
  return a.size === b.size && equalBytes(a.root, b.root);
}
