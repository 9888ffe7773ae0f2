//! The per-entry hashes. Each function here is pinned by test vectors in
//! `docs/FORMAT.md` and `ledger/testdata/format_vectors.json`.

use sha2::{Digest, Sha256};

/// A 32-byte SHA-256 value: a leaf hash, an interior node hash, a tree root or
/// a chain hash.
pub use tlog_tiles::Hash;

/// The chain value before the first entry: 32 zero bytes.
pub const GENESIS_CHAIN: Hash = Hash([0u8; 32]);

/// RFC 6962 §2.1 leaf hash: `SHA-256(0x00 ‖ leaf)`.
pub fn leaf_hash(leaf: &[u8]) -> Hash {
    tlog_tiles::record_hash(leaf)
}

/// RFC 6962 §2.1 interior node hash: `SHA-256(0x01 ‖ left ‖ right)`.
pub fn node_hash(left: Hash, right: Hash) -> Hash {
    tlog_tiles::node_hash(left, right)
}

/// Lowercase hex of 32 bytes (a hash or a digest), as JSON answers write it.
/// A proof answer writes two dozen of these (see [`parse_hex32`] on why
/// this uses `const-hex`).
pub fn hex32(b: &[u8; 32]) -> String {
    const_hex::Buffer::<32>::new().format(b).to_owned()
}

/// [`hex32`] appended to `out`, without a `String` of its own (an answer
/// with a thousand proofs writes tens of thousands of hashes).
pub fn push_hex32(out: &mut Vec<u8>, b: &[u8; 32]) {
    out.extend_from_slice(const_hex::Buffer::<32>::new().format(b).as_bytes());
}

/// The 32 bytes that 64 hex digits (either case) spell, or `None` for any
/// other string. A proof carries two dozen of these. The `hex` crate's
/// decoder branches on every digit, and at random digits the branches
/// mispredict: it was 12% of a proof-checking client's profile samples
/// (docs/DECISIONS.md). `const-hex` decodes without them.
/// It also takes a `0x` prefix, which this format never writes: the length
/// check first refuses one (`0x` and 62 digits is 64 characters, and then
/// too few digits).
pub fn parse_hex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 {
        return None;
    }
    const_hex::decode_to_array(s).ok()
}

/// Whether `s` is exactly [`to_hex`] of `h` (lowercase), without a
/// `String` for the comparison.
pub fn is_hex_of(s: &str, h: &Hash) -> bool {
    const_hex::Buffer::<32>::new().format(&h.0) == s
}

/// Lowercase hex of a hash: the one way every JSON answer, note and
/// message writes one.
pub fn to_hex(h: &Hash) -> String {
    hex32(&h.0)
}

/// The hash that 64 hex digits (either case) spell, or `None`: the one
/// parser of a hash from an answer, a query or an argument.
pub fn from_hex(s: &str) -> Option<Hash> {
    parse_hex32(s).map(Hash)
}

/// BLAKE3 content digest of the leaf bytes (unkeyed, 32-byte output).
pub fn content_digest(leaf: &[u8]) -> [u8; 32] {
    *blake3::hash(leaf).as_bytes()
}

/// The hash chain link: `SHA-256(prev_chain ‖ BLAKE3(leaf))`, following the
/// design documents' `audit.py` identity tuple. `prev_chain` is
/// [`GENESIS_CHAIN`] for entry 0.
pub fn chain_hash(prev_chain: &Hash, leaf: &[u8]) -> Hash {
    chain_hash_from_digest(prev_chain, &content_digest(leaf))
}

/// [`chain_hash`] when the BLAKE3 digest is already known.
pub fn chain_hash_from_digest(prev_chain: &Hash, digest: &[u8; 32]) -> Hash {
    let mut h = Sha256::new();
    h.update(prev_chain.0);
    h.update(digest);
    Hash(h.finalize().into())
}

/// The RFC 6962 root of the empty tree: `SHA-256("")`.
pub const EMPTY_ROOT: Hash = tlog_tiles::EMPTY_HASH;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_root_is_sha256_of_nothing() {
        assert_eq!(EMPTY_ROOT.0, <[u8; 32]>::from(Sha256::digest(b"")));
    }

    #[test]
    fn hex32_is_lowercase_and_matches_the_hex_crate() {
        let mut b = [0u8; 32];
        for (i, v) in b.iter_mut().enumerate() {
            *v = (i as u8).wrapping_mul(37).wrapping_add(0xa5);
        }
        assert_eq!(hex32(&b), hex::encode(b));
        let mut out = b"x".to_vec();
        push_hex32(&mut out, &b);
        assert_eq!(out, format!("x{}", hex::encode(b)).into_bytes());
        assert_eq!(&hex32(&[0xab; 32])[..4], "abab");
    }

    #[test]
    fn parse_hex32_takes_exactly_64_hex_digits_and_inverts_hex32() {
        let b: [u8; 32] = std::array::from_fn(|i| (i as u8).wrapping_mul(53));
        assert_eq!(parse_hex32(&hex32(&b)), Some(b));
        assert_eq!(parse_hex32(&hex32(&b).to_uppercase()), Some(b));
        let good = "ab".repeat(32);
        for bad in [
            "",
            &good[..63],
            &good[..62],
            &format!("{good}ab"),
            &format!("{}zz", &good[..62]),
            &format!(" {}", &good[..63]),
            &format!("0x{}", &good[..62]),
            &format!("0X{}", &good[..62]),
            &format!("0x{good}"),
        ] {
            assert_eq!(parse_hex32(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn is_hex_of_takes_only_the_lowercase_hex_of_that_hash() {
        let h = Hash(std::array::from_fn(|i| {
            (i as u8).wrapping_mul(29).wrapping_add(0xc3)
        }));
        assert!(is_hex_of(&to_hex(&h), &h));
        assert!(!is_hex_of(&to_hex(&h).to_uppercase(), &h));
        assert!(!is_hex_of(&to_hex(&h)[..63], &h));
        assert!(!is_hex_of(&to_hex(&GENESIS_CHAIN), &h));
    }

    proptest::proptest! {
        /// `const-hex` accepts exactly what the `hex` crate accepts: 64
        /// digits of either case, and nothing with one stray character
        /// (a letter past f, `x`, a space) anywhere or a length off 64.
        #[test]
        fn parse_hex32_agrees_with_the_hex_crate(
            good in "[0-9a-fA-F]{64}",
            odd in "[0-9a-fA-F]{0,40}[g-zG-Z x]?[0-9a-fA-F]{0,40}",
        ) {
            for s in [good, odd] {
                let mut want = [0u8; 32];
                let want = hex::decode_to_slice(&s, &mut want).ok().map(|()| want);
                proptest::prop_assert_eq!(parse_hex32(&s), want, "{:?}", s);
            }
        }
    }

    #[test]
    fn leaf_and_node_prefixes_differ() {
        // A leaf whose bytes look like two child hashes must not collide with
        // the node over those children (the reason for the 0x00/0x01 prefixes).
        let l = leaf_hash(b"a");
        let r = leaf_hash(b"b");
        let mut fake = Vec::new();
        fake.extend_from_slice(&l.0);
        fake.extend_from_slice(&r.0);
        assert_ne!(leaf_hash(&fake), node_hash(l, r));
    }

    #[test]
    fn chain_depends_on_prev_and_content() {
        let a = chain_hash(&GENESIS_CHAIN, b"x");
        assert_ne!(a, chain_hash(&GENESIS_CHAIN, b"y"));
        assert_ne!(a, chain_hash(&a, b"x"));
    }
}
