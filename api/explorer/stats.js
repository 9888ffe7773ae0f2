// The ledger's statistics (docs/PROJECTIONS.md, "Statistics"), recomputed
// in the browser.
//
// A port of clients/python/src/evidence_ledger/stats.py, itself a port of
// projections/src/stats.rs and the parts of statrs 0.19 it uses
// (`Normal::cdf` and `Normal::inverse_cdf` through statrs' `erfc` and
// `erfc_inv`), operation for operation:
//
// - `wilson`: the Wilson score interval;
// - `SplitMix64` and `bca`: the BCa bootstrap of the mean, drawn with
//   SplitMix64 from the task class's fixed seed (`bootstrapSeed`, BLAKE3);
// - `scoreStats`: count, mean, BCa interval, passes, pass rate, Wilson.
//
// JavaScript numbers are IEEE 754 doubles, and every sum, product and
// quotient here is done in the order the Rust code does it, so those are
// the same bits. SplitMix64 is 64-bit integer arithmetic, done here on
// 32-bit halves. The exceptions are exp, log and pow (libm.js): the server
// takes them from glibc, the browser cannot, so they are computed
// correctly rounded, which is what glibc returns for all but about one
// argument in a thousand. Count, mean, passes and pass rate involve none of
// them and are always bit for bit; the intervals are bit for bit unless
// glibc rounded one of its few calls the other way (see `compareStats`).

import { blake3 } from "./blake3.js";
import { exp, log, pow } from "./libm.js";
import { utf8 } from "./merkle.js";

const SQRT_2 = Math.sqrt(2.0);

// statrs' coefficient tables, each written as the shortest decimal of its
// double (the same doubles as the longer literals in statrs).
const ERF_IMPL_AN = [0.0033791670955125737, -0.0007369565304816795, -0.3747323373929196, 0.08174424487335873, -0.04210893199365486, 0.007016570951209575, -0.004950912559824351, 0.0008716465990379225];
const ERF_IMPL_AD = [1.0, -0.21808821808792464, 0.4125429727254421, -0.08418911478731067, 0.06553388564002416, -0.012001960445494177, 0.00408165558926174, -0.0006159007215577697];
const ERF_IMPL_BN = [-0.03617903907182625, 0.2922518834448827, 0.2814470417976045, 0.12561020886276694, 0.027413502826893053, 0.0025083967216806575];
const ERF_IMPL_BD = [1.0, 1.8545005897903486, 1.4357580303783142, 0.5828276587530365, 0.12481047693294975, 0.011372417654635328];
const ERF_IMPL_CN = [-0.03978768926111369, 0.1531652124678783, 0.19126029560093624, 0.10276327061989304, 0.029637090615738836, 0.004609348678027549, 0.0003076078203486802];
const ERF_IMPL_CD = [1.0, 1.955200729876277, 1.6476231719938486, 0.7682386070221262, 0.20979318593650978, 0.031956931689991336, 0.0021336316089578537];
const ERF_IMPL_DN = [-0.030083856055794972, 0.05385788298444545, 0.07262115416519142, 0.036762846988804936, 0.009646290155725275, 0.0013345348007529107, 7.780875997825043e-05];
const ERF_IMPL_DD = [1.0, 1.7596709814716753, 1.3288357143796112, 0.5525285965087576, 0.13379305694133287, 0.017950964517628076, 0.0010471244001993736, -1.0664038182035734e-08];
const ERF_IMPL_EN = [-0.011790757013722784, 0.01426213209053881, 0.020223443590296084, 0.009306682999904321, 0.00213357802422066, 0.00025022987386460105, 1.2053491221958819e-05];
const ERF_IMPL_ED = [1.0, 1.5037622520362048, 0.9653977862044629, 0.3392652304767967, 0.06897406495415698, 0.007710602624917683, 0.0003714211015310693];
const ERF_IMPL_FN = [-0.005469547955387293, 0.004041902787317071, 0.005496336955316117, 0.002126164726039454, 0.0003949840144950839, 3.655654770644424e-05, 1.3548589710993232e-06];
const ERF_IMPL_FD = [1.0, 1.2101969777363077, 0.6209146682211439, 0.17303843066114277, 0.027655081377343203, 0.0024062597442430973, 8.918118172513365e-05, -4.655288362833827e-12];
const ERF_IMPL_GN = [-0.0027072253590577837, 0.00131875634250294, 0.0011992593326100233, 0.00027849619811344664, 2.6782298821833186e-05, 9.230436723150282e-07];
const ERF_IMPL_GD = [1.0, 0.8146328085431416, 0.26890166585629954, 0.044987721610304114, 0.0038175966332024847, 0.00013157189788859692, 4.048153596757641e-12];
const ERF_IMPL_HN = [-0.001099467206917422, 0.00040642544275042267, 0.0002744994894169007, 4.652937706466594e-05, 3.2095542539576746e-06, 7.782860181450209e-08];
const ERF_IMPL_HD = [1.0, 0.5881737106118461, 0.13936333128940975, 0.016632934041708368, 0.0010002392131023491, 2.4254837521587224e-05];
const ERF_IMPL_IN = [-0.0005690799360109496, 0.00016949854037376225, 5.184723545811009e-05, 3.8281931223192885e-06, 8.249899312818944e-08];
const ERF_IMPL_ID = [1.0, 0.33963725005113937, 0.04347264787031066, 0.002485493352246371, 5.356333053371529e-05, -1.1749094440545958e-13];
const ERF_IMPL_JN = [-0.00024131359948399134, 5.742249752025015e-05, 1.1599896292738377e-05, 5.817621344025938e-07, 8.539715550856736e-09];
const ERF_IMPL_JD = [1.0, 0.23304413829968784, 0.02041869405464403, 0.0007971856475643983, 1.1701928167017232e-05];
const ERF_IMPL_KN = [-0.00014667469927776036, 1.6266655211228053e-05, 2.6911624850916523e-06, 9.79584479468092e-08, 1.0199464762572346e-09];
const ERF_IMPL_KD = [1.0, 0.16590781294484722, 0.010336171619150588, 0.0002865930263738684, 2.9840157084090034e-06];
const ERF_IMPL_LN = [-5.839057976297718e-05, 4.125103251054962e-06, 4.3179092242025094e-07, 9.933651555900132e-09, 6.534805100201047e-11];
const ERF_IMPL_LD = [1.0, 0.10507708607203992, 0.004142784286754756, 7.263387546445238e-05, 4.778184710473988e-07];
const ERF_IMPL_MN = [-1.9645779760922958e-05, 1.572438876668007e-06, 5.439025111927009e-08, 3.174724923691177e-10];
const ERF_IMPL_MD = [1.0, 0.05280398924095763, 0.0009268760691517533, 5.410117232266303e-06, 5.350938458036424e-16];
const ERF_IMPL_NN = [-7.892247039787227e-06, 6.22088451660987e-07, 1.457284456768824e-08, 6.037155055427153e-11];
const ERF_IMPL_ND = [1.0, 0.03753288463562937, 0.0004679195359746253, 1.9384703927584565e-06];
const ERF_INV_IMPL_AN = [-0.0005087819496582806, -0.008368748197417368, 0.03348066254097446, -0.012692614766297404, -0.03656379714117627, 0.02198786811111689, 0.008226878746769157, -0.005387729650712429];
const ERF_INV_IMPL_AD = [1.0, -0.9700050433032906, -1.5657455823417585, 1.5622155839842302, 0.662328840472003, -0.7122890234154284, -0.05273963823400997, 0.07952836873415717, -0.0023339375937419, 0.0008862163904564247];
const ERF_INV_IMPL_BN = [-0.20243350835593876, 0.10526468069939171, 8.3705032834312, 17.644729840837403, -18.851064805871424, -44.6382324441787, 17.445385985570866, 21.12946554483405, -3.6719225470772936];
const ERF_INV_IMPL_BD = [1.0, 6.242641248542475, 3.971343795334387, -28.66081804998, -20.14326346804852, 48.560921310873994, 10.826866735546016, -22.643693341313973, 1.7211476576120028];
const ERF_INV_IMPL_CN = [-0.1311027816799519, -0.16379404719331705, 0.11703015634199525, 0.38707973897260434, 0.3377855389120359, 0.14286953440815717, 0.029015791000532906, 0.0021455899538880526, -6.794655751811263e-07, 2.8522533178221704e-08, -6.81149956853777e-10];
const ERF_INV_IMPL_CD = [1.0, 3.4662540724256723, 5.381683457070069, 4.778465929458438, 2.5930192162362027, 0.848854343457902, 0.15226433829533179, 0.011059242293464892];
const ERF_INV_IMPL_DN = [-0.0350353787183178, -0.0022242652921344794, 0.018557330651423107, 0.009508047013259196, 0.0018712349281955923, 0.00015754461742496055, 4.60469890584318e-06, -2.304047769118826e-10, 2.6633922742578204e-12];
const ERF_INV_IMPL_DD = [1.0, 1.3653349817554064, 0.7620591645536234, 0.22009110576413124, 0.03415891436709477, 0.00263861676657016, 7.646752923027944e-05];
const ERF_INV_IMPL_EN = [-0.016743100507663373, -0.0011295143874558028, 0.001056288621524929, 0.00020938631748758808, 1.4962478375834237e-05, 4.4969678992770644e-07, 4.625961635228786e-09, -2.811287356288318e-14, 9.905570997331033e-17];
const ERF_INV_IMPL_ED = [1.0, 0.5914293448864175, 0.1381518657490833, 0.016074608709367652, 0.0009640118070051656, 2.7533547476472603e-05, 2.82243172016108e-07];
const ERF_INV_IMPL_FN = [-0.002497821279189813, -7.79190719229054e-06, 2.5472303741302746e-05, 1.6239777734251093e-06, 3.963410113048012e-08, 4.116328311909442e-10, 1.4559628671867504e-12, -1.1676501239718427e-18];
const ERF_INV_IMPL_FD = [1.0, 0.2071231122144225, 0.01694108381209759, 0.0006905382656226846, 1.4500735981823264e-05, 1.4443775662814415e-07, 5.097612765997785e-10];
const ERF_INV_IMPL_GN = [-0.0005390429110190785, -2.8398759004727723e-07, 8.994651148922914e-07, 2.2934585926592085e-08, 2.2556144486350015e-10, 9.478466275030226e-13, 1.3588013010892486e-15, -3.4889039339994887e-22];
const ERF_INV_IMPL_GD = [1.0, 0.08457462340018994, 0.002820929847262647, 4.682929219408942e-05, 3.999688121938621e-07, 1.6180929088790448e-09, 2.315586083102596e-12];

function polynomial(z, coeff) {
  let acc = 0.0;
  for (let i = coeff.length - 1; i >= 0; i--) acc = acc * z + coeff[i];
  return acc;
}

// statrs `erf_impl`; `inv` selects the complement.
function erfImpl(z, inv) {
  if (z < 0.0) {
    if (!inv) return -erfImpl(-z, false);
    if (z < -0.5) return 2.0 - erfImpl(-z, true);
    return 1.0 + erfImpl(-z, false);
  }
  let result;
  if (z < 0.5) {
    if (z < 1e-10) {
      result = z * 1.125 + z * 0.0033791670955125737;
    } else {
      result = z * 1.125 + (z * polynomial(z, ERF_IMPL_AN)) / polynomial(z, ERF_IMPL_AD);
    }
  } else if (z < 110.0) {
    let r;
    let b;
    if (z < 0.75) {
      r = polynomial(z - 0.5, ERF_IMPL_BN) / polynomial(z - 0.5, ERF_IMPL_BD);
      b = 0.3440242112;
    } else if (z < 1.25) {
      r = polynomial(z - 0.75, ERF_IMPL_CN) / polynomial(z - 0.75, ERF_IMPL_CD);
      b = 0.419990927;
    } else if (z < 2.25) {
      r = polynomial(z - 1.25, ERF_IMPL_DN) / polynomial(z - 1.25, ERF_IMPL_DD);
      b = 0.4898625016;
    } else if (z < 3.5) {
      r = polynomial(z - 2.25, ERF_IMPL_EN) / polynomial(z - 2.25, ERF_IMPL_ED);
      b = 0.5317370892;
    } else if (z < 5.25) {
      r = polynomial(z - 3.5, ERF_IMPL_FN) / polynomial(z - 3.5, ERF_IMPL_FD);
      b = 0.5489973426;
    } else if (z < 8.0) {
      r = polynomial(z - 5.25, ERF_IMPL_GN) / polynomial(z - 5.25, ERF_IMPL_GD);
      b = 0.5571740866;
    } else if (z < 11.5) {
      r = polynomial(z - 8.0, ERF_IMPL_HN) / polynomial(z - 8.0, ERF_IMPL_HD);
      b = 0.5609807968;
    } else if (z < 17.0) {
      r = polynomial(z - 11.5, ERF_IMPL_IN) / polynomial(z - 11.5, ERF_IMPL_ID);
      b = 0.5626493692;
    } else if (z < 24.0) {
      r = polynomial(z - 17.0, ERF_IMPL_JN) / polynomial(z - 17.0, ERF_IMPL_JD);
      b = 0.5634598136;
    } else if (z < 38.0) {
      r = polynomial(z - 24.0, ERF_IMPL_KN) / polynomial(z - 24.0, ERF_IMPL_KD);
      b = 0.5638477802;
    } else if (z < 60.0) {
      r = polynomial(z - 38.0, ERF_IMPL_LN) / polynomial(z - 38.0, ERF_IMPL_LD);
      b = 0.5640528202;
    } else if (z < 85.0) {
      r = polynomial(z - 60.0, ERF_IMPL_MN) / polynomial(z - 60.0, ERF_IMPL_MD);
      b = 0.5641309023;
    } else {
      r = polynomial(z - 85.0, ERF_IMPL_NN) / polynomial(z - 85.0, ERF_IMPL_ND);
      b = 0.5641584396;
    }
    const g = exp(-z * z) / z;
    result = g * b + g * r;
  } else {
    result = 0.0;
  }
  if (inv && z >= 0.5) return result;
  if (z >= 0.5 || inv) return 1.0 - result;
  return result;
}

/** statrs `erfc`. */
export function erfc(x) {
  if (Number.isNaN(x)) return NaN;
  if (x === Infinity) return 0.0;
  if (x === -Infinity) return 2.0;
  return erfImpl(x, true);
}

function erfInvImpl(p, q, s) {
  let result;
  if (p <= 0.5) {
    const y = 0.08913147449493408;
    const g = p * (p + 10.0);
    const r = polynomial(p, ERF_INV_IMPL_AN) / polynomial(p, ERF_INV_IMPL_AD);
    result = g * y + g * r;
  } else if (q >= 0.25) {
    const y = 2.249481201171875;
    const g = Math.sqrt(-2.0 * log(q));
    const xs = q - 0.25;
    const r = polynomial(xs, ERF_INV_IMPL_BN) / polynomial(xs, ERF_INV_IMPL_BD);
    result = g / (y + r);
  } else {
    const x = Math.sqrt(-log(q));
    let y;
    let xs;
    let n;
    let d;
    if (x < 3.0) {
      [y, xs, n, d] = [0.807220458984375, x - 1.125, ERF_INV_IMPL_CN, ERF_INV_IMPL_CD];
    } else if (x < 6.0) {
      [y, xs, n, d] = [0.9399557113647461, x - 3.0, ERF_INV_IMPL_DN, ERF_INV_IMPL_DD];
    } else if (x < 18.0) {
      [y, xs, n, d] = [0.9836282730102539, x - 6.0, ERF_INV_IMPL_EN, ERF_INV_IMPL_ED];
    } else if (x < 44.0) {
      [y, xs, n, d] = [0.9971456527709961, x - 18.0, ERF_INV_IMPL_FN, ERF_INV_IMPL_FD];
    } else {
      [y, xs, n, d] = [0.9994134902954102, x - 44.0, ERF_INV_IMPL_GN, ERF_INV_IMPL_GD];
    }
    const r = polynomial(xs, n) / polynomial(xs, d);
    result = y * x + r * x;
  }
  return s * result;
}

/** statrs `erfc_inv`. */
export function erfcInv(x) {
  if (x <= 0.0) return Infinity;
  if (x >= 2.0) return -Infinity;
  if (x > 1.0) return erfInvImpl(-1.0 + x, 2.0 - x, -1.0);
  return erfInvImpl(1.0 - x, x, 1.0);
}

/** statrs `Normal::standard().cdf(x)`. */
export function normalCdf(x) {
  return 0.5 * erfc((0.0 - x) / (1.0 * SQRT_2));
}

/** statrs `Normal::standard().inverse_cdf(x)`. */
export function normalInverseCdf(x) {
  if (!(x >= 0.0 && x <= 1.0)) throw new RangeError("x must be in [0, 1]");
  return 0.0 - 1.0 * SQRT_2 * erfcInv(2.0 * x);
}

/** The two-sided critical value for `confidence` (0.95 → 1.959963984540054). */
export function zValue(confidence) {
  return normalInverseCdf(0.5 + confidence / 2.0);
}

// Python's max(a, b) and min(a, b) for floats: the first unless the second is strictly beyond it.
const pyMax = (a, b) => (b > a ? b : a);
const pyMin = (a, b) => (b < a ? b : a);

/** Wilson score interval `{low, high}` for `k` successes in `n` trials; null when n = 0. */
export function wilson(k, n, confidence) {
  if (n === 0) return null;
  const kf = k;
  const nf = n;
  const z = zValue(confidence);
  const p = kf / nf;
  const z2 = z * z;
  const denom = 1.0 + z2 / nf;
  const center = (p + z2 / (2.0 * nf)) / denom;
  const half = (z / denom) * Math.sqrt((p * (1.0 - p)) / nf + z2 / (4.0 * nf * nf));
  const low = kf === 0.0 ? 0.0 : pyMax(center - half, 0.0);
  const high = kf === nf ? 1.0 : pyMin(center + half, 1.0);
  return { low, high };
}

// --- SplitMix64 on 32-bit halves ---------------------------------------------
//
// A u64 is a pair (hi, lo) of unsigned 32-bit Numbers. `mul64` is the low
// 64 bits of a product, from 16-bit limbs, so that every partial product
// is exact in a double.

const GAMMA_HI = 0x9e3779b9;
const GAMMA_LO = 0x7f4a7c15;

function mul64(ah, al, bh, bl) {
  const a48 = ah >>> 16;
  const a32 = ah & 0xffff;
  const a16 = al >>> 16;
  const a00 = al & 0xffff;
  const b48 = bh >>> 16;
  const b32 = bh & 0xffff;
  const b16 = bl >>> 16;
  const b00 = bl & 0xffff;
  let c00 = a00 * b00;
  let c16 = c00 >>> 16;
  c00 &= 0xffff;
  c16 += a16 * b00;
  let c32 = Math.floor(c16 / 0x10000);
  c16 &= 0xffff;
  c16 += a00 * b16;
  c32 += Math.floor(c16 / 0x10000);
  c16 &= 0xffff;
  c32 += a32 * b00;
  let c48 = Math.floor(c32 / 0x10000);
  c32 &= 0xffff;
  c32 += a16 * b16;
  c48 += Math.floor(c32 / 0x10000);
  c32 &= 0xffff;
  c32 += a00 * b32;
  c48 += Math.floor(c32 / 0x10000);
  c32 &= 0xffff;
  c48 += a48 * b00 + a32 * b16 + a16 * b32 + a00 * b48;
  c48 = c48 % 0x10000;
  return [((c48 * 0x10000) + c32) >>> 0, ((c16 * 0x10000) + c00) >>> 0];
}

// z ^ (z >> n) for 0 < n < 32.
function xorShr(hi, lo, n) {
  return [(hi ^ (hi >>> n)) >>> 0, (lo ^ ((lo >>> n) | (hi << (32 - n)))) >>> 0];
}

/** SplitMix64's output function on a state (hi, lo). */
export function mix(hi, lo) {
  let z = xorShr(hi, lo, 30);
  z = mul64(z[0], z[1], 0xbf58476d, 0x1ce4e5b9);
  z = xorShr(z[0], z[1], 27);
  z = mul64(z[0], z[1], 0x94d049bb, 0x133111eb);
  return xorShr(z[0], z[1], 31);
}

/** SplitMix64 (Steele, Lea, Flood 2014): the ledger's fixed random stream. */
export class SplitMix64 {
  constructor(seedHi, seedLo) {
    this.hi = seedHi >>> 0;
    this.lo = seedLo >>> 0;
  }

  // state += gamma (mod 2^64)
  step() {
    const lo = this.lo + GAMMA_LO;
    this.lo = lo >>> 0;
    this.hi = (this.hi + GAMMA_HI + (lo > 0xffffffff ? 1 : 0)) >>> 0;
  }

  /** The next u64 as [hi, lo]. */
  nextU64() {
    this.step();
    return mix(this.hi, this.lo);
  }

  /**
   * A uniform index in 0..n: (x·n) >> 64 (Lemire's multiply-shift), exact
   * for n < 2^21 since x·n = hi·n·2^32 + lo·n and each part fits a double.
   */
  below(n) {
    const [hi, lo] = this.nextU64();
    return Math.floor((hi * n + Math.floor((lo * n) / 0x100000000)) / 0x100000000);
  }
}

/** The bootstrap seed of a task class as [hi, lo]: BLAKE3 of the name, first 8 bytes little-endian. */
export function bootstrapSeed(taskClass) {
  const h = blake3(utf8(`evidence-ledger/v1 bootstrap\n${taskClass}`));
  const lo = (h[0] | (h[1] << 8) | (h[2] << 16) | (h[3] << 24)) >>> 0;
  const hi = (h[4] | (h[5] << 8) | (h[6] << 16) | (h[7] << 24)) >>> 0;
  return [hi, lo];
}

// Left to right, one rounding per addition, from -0.0: Rust's `Iterator::sum` for f64.
function sum(xs) {
  let s = -0.0;
  for (const x of xs) s += x;
  return s;
}

function resampleMeans(x, resamples, seed) {
  const n = x.length;
  if (n >= 2 ** 21) throw new RangeError("more values than this bootstrap draws exactly");
  const rng = new SplitMix64(seed[0], seed[1]);
  const out = new Float64Array(resamples);
  for (let r = 0; r < resamples; r++) {
    let s = 0.0;
    for (let i = 0; i < n; i++) s += x[rng.below(n)];
    out[r] = s / n;
  }
  return out;
}

function percentileSorted(sorted, q) {
  const pos = pyMin(pyMax(q, 0.0), 1.0) * (sorted.length - 1);
  const lo = Math.floor(pos);
  const hi = Math.ceil(pos);
  const frac = pos - lo;
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

/**
 * BCa bootstrap interval `{low, high}` of the mean of `x`: `resamples`
 * resamples drawn from SplitMix64(`seed`, a [hi, lo] pair). Null with no
 * data; [x, x] with one value or all equal.
 */
export function bca(x, confidence, resamples, seed) {
  const n = x.length;
  if (n === 0) return null;
  const theta = sum(x) / n;
  if (x.every((v) => v === x[0]) || resamples === 0) return { low: theta, high: theta };
  const boot = resampleMeans(x, resamples, seed);
  let below = 0;
  let equal = 0;
  for (const b of boot) {
    if (b < theta) below++;
    else if (b === theta) equal++;
  }
  const prop = (below + 0.5 * equal) / resamples;
  const z0 = normalInverseCdf(pyMin(pyMax(prop, 1e-12), 1.0 - 1e-12));
  const total = sum(x);
  const jack = x.map((v) => (total - v) / (n - 1));
  const jmean = sum(jack) / jack.length;
  const num = sum(jack.map((j) => (jmean - j) * (jmean - j) * (jmean - j)));
  const den = sum(jack.map((j) => (jmean - j) * (jmean - j)));
  const a = den > 0.0 ? num / (6.0 * pow(den, 1.5)) : 0.0;
  const alpha = (1.0 - confidence) / 2.0;
  const adj = (q) => {
    const zq = normalInverseCdf(q);
    return normalCdf(z0 + (z0 + zq) / (1.0 - a * (z0 + zq)));
  };
  boot.sort();
  return { low: percentileSorted(boot, adj(alpha)), high: percentileSorted(boot, adj(1.0 - alpha)) };
}

/**
 * Statistics of latest-per-case scores `xs`, `passed` of which passed, as
 * the server's `ScoreStats` ({cases, mean, mean_ci, passed, pass_rate,
 * pass_rate_ci}; null where it has none).
 */
export function scoreStats(xs, passed, settings, seed) {
  const n = xs.length;
  return {
    cases: n,
    mean: n > 0 ? sum(xs) / n : null,
    mean_ci: bca(xs, settings.confidence, settings.resamples, seed),
    passed,
    pass_rate: n > 0 ? passed / n : null,
    pass_rate_ci: wilson(passed, n, settings.confidence),
  };
}

// --- comparing served numbers with recomputed ones ---------------------------

/** The bits of two doubles are the same (-0 is not 0; null only equals null). */
export function sameBits(a, b) {
  if (a == null || b == null) return a == null && b == null;
  return Object.is(a, b);
}

// Where a served interval endpoint may differ from the recomputed one
// because glibc rounded an exp, log or pow the other way: a few ulps
// propagated through the percentile interpolation. Far below the 4
// decimals anything is shown or decided with, far above such rounding.
const LIBM_TOLERANCE = 1e-12;

/**
 * Compares served statistics with recomputed ones, field by field.
 * Returns one row per field: {field, served, recomputed, status, note},
 * status "ok" (same bits), "ok" with a note for an interval endpoint that
 * differs by no more than libm rounding can explain, or "fail".
 */
export function compareStats(served, recomputed) {
  const rows = [];
  const exact = (field, s, r) => {
    rows.push({ field, served: s, recomputed: r, status: sameBits(s, r) ? "ok" : "fail", note: sameBits(s, r) ? "bit for bit" : "" });
  };
  const libm = (field, s, r) => {
    if (sameBits(s, r)) {
      rows.push({ field, served: s, recomputed: r, status: "ok", note: "bit for bit" });
    } else if (typeof s === "number" && typeof r === "number" && Math.abs(s - r) <= LIBM_TOLERANCE * Math.max(1, Math.abs(r))) {
      rows.push({
        field, served: s, recomputed: r, status: "ok",
        note: `equal to ${LIBM_TOLERANCE} but not bit for bit (the server's exp/log/pow can round differently in the last bit)`,
      });
    } else {
      rows.push({ field, served: s, recomputed: r, status: "fail", note: "" });
    }
  };
  exact("cases", served.cases, recomputed.cases);
  exact("mean", served.mean, recomputed.mean);
  for (const end of ["low", "high"]) {
    libm(`mean_ci.${end}`, served.mean_ci?.[end] ?? null, recomputed.mean_ci?.[end] ?? null);
  }
  exact("passed", served.passed, recomputed.passed);
  exact("pass_rate", served.pass_rate, recomputed.pass_rate);
  for (const end of ["low", "high"]) {
    libm(`pass_rate_ci.${end}`, served.pass_rate_ci?.[end] ?? null, recomputed.pass_rate_ci?.[end] ?? null);
  }
  return rows;
}
