//! Canonical JSON: the one byte sequence of each signed event payload.
//!
//! The canonical form is what Python's standard library writes with
//! `json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
//! allow_nan=False)`, so the harness (written in Python) produces it without
//! extra libraries:
//!
//! - objects: keys sorted by Unicode code point, no whitespace, `:` and `,`;
//! - strings: UTF-8; only `"`, `\`, and U+0000–U+001F are escaped (`\n`, `\r`,
//!   `\t`, `\b`, `\f`, otherwise `\u00xx` in lower-case hex);
//! - integers: decimal, and within ±(2^53 − 1) so that no JSON reader loses
//!   precision;
//! - floats: finite only, written as Python's `repr(float)`: the shortest
//!   digits that round-trip, fixed notation when the decimal exponent is in
//!   [-4, 16), otherwise `d.ddde±XX`.
//!
//! [`parse_strict`] rejects duplicate keys and imprecise integers;
//! [`require_canonical`] then rejects any input that is not already in
//! canonical form.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

/// The largest integer every JSON reader holds exactly (2^53 − 1).
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// A JSON value as the ledger reads it: maps are ordered, numbers are either
/// safe integers or finite floats.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Array(Vec<Value>),
    Object(BTreeMap<String, Value>),
}

/// Why bytes are not strict JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StrictError {
    /// Not JSON at all (or an out-of-range number, or nesting too deep).
    Syntax(String),
    /// An object repeats a key.
    DuplicateKey(String),
    /// An integer outside ±(2^53 − 1).
    IntegerPrecision(String),
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

const DUP: &str = "\u{1}duplicate key ";
const PREC: &str = "\u{1}integer precision ";

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }
    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        if !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&n) {
            return Err(E::custom(format!("{PREC}{n}")));
        }
        Ok(Value::Int(n))
    }
    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        if n > MAX_SAFE_INTEGER as u64 {
            return Err(E::custom(format!("{PREC}{n}")));
        }
        Ok(Value::Int(n as i64))
    }
    fn visit_f64<E: de::Error>(self, x: f64) -> Result<Value, E> {
        if !x.is_finite() {
            return Err(E::custom("non-finite number"));
        }
        Ok(Value::Float(x))
    }
    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::Str(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::Str(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut v = Vec::new();
        while let Some(x) = seq.next_element()? {
            v.push(x);
        }
        Ok(Value::Array(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut m = BTreeMap::new();
        while let Some(k) = map.next_key::<String>()? {
            let v: Value = map.next_value()?;
            if m.contains_key(&k) {
                return Err(de::Error::custom(format!("{DUP}{k}")));
            }
            m.insert(k, v);
        }
        Ok(Value::Object(m))
    }
}

/// Parses `bytes` as one JSON value, refusing duplicate keys, integers that
/// lose precision, non-finite numbers and trailing data.
pub fn parse_strict(bytes: &[u8]) -> Result<Value, StrictError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = Value::deserialize(&mut de).map_err(classify)?;
    de.end().map_err(classify)?;
    Ok(v)
}

fn classify(e: serde_json::Error) -> StrictError {
    let msg = e.to_string();
    if let Some(rest) = msg.strip_prefix(DUP) {
        StrictError::DuplicateKey(rest.split(" at line").next().unwrap_or(rest).to_owned())
    } else if let Some(rest) = msg.strip_prefix(PREC) {
        StrictError::IntegerPrecision(rest.split(" at line").next().unwrap_or(rest).to_owned())
    } else {
        StrictError::Syntax(msg)
    }
}

/// The canonical bytes of `v`.
pub fn encode(v: &Value) -> Vec<u8> {
    let mut out = String::new();
    write_value(&mut out, v);
    out.into_bytes()
}

/// Checks that `bytes` are exactly the canonical encoding of what they
/// parse to. Returns the canonical bytes on mismatch.
pub fn require_canonical(bytes: &[u8], v: &Value) -> Result<(), Vec<u8>> {
    let mut out = String::with_capacity(bytes.len());
    write_value(&mut out, v);
    let canon = out.into_bytes();
    if canon == bytes {
        Ok(())
    } else {
        Err(canon)
    }
}

fn write_value(out: &mut String, v: &Value) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Int(n) => {
            let _ = write!(out, "{n}");
        }
        Value::Float(x) => out.push_str(FloatRepr::new(*x).as_str()),
        Value::Str(s) => write_str(out, s),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, x);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, k);
                out.push(':');
                write_value(out, x);
            }
            out.push('}');
        }
    }
}

/// Whether `bytes` are, for certain, one strict JSON value already in
/// canonical form: what [`parse_strict`] accepts and [`require_canonical`]
/// then finds canonical. One pass over the bytes that builds nothing (the
/// door's check of every payload, where the two steps it stands for cost
/// about 3.6 µs of each event: a tree of allocations, then its encoding).
///
/// It is held to one side only: `true` means both steps pass, `false`
/// means "not settled here", and the caller asks them (which also names the
/// fault). It settles every canonical value whose strings have no escape
/// and whose nesting is at most [`FAST_DEPTH`]; an escape, deeper nesting,
/// `-0` or anything malformed answers `false`.
pub fn is_canonical(bytes: &[u8]) -> bool {
    let mut scan = Scan { b: bytes, i: 0 };
    scan.value(0) && scan.i == bytes.len()
}

/// The deepest nesting [`is_canonical`] settles (serde_json refuses past
/// 128).
pub const FAST_DEPTH: usize = 64;

/// The cursor of [`is_canonical`].
struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        self.i += usize::from(hit);
        hit
    }

    fn value(&mut self, depth: usize) -> bool {
        match self.peek() {
            Some(b'{') => depth < FAST_DEPTH && self.object(depth + 1),
            Some(b'[') => depth < FAST_DEPTH && self.array(depth + 1),
            Some(b'"') => self.string().is_some(),
            Some(b't') => self.literal(b"true"),
            Some(b'f') => self.literal(b"false"),
            Some(b'n') => self.literal(b"null"),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ => false,
        }
    }

    fn literal(&mut self, lit: &[u8]) -> bool {
        let hit = self.b[self.i..].starts_with(lit);
        if hit {
            self.i += lit.len();
        }
        hit
    }

    /// At a `"`: the string's bytes, when it has no escape and no control
    /// character (which canonical form would escape) and is UTF-8. Such a
    /// string is its own canonical encoding, and keys compare as bytes just
    /// as the canonical order (code points) does.
    fn string(&mut self) -> Option<&'a [u8]> {
        let b: &'a [u8] = self.b;
        let start = self.i + 1;
        let rest = b.get(start..)?;
        let end = rest
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)?;
        if rest[end] != b'"' {
            return None;
        }
        let s = &rest[..end];
        std::str::from_utf8(s).ok()?;
        self.i = start + end + 1;
        Some(s)
    }

    fn object(&mut self, depth: usize) -> bool {
        self.i += 1;
        if self.eat(b'}') {
            return true;
        }
        let mut prev: Option<&[u8]> = None;
        loop {
            if self.peek() != Some(b'"') {
                return false;
            }
            let Some(key) = self.string() else {
                return false;
            };
            // Strictly increasing: sorted, and no key twice.
            if prev.is_some_and(|p| p >= key) {
                return false;
            }
            prev = Some(key);
            if !self.eat(b':') || !self.value(depth) {
                return false;
            }
            if !self.eat(b',') {
                return self.eat(b'}');
            }
        }
    }

    fn array(&mut self, depth: usize) -> bool {
        self.i += 1;
        if self.eat(b']') {
            return true;
        }
        loop {
            if !self.value(depth) {
                return false;
            }
            if !self.eat(b',') {
                return self.eat(b']');
            }
        }
    }

    fn digits(&mut self) -> usize {
        let from = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        self.i - from
    }

    /// An integer in canonical form (no leading zero, not `-0`) within
    /// ±(2^53 − 1), or a float token that is exactly Python's `repr` of the
    /// finite value serde_json reads from it (the reader [`parse_strict`]
    /// uses).
    fn number(&mut self) -> bool {
        let start = self.i;
        let neg = self.eat(b'-');
        let int_start = self.i;
        let int_len = self.digits();
        let int = &self.b[int_start..self.i];
        if int_len == 0 || (int_len > 1 && int[0] == b'0') {
            return false;
        }
        let mut float = false;
        if self.eat(b'.') {
            float = true;
            if self.digits() == 0 {
                return false;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            float = true;
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                return false;
            }
        }
        if !float {
            if (neg && int == b"0") || int_len > 16 {
                return false;
            }
            let n = int.iter().fold(0u64, |n, &d| n * 10 + u64::from(d - b'0'));
            return n <= MAX_SAFE_INTEGER as u64;
        }
        let Ok(token) = std::str::from_utf8(&self.b[start..self.i]) else {
            return false;
        };
        match serde_json::from_str::<f64>(token) {
            Ok(x) if x.is_finite() => FloatRepr::new(x).as_str() == token,
            _ => false,
        }
    }
}

/// Writes `s` as a canonical JSON string. Runs of bytes that need no escape
/// (everything but `"`, `\` and U+0000–U+001F) are copied whole: a base64
/// payload is one copy, not a push per character.
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    let bytes = s.as_bytes();
    // Most strings have nothing to escape: check 16 bytes at a time without
    // branching on each (the compiler vectorises the fold), then copy whole.
    let clean = bytes.chunks(16).all(|c| {
        !c.iter().fold(false, |any, &b| {
            any | (b < 0x20) | (b == b'"') | (b == b'\\')
        })
    });
    if clean {
        out.push_str(s);
        out.push('"');
        return;
    }
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let esc = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => continue,
        };
        // Every escaped byte is ASCII, so `run..i` ends on a char boundary.
        out.push_str(&s[run..i]);
        if esc.is_empty() {
            let _ = write!(out, "\\u{:04x}", b);
        } else {
            out.push_str(esc);
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// Python's `repr(float)` for a finite `x`.
pub fn python_float_repr(x: f64) -> String {
    FloatRepr::new(x).as_str().to_owned()
}

/// Python's `repr(float)` of a finite value, written into a buffer on the
/// stack: [`python_float_repr`] without its allocations, for the door's
/// check of every float in a payload ([`is_canonical`]) and the canonical
/// encoder.
pub struct FloatRepr {
    buf: [u8; 40],
    len: usize,
}

impl FloatRepr {
    pub fn new(x: f64) -> FloatRepr {
        use std::io::Write as _;
        let mut r = FloatRepr {
            buf: [0; 40],
            len: 0,
        };
        if x == 0.0 {
            r.push(if x.is_sign_negative() {
                b"-0.0"
            } else {
                b"0.0"
            });
            return r;
        }
        // Rust's `{:e}` gives the shortest round-trip digits: "-1.2345e-7",
        // at most 24 bytes for an f64.
        let mut sci = [0u8; 32];
        let mut cursor = std::io::Cursor::new(&mut sci[..]);
        let _ = write!(cursor, "{x:e}");
        let n = cursor.position() as usize;
        let sci = &sci[..n];
        let (mant, exp) = match sci.iter().position(|&b| b == b'e') {
            Some(i) => (&sci[..i], &sci[i + 1..]),
            None => (sci, &b"0"[..]),
        };
        let exp: i32 = std::str::from_utf8(exp)
            .ok()
            .and_then(|e| e.parse().ok())
            .unwrap_or(0);
        let (neg, mant) = match mant.split_first() {
            Some((b'-', m)) => (true, m),
            _ => (false, mant),
        };
        let mut all = [0u8; 24];
        let mut nd = 0;
        for &c in mant.iter().filter(|&&c| c != b'.').take(all.len()) {
            all[nd] = c;
            nd += 1;
        }
        let digits = &all[..nd];
        if neg {
            r.push(b"-");
        }
        let decpt = exp + 1;
        let n = nd as i32;
        if decpt <= -4 || decpt > 16 {
            r.push(&digits[..1.min(nd)]);
            if nd > 1 {
                r.push(b".");
                r.push(&digits[1..]);
            }
            r.push(if exp < 0 { b"e-" } else { b"e+" });
            let e = exp.unsigned_abs();
            if e >= 100 {
                r.push(&[b'0' + (e / 100) as u8]);
            }
            r.push(&[b'0' + (e / 10 % 10) as u8, b'0' + (e % 10) as u8]);
        } else if decpt <= 0 {
            r.push(b"0.");
            for _ in 0..-decpt {
                r.push(b"0");
            }
            r.push(digits);
        } else if decpt >= n {
            r.push(digits);
            for _ in 0..decpt - n {
                r.push(b"0");
            }
            r.push(b".0");
        } else {
            let d = decpt as usize;
            r.push(&digits[..d]);
            r.push(b".");
            r.push(&digits[d..]);
        }
        r
    }

    fn push(&mut self, bytes: &[u8]) {
        let end = (self.len + bytes.len()).min(self.buf.len());
        self.buf[self.len..end].copy_from_slice(&bytes[..end - self.len]);
        self.len = end;
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII digits, signs, '.', 'e' were pushed.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

/// Converts to `serde_json::Value` for typed deserialization.
pub fn to_json(v: &Value) -> serde_json::Value {
    match v {
        Value::Null => serde_json::Value::Null,
        Value::Bool(b) => serde_json::Value::Bool(*b),
        Value::Int(n) => serde_json::Value::from(*n),
        Value::Float(x) => serde_json::Number::from_f64(*x)
            .map(serde_json::Value::Number)
            .unwrap_or(serde_json::Value::Null),
        Value::Str(s) => serde_json::Value::String(s.clone()),
        Value::Array(a) => serde_json::Value::Array(a.iter().map(to_json).collect()),
        Value::Object(m) => {
            serde_json::Value::Object(m.iter().map(|(k, v)| (k.clone(), to_json(v))).collect())
        }
    }
}

/// Converts a `serde_json::Value` (from serializing a typed event); `None`
/// when it holds an integer or float the canonical form cannot carry.
pub fn from_json(v: &serde_json::Value) -> Option<Value> {
    Some(match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                if !(-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).contains(&i) {
                    return None;
                }
                Value::Int(i)
            } else if n.is_u64() {
                return None;
            } else {
                let x = n.as_f64()?;
                if !x.is_finite() {
                    return None;
                }
                Value::Float(x)
            }
        }
        serde_json::Value::String(s) => Value::Str(s.clone()),
        serde_json::Value::Array(a) => {
            Value::Array(a.iter().map(from_json).collect::<Option<_>>()?)
        }
        serde_json::Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, v)| Some((k.clone(), from_json(v)?)))
                .collect::<Option<_>>()?,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The allocating definition [`FloatRepr`] replaced, kept to test it.
    fn reference_repr(x: f64) -> String {
        if x == 0.0 {
            return if x.is_sign_negative() { "-0.0" } else { "0.0" }.to_owned();
        }
        // Rust's `{:e}` gives the shortest round-trip digits: "-1.2345e-7".
        let sci = format!("{x:e}");
        let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let (neg, mant) = match mant.strip_prefix('-') {
            Some(m) => (true, m),
            None => (false, mant),
        };
        let digits: String = mant.chars().filter(|c| *c != '.').collect();
        let decpt = exp + 1;
        let n = digits.len() as i32;
        let body = if decpt <= -4 || decpt > 16 {
            let m = if n == 1 {
                digits.clone()
            } else {
                format!("{}.{}", &digits[..1], &digits[1..])
            };
            format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
        } else if decpt <= 0 {
            format!("0.{}{digits}", "0".repeat((-decpt) as usize))
        } else if decpt >= n {
            format!("{digits}{}.0", "0".repeat((decpt - n) as usize))
        } else {
            let d = decpt as usize;
            format!("{}.{}", &digits[..d], &digits[d..])
        };
        if neg {
            format!("-{body}")
        } else {
            body
        }
    }

    proptest::proptest! {
        #[test]
        fn the_stack_repr_is_the_allocating_one(bits in proptest::prelude::any::<u64>()) {
            let x = f64::from_bits(bits);
            if x.is_finite() {
                proptest::prop_assert_eq!(python_float_repr(x), reference_repr(x));
            }
        }

        #[test]
        fn the_stack_repr_is_the_allocating_one_for_short_decimals(m in -99_999_999i64..99_999_999, e in -330i32..310) {
            let x: f64 = format!("{m}e{e}").parse().unwrap_or(0.0);
            if x.is_finite() {
                proptest::prop_assert_eq!(python_float_repr(x), reference_repr(x));
            }
        }
    }

    #[test]
    fn python_repr_edges() {
        for (x, want) in [
            (1.0, "1.0"),
            (0.5, "0.5"),
            (0.1, "0.1"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e300, "1.5e+300"),
            (5e-324, "5e-324"),
            (-2.5, "-2.5"),
            (123456789.125, "123456789.125"),
            (-0.0, "-0.0"),
        ] {
            assert_eq!(python_float_repr(x), want, "{x:e}");
        }
    }

    #[test]
    fn strict_parse_refuses_duplicates_and_imprecise_integers() {
        assert_eq!(
            parse_strict(br#"{"a":1,"a":2}"#),
            Err(StrictError::DuplicateKey("a".into()))
        );
        assert!(matches!(
            parse_strict(b"9007199254740992"),
            Err(StrictError::IntegerPrecision(_))
        ));
        assert!(parse_strict(b"9007199254740991").is_ok());
        assert!(matches!(parse_strict(b"NaN"), Err(StrictError::Syntax(_))));
        assert!(matches!(
            parse_strict(b"1e400"),
            Err(StrictError::Syntax(_))
        ));
        assert!(matches!(parse_strict(b"{} x"), Err(StrictError::Syntax(_))));
    }

    /// What the door decides by [`parse_strict`] then [`require_canonical`].
    fn reference(bytes: &[u8]) -> bool {
        parse_strict(bytes).is_ok_and(|v| require_canonical(bytes, &v).is_ok())
    }

    #[test]
    fn the_one_pass_check_settles_only_what_the_two_steps_accept() {
        for (text, want) in [
            (r#"{"a":1,"b":[true,false,null,-2.5,"x"],"c":{}}"#, true),
            (r#"{"":0,"a":[]}"#, true),
            ("9007199254740991", true),
            ("-9007199254740991", true),
            ("-0.0", true),
            ("1e-05", true),
            ("1e+16", true),
            ("\"\u{e9}\u{10ffff}\"", true),
            // Settled as not canonical, or left to the two steps.
            ("9007199254740992", false),
            ("-0", false),
            ("01", false),
            ("1.50", false),
            ("1E+16", false),
            ("1e16", false),
            ("1.", false),
            (".5", false),
            ("1e400", false),
            (r#"{"b":1,"a":2}"#, false),
            (r#"{"a":1,"a":2}"#, false),
            (r#"{"a":1 }"#, false),
            (r#"{"a":1,}"#, false),
            ("[1,]", false),
            ("[1 ,2]", false),
            ("\"a\\nb\"", false),
            ("\"\u{1}\"", false),
            ("tru", false),
            ("null ", false),
            ("", false),
            ("{}{}", false),
        ] {
            assert_eq!(is_canonical(text.as_bytes()), want, "{text}");
            assert!(!want || reference(text.as_bytes()), "{text}");
        }
        assert!(!is_canonical(b"\"\xff\""));
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(is_canonical(deep(FAST_DEPTH).as_bytes()));
        assert!(!is_canonical(deep(FAST_DEPTH + 1).as_bytes()));
        assert!(reference(deep(FAST_DEPTH + 1).as_bytes()));
    }

    fn value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-MAX_SAFE_INTEGER..=MAX_SAFE_INTEGER).prop_map(Value::Int),
            any::<f64>()
                .prop_filter("finite", |x| x.is_finite())
                .prop_map(Value::Float),
            "(\\PC|[\"\\\\\\x00-\\x1f]){0,8}".prop_map(Value::Str),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map("[a-c\u{e9}]{0,3}", inner, 0..6)
                    .prop_map(Value::Object),
            ]
        })
    }

    fn has_escape(v: &Value) -> bool {
        match v {
            Value::Str(s) => s.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20),
            Value::Array(a) => a.iter().any(has_escape),
            Value::Object(m) => m.iter().any(|(k, x)| {
                k.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) || has_escape(x)
            }),
            _ => false,
        }
    }

    proptest::proptest! {
        /// Canonical bytes are settled whenever they have no escape, and
        /// never settled when the two steps refuse them.
        #[test]
        fn the_one_pass_check_agrees_with_the_two_steps(
            v in value(),
            edits in proptest::collection::vec((0usize..4096, 0usize..3, 0usize..12), 0..3),
        ) {
            let canon = encode(&v);
            proptest::prop_assert_eq!(is_canonical(&canon), !has_escape(&v));
            // Edited bytes: whatever the check settles, the steps accept.
            let alphabet = b"{}[]\",:0-1.e ";
            let mut bytes = canon.clone();
            for (at, op, c) in edits {
                let at = at % (bytes.len() + 1);
                let c = alphabet[c % alphabet.len()];
                match op {
                    0 => bytes.insert(at, c),
                    1 if at < bytes.len() => { bytes.remove(at); }
                    _ if at < bytes.len() => bytes[at] = c,
                    _ => {}
                }
            }
            if is_canonical(&bytes) {
                proptest::prop_assert!(reference(&bytes), "{}", String::from_utf8_lossy(&bytes));
            }
        }
    }

    #[test]
    fn canonical_form_sorts_and_compacts() {
        let v = parse_strict("{ \"b\" : [1, 2.50, \"\u{e9}\\n\\u0001\"], \"a\": null }".as_bytes())
            .expect("parse");
        assert_eq!(
            String::from_utf8(encode(&v)).expect("utf8"),
            "{\"a\":null,\"b\":[1,2.5,\"\u{e9}\\n\\u0001\"]}"
        );
    }
}
