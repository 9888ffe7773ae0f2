//! C2SP tlog-tiles reads: Merkle tree tiles and entry bundles
//! (`GET /tile/...`); the checkpoint is `GET /checkpoint` ([`super::proofs`]).
//! Tiles never change, so they are served with a week-long immutable
//! `Cache-Control`; entry bundles are gzipped for clients that accept it.
//! Anyone may fetch them from a browser (`Access-Control-Allow-Origin: *`);
//! a configured read token still applies.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use ledger::tiles::{Kind, TilePath, IMMUTABLE};

use crate::error::ApiError;
use crate::server::state::{AppState, Shared};
use bytes::Bytes;
use verifier::wire::Problem;

/// `GET /tile/{path}`: a C2SP tlog-tiles tile (`tile/<L>/<N>[.p/<W>]`) or
/// entry bundle (`tile/entries/<N>[.p/<W>]`).
#[utoipa::path(get, path = "/tile/{path}", tag = "tiles",
    params(("path" = String, Path, description = "The rest of a C2SP tile path: `<L>/<N>[.p/<W>]` or `entries/<N>[.p/<W>]`, N in 3-digit elements (`x001/x234/067`)")),
    responses(
        (status = 200, content_type = "application/octet-stream", body = Vec<u8>, description = "256 (or W) 32-byte hashes, or length-prefixed entries"),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json", description = "the tree does not hold this tile yet")))]
pub async fn get_tile(
    State(state): State<Shared>,
    Path(rest): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    state.refuse_if_failed()?;
    let path = format!("tile/{rest}");
    let t = TilePath::parse(&path).map_err(|e| ApiError::param("path", e.to_string()))?;
    let gzip = t.kind == Kind::Entries && accepts_gzip(&headers);
    let kept = state.tile_cache.get(&t, gzip);
    state.metrics.count_tile_read(kept.is_some());
    let body = match kept {
        Some(b) => b,
        None => {
            // A hash tile is read in about as long as a thread hand-off
            // takes; an entry bundle (256 entries, maybe gzipped) is not.
            let body = if t.kind == Kind::Entries {
                let st = Arc::clone(&state);
                tokio::task::spawn_blocking(move || tile_body(&st, &t, gzip))
                    .await
                    .map_err(|e| ApiError::Internal(e.to_string()))??
            } else {
                tile_body(&state, &t, gzip)?
            };
            state.tile_cache.put(&t, gzip, body.clone());
            body
        }
    };
    let mut resp = (
        [
            (header::CONTENT_TYPE, "application/octet-stream"),
            (header::CACHE_CONTROL, IMMUTABLE),
            (header::ACCESS_CONTROL_ALLOW_ORIGIN, "*"),
        ],
        body,
    )
        .into_response();
    if t.kind == Kind::Entries {
        let h = resp.headers_mut();
        h.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
        if gzip {
            h.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
    }
    Ok(resp)
}

/// The bytes of tile `t` as served: read from the log (checked reads), and
/// gzipped when `gzip`.
fn tile_body(state: &AppState, t: &TilePath, gzip: bool) -> Result<Bytes, ApiError> {
    let bytes = match state.events.ledger().tile(t) {
        Ok(b) => b,
        // A leaf appended before leaves were limited to what a bundle
        // holds (docs/UPGRADES.md): this bundle cannot exist.
        Err(ledger::Error::EntryTooLarge { len, max }) => {
            return Err(ApiError::NotFound(format!(
                "{t} cannot be served: it holds an entry of {len} bytes, more than the {max} an entry bundle holds"
            )))
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Bytes::from(if gzip { gzip_bytes(&bytes)? } else { bytes }))
}

/// The tiles and entry bundles served, kept by their path (and whether
/// gzipped) up to a number of bytes; quick_cache chooses what to evict
/// (S3-FIFO: what was read once goes first). A tile path names bytes that
/// never change (a partial tile names its width), so a kept body is the one
/// the log's checked read gave; a tile the tree does not hold yet is an
/// error, never kept, and nothing kept is served once the log fails a
/// check (`refuse_if_failed` comes first).
pub(crate) struct TileCache {
    kept: Option<quick_cache::sync::Cache<(TilePath, bool), Bytes, ByLength>>,
}

#[derive(Clone)]
pub(crate) struct ByLength;

impl quick_cache::Weighter<(TilePath, bool), Bytes> for ByLength {
    fn weight(&self, _key: &(TilePath, bool), body: &Bytes) -> u64 {
        body.len() as u64
    }
}

impl TileCache {
    /// Keeps up to `bytes` of bodies; 0 keeps none. The cache is split in
    /// [`TileCache::SHARDS`] parts (not one per core: on a large host a
    /// part would be smaller than an entry bundle), and a body larger than
    /// a part is served but not kept.
    pub(crate) fn new(bytes: u64) -> TileCache {
        let hash_tile = 32 * u64::from(ledger::tiles::WIDTH);
        let options = quick_cache::OptionsBuilder::new()
            .estimated_items_capacity((bytes / hash_tile).max(1) as usize)
            .weight_capacity(bytes)
            .shards(Self::SHARDS)
            .build();
        TileCache {
            kept: match options {
                Ok(o) if bytes > 0 => Some(quick_cache::sync::Cache::with_options(
                    o,
                    ByLength,
                    Default::default(),
                    Default::default(),
                )),
                _ => None,
            },
        }
    }

    const SHARDS: usize = 4;

    fn get(&self, t: &TilePath, gzip: bool) -> Option<Bytes> {
        self.kept.as_ref()?.get(&(*t, gzip))
    }

    fn put(&self, t: &TilePath, gzip: bool, body: Bytes) {
        if let Some(k) = &self.kept {
            k.insert((*t, gzip), body);
        }
    }
}

/// Whether the client's `Accept-Encoding` accepts gzip (by name or `*`,
/// with a q-value above zero).
pub(crate) fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';');
            let name = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                p.trim()
                    .strip_prefix("q=")
                    .is_some_and(|q| q.trim().parse::<f32>().map_or(true, |q| q <= 0.0))
            });
            (name.eq_ignore_ascii_case("gzip") || name == "*") && !refused
        })
}

fn gzip_bytes(bytes: &[u8]) -> Result<Vec<u8>, ApiError> {
    use std::io::Write as _;
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(bytes)
        .and_then(|()| enc.finish())
        .map_err(|e| ApiError::Internal(format!("compressing an entry bundle: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(
            header::ACCEPT_ENCODING,
            HeaderValue::from_str(v).expect("header"),
        );
        m
    }

    #[test]
    fn the_tile_cache_keeps_hash_tiles_and_entry_bundles_by_path_and_encoding() {
        let cache = TileCache::new(64 << 20);
        let tile = TilePath::hashes(0, 7, 256).expect("tile");
        let bundle = TilePath::entries(7, 256).expect("bundle");
        cache.put(&tile, false, Bytes::from(vec![1u8; 8192]));
        // An entry bundle at 10M entries: about 436 KB.
        cache.put(&bundle, true, Bytes::from(vec![2u8; 436_032]));
        assert_eq!(cache.get(&tile, false).map(|b| b.len()), Some(8192));
        assert_eq!(cache.get(&bundle, true).map(|b| b.len()), Some(436_032));
        assert!(cache.get(&bundle, false).is_none(), "gzipped is not plain");
        assert!(cache
            .get(&TilePath::hashes(0, 7, 255).expect("tile"), false)
            .is_none());
        let none = TileCache::new(0);
        none.put(&tile, false, Bytes::from(vec![1u8; 8192]));
        assert!(none.get(&tile, false).is_none());
    }

    #[test]
    fn gzip_is_used_only_when_accepted() {
        assert!(accepts_gzip(&h("gzip")));
        assert!(accepts_gzip(&h("br, GZIP;q=0.5")));
        assert!(accepts_gzip(&h("*")));
        assert!(!accepts_gzip(&h("gzip;q=0")));
        assert!(!accepts_gzip(&h("gzip; q=0.0, identity")));
        assert!(!accepts_gzip(&h("identity")));
        assert!(!accepts_gzip(&h("gzipx")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
