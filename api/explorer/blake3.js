// BLAKE3 (https://github.com/BLAKE3-team/BLAKE3-specs), unkeyed hash mode.
//
// The ledger uses BLAKE3 in two places the explorer checks: the content
// digest in the hash chain (docs/FORMAT.md §1: chain = SHA-256(prev ‖
// BLAKE3(leaf))) and the bootstrap seed of a task class
// (docs/PROJECTIONS.md: BLAKE3("evidence-ledger/v1 bootstrap\n" ‖ name),
// first 8 bytes little-endian). WebCrypto has no BLAKE3, so it is written
// here, after the specification's reference implementation: one chunk state
// at a time, a stack of chaining values merged as chunks complete, the root
// flag on the last compression. Any input length works (the tree mode is
// complete); the explorer only hashes short inputs. It leaves out the keyed
// and key-derivation modes, which the explorer never needs.

const IV = new Uint32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
  0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
]);
const MSG_PERMUTATION = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8];

const CHUNK_START = 1;
const CHUNK_END = 2;
const PARENT = 4;
const ROOT = 8;

const BLOCK_LEN = 64;
const CHUNK_LEN = 1024;

function rotr(x, n) {
  return (x >>> n) | (x << (32 - n));
}

// The quarter-round on state words a, b, c, d with message words mx, my.
function g(s, a, b, c, d, mx, my) {
  s[a] = (s[a] + s[b] + mx) | 0;
  s[d] = rotr(s[d] ^ s[a], 16);
  s[c] = (s[c] + s[d]) | 0;
  s[b] = rotr(s[b] ^ s[c], 12);
  s[a] = (s[a] + s[b] + my) | 0;
  s[d] = rotr(s[d] ^ s[a], 8);
  s[c] = (s[c] + s[d]) | 0;
  s[b] = rotr(s[b] ^ s[c], 7);
}

/**
 * The compression function: chaining value `cv` (8 words), message `block`
 * (16 words), 64-bit `counter` as a Number (exact below 2^53), the number of
 * message bytes `blockLen` and the domain `flags`. Returns all 16 output words.
 */
function compress(cv, block, counter, blockLen, flags) {
  const s = new Uint32Array(16);
  s.set(cv, 0);
  s.set(IV.subarray(0, 4), 8);
  s[12] = counter >>> 0;
  s[13] = Math.floor(counter / 0x100000000) >>> 0;
  s[14] = blockLen;
  s[15] = flags;
  let m = Uint32Array.from(block);
  for (let round = 0; round < 7; round++) {
    g(s, 0, 4, 8, 12, m[0], m[1]);
    g(s, 1, 5, 9, 13, m[2], m[3]);
    g(s, 2, 6, 10, 14, m[4], m[5]);
    g(s, 3, 7, 11, 15, m[6], m[7]);
    g(s, 0, 5, 10, 15, m[8], m[9]);
    g(s, 1, 6, 11, 12, m[10], m[11]);
    g(s, 2, 7, 8, 13, m[12], m[13]);
    g(s, 3, 4, 9, 14, m[14], m[15]);
    if (round < 6) {
      const p = new Uint32Array(16);
      for (let i = 0; i < 16; i++) p[i] = m[MSG_PERMUTATION[i]];
      m = p;
    }
  }
  for (let i = 0; i < 8; i++) {
    s[i] ^= s[i + 8];
    s[i + 8] ^= cv[i];
  }
  return s;
}

// Up to 64 bytes as 16 little-endian words, zero-padded.
function blockWords(bytes, start, len) {
  const w = new Uint32Array(16);
  for (let i = 0; i < len; i++) {
    w[i >> 2] |= bytes[start + i] << (8 * (i & 3));
  }
  return w;
}

// What is still to be compressed for a node: enough to produce its
// chaining value, or, with the root flag, any number of output bytes.
class Output {
  constructor(cv, block, counter, blockLen, flags) {
    this.cv = cv;
    this.block = block;
    this.counter = counter;
    this.blockLen = blockLen;
    this.flags = flags;
  }

  chainingValue() {
    return compress(this.cv, this.block, this.counter, this.blockLen, this.flags).slice(0, 8);
  }

  rootBytes(outLen) {
    const out = new Uint8Array(outLen);
    let pos = 0;
    for (let n = 0; pos < outLen; n++) {
      const words = compress(this.cv, this.block, n, this.blockLen, this.flags | ROOT);
      for (let i = 0; i < 64 && pos < outLen; i++, pos++) {
        out[pos] = (words[i >> 2] >>> (8 * (i & 3))) & 0xff;
      }
    }
    return out;
  }
}

function parentOutput(left, right) {
  const block = new Uint32Array(16);
  block.set(left, 0);
  block.set(right, 8);
  return new Output(IV, block, 0, BLOCK_LEN, PARENT);
}

/**
 * BLAKE3 of `input` (a Uint8Array), `outLen` bytes (default 32).
 */
export function blake3(input, outLen = 32) {
  const stack = []; // chaining values of completed subtrees, left to right
  let chunkCounter = 0;
  const chunks = Math.max(1, Math.ceil(input.length / CHUNK_LEN));
  let last = null;
  for (let c = 0; c < chunks; c++) {
    const start = c * CHUNK_LEN;
    const end = Math.min(start + CHUNK_LEN, input.length);
    // Compress every block of the chunk but the last, which becomes the
    // chunk's output (it may be the root).
    let cv = IV;
    const blocks = Math.max(1, Math.ceil((end - start) / BLOCK_LEN));
    for (let b = 0; b < blocks - 1; b++) {
      const flags = b === 0 ? CHUNK_START : 0;
      cv = compress(cv, blockWords(input, start + b * BLOCK_LEN, BLOCK_LEN), chunkCounter, BLOCK_LEN, flags).slice(0, 8);
    }
    const lastStart = start + (blocks - 1) * BLOCK_LEN;
    const lastLen = end - lastStart;
    const flags = (blocks === 1 ? CHUNK_START : 0) | CHUNK_END;
    const out = new Output(cv, blockWords(input, lastStart, lastLen), chunkCounter, lastLen, flags);
    chunkCounter++;
    if (c < chunks - 1) {
      // Push this chunk's chaining value, merging completed subtrees: after
      // `chunkCounter` chunks there is one subtree per 1 bit of the count.
      let cvNew = out.chainingValue();
      let total = chunkCounter;
      while ((total & 1) === 0) {
        cvNew = parentOutput(stack.pop(), cvNew).chainingValue();
        total /= 2;
      }
      stack.push(cvNew);
    } else {
      last = out;
    }
  }
  // Merge the last chunk with the stack from the right; the final parent is the root.
  let output = last;
  while (stack.length > 0) {
    output = parentOutput(stack.pop(), output.chainingValue());
  }
  return output.rootBytes(outLen);
}
