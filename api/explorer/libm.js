// exp, log and pow, correctly rounded, for the statistics (stats.js).
//
// Why not Math.exp, Math.log and Math.pow: the ledger's statistics call
// the C library's exp, log and pow (Rust's f64 methods and Python's
// `math` both reach glibc's), and the browser's Math functions are
// other implementations that differ from glibc in the last bit for about
// one argument in ten. glibc's are within about 0.52 ulp, so they return
// the correctly rounded result for all but roughly one argument in a
// thousand. Computing the correctly rounded result here therefore agrees
// with the server's bits far more often than the browser's own functions.
// It is still not a guarantee: where glibc rounds the other way, a
// recomputed interval can differ from the served one in its last bits, and
// stats.js says so rather than calling that a match.
//
// How: the argument is converted exactly to a binary fixed-point BigInt
// with P fractional bits, the function evaluated by series to about P
// bits, and the result rounded once to the nearest double (ties to even,
// subnormals and overflow handled). With P = 200 the result is wrong only
// if the exact value lies within 2^-140 or so of a rounding boundary.

const P = 200n;
const ONE = 1n << P;

// The double `x` (finite, non-zero) as sign, integer mantissa and exponent: x = ±m·2^e.
function decompose(x) {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const biased = (hi >>> 20) & 0x7ff;
  let m = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let e;
  if (biased === 0) {
    e = -1074;
  } else {
    m |= 1n << 52n;
    e = biased - 1075;
  }
  return { negative: hi >>> 31 === 1, m, e };
}

function bitLength(v) {
  return v === 0n ? 0 : v.toString(2).length;
}

/** The double nearest to V·2^e for a BigInt V ≥ 0 (ties to even). */
function roundToDouble(v, e) {
  if (v === 0n) return 0;
  const bl = bitLength(v);
  if (bl - 1 + e > 1023) return Infinity;
  // Keep 53 significant bits, but no bit below 2^-1074 (the subnormals).
  const shift = Math.max(bl - 53, -1074 - e);
  let m;
  if (shift <= 0) {
    m = v;
    return Number(m) * 2 ** e;
  }
  const s = BigInt(shift);
  m = v >> s;
  const rem = v - (m << s);
  const half = 1n << (s - 1n);
  if (rem > half || (rem === half && (m & 1n) === 1n)) m += 1n;
  // m ≤ 2^53 and shift + e ≥ -1074: the product is exact, or overflows to Infinity.
  return Number(m) * 2 ** (shift + e);
}

// A double as a fixed-point BigInt with P fractional bits (truncated toward zero).
function toFixed(x) {
  if (x === 0) return 0n;
  const { negative, m, e } = decompose(x);
  const s = BigInt(e) + P;
  const v = s >= 0n ? m << s : m >> -s;
  return negative ? -v : v;
}

function fromFixed(v) {
  return v < 0n ? -roundToDouble(-v, -Number(P)) : roundToDouble(v, -Number(P));
}

// ln 2 = 2·atanh(1/3), with 32 guard bits.
const LN2 = (() => {
  const G = 32n;
  const one = 1n << (P + G);
  let sum = 0n;
  let pow3 = 3n;
  for (let k = 0n; ; k++) {
    const t = one / ((2n * k + 1n) * pow3);
    if (t === 0n) break;
    sum += t;
    pow3 *= 9n;
  }
  return (2n * sum) >> G;
})();

// exp of a fixed-point argument, as (mantissa V, exponent e) with value V·2^e.
function expFixed(x) {
  // x = k·ln2 + r with |r| ≤ ln2/2, then exp(r) by its Taylor series.
  const k = (x >= 0n ? x + LN2 / 2n : x - LN2 / 2n) / LN2;
  const r = x - k * LN2;
  let sum = ONE;
  let term = ONE;
  for (let n = 1n; ; n++) {
    term = (term * r) / (n * ONE);
    if (term === 0n) break;
    sum += term;
  }
  return [sum, Number(k) - Number(P)];
}

/** e^x, correctly rounded (see the module's doc). */
export function exp(x) {
  if (Number.isNaN(x)) return NaN;
  if (x === Infinity) return Infinity;
  if (x === -Infinity) return 0;
  if (x > 710) return Infinity;
  if (x < -746) return 0;
  const [v, e] = expFixed(toFixed(x));
  return roundToDouble(v, e);
}

// ln of a positive finite double, as a fixed-point BigInt.
function logFixed(x) {
  const { m, e } = decompose(x);
  // x = f·2^E with f in [1/√2, √2).
  const bl = bitLength(m);
  let E = BigInt(e + bl - 1);
  let f = m << (P - BigInt(bl - 1));
  if (f * f > 2n * ONE * ONE) {
    f >>= 1n;
    E += 1n;
  }
  // ln f = 2·atanh(t), t = (f − 1)/(f + 1), |t| < 0.172.
  const t = ((f - ONE) * ONE) / (f + ONE);
  const t2 = (t * t) / ONE;
  let acc = 0n;
  let term = t;
  for (let k = 0n; term !== 0n; k++) {
    acc += term / (2n * k + 1n);
    term = (term * t2) / ONE;
  }
  return E * LN2 + 2n * acc;
}

/** ln x, correctly rounded (see the module's doc). */
export function log(x) {
  if (Number.isNaN(x) || x < 0) return NaN;
  if (x === 0) return -Infinity;
  if (x === Infinity) return Infinity;
  return fromFixed(logFixed(x));
}

/**
 * x^y, correctly rounded, for x ≥ 0 (the statistics need only pow(d, 1.5)
 * with d > 0; a negative base answers NaN here, unlike C's pow for integer y).
 */
export function pow(x, y) {
  if (Number.isNaN(x) || Number.isNaN(y) || x < 0) return NaN;
  if (y === 0 || x === 1) return 1;
  if (x === 0) return y > 0 ? 0 : Infinity;
  if (!Number.isFinite(x) || !Number.isFinite(y)) return Math.pow(x, y);
  // y·ln x in fixed point: y = ±m·2^e exactly.
  const l = logFixed(x);
  const { negative, m, e } = decompose(y);
  let prod = l * m;
  prod = e >= 0 ? prod << BigInt(e) : prod >> BigInt(-e);
  if (negative) prod = -prod;
  if (prod > 710n * ONE) return Infinity;
  if (prod < -746n * ONE) return 0;
  const [v, ex] = expFixed(prod);
  return roundToDouble(v, ex);
}
