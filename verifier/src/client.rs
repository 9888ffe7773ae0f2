//! A small blocking HTTP client for the CLI (demo, remote verify, proofs).

use std::time::Duration;

use anyhow::{anyhow, Context};
use serde::de::DeserializeOwned;

/// ureq's default resolver starts a thread for every request when a timeout
/// is set, even when the host is an IP address (measured: the load
/// generator spent more time creating threads than checking proofs). An IP
/// literal needs no lookup; a name goes to the default resolver, with its
/// timeout. (`ureq::unversioned` may change in a minor release; Cargo.lock
/// pins the version.)
#[derive(Debug, Default)]
struct LiteralFirst(ureq::unversioned::resolver::DefaultResolver);

impl ureq::unversioned::resolver::Resolver for LiteralFirst {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        config: &ureq::config::Config,
        timeout: ureq::unversioned::transport::NextTimeout,
    ) -> Result<ureq::unversioned::resolver::ResolvedSocketAddrs, ureq::Error> {
        if let Some(authority) = uri.authority() {
            let host = authority
                .host()
                .trim_start_matches('[')
                .trim_end_matches(']');
            if let Ok(ip) = host.parse::<std::net::IpAddr>() {
                let port = authority
                    .port_u16()
                    .unwrap_or(if uri.scheme_str() == Some("https") {
                        443
                    } else {
                        80
                    });
                let mut out = self.empty();
                out.push(std::net::SocketAddr::new(ip, port));
                return Ok(out);
            }
        }
        self.0.resolve(uri, config, timeout)
    }
}

/// A client for one server.
pub struct Client {
    base: String,
    agent: ureq::Agent,
    token: Option<String>,
}

/// A response: status, body, and the `Retry-After` delay (seconds) when the
/// server gave one.
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub retry_after: Option<u64>,
}

/// The `Retry-After` header as a number of seconds (the HTTP-date form is
/// not used by the ledger and is ignored).
fn retry_after(headers: &ureq::http::HeaderMap) -> Option<u64> {
    headers
        .get("retry-after")?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

impl Reply {
    pub fn json<T: DeserializeOwned>(&self) -> anyhow::Result<T> {
        serde_json::from_slice(&self.body).with_context(|| {
            format!(
                "unexpected response (status {}): {}",
                self.status,
                String::from_utf8_lossy(&self.body)
            )
        })
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    /// The problem `code`, for an error response.
    pub fn code(&self) -> Option<String> {
        serde_json::from_slice::<serde_json::Value>(&self.body)
            .ok()?
            .get("code")?
            .as_str()
            .map(str::to_owned)
    }
}

impl Client {
    pub fn new(base: &str, token: Option<String>) -> Client {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build();
        let agent = ureq::Agent::with_parts(
            config,
            ureq::unversioned::transport::DefaultConnector::default(),
            LiteralFirst::default(),
        );
        Client {
            base: base.trim_end_matches('/').to_owned(),
            agent,
            token,
        }
    }

    pub fn get(&self, path: &str) -> anyhow::Result<Reply> {
        self.get_limited(path, 512 << 20)
    }

    /// `GET path`, refusing a body longer than `limit` bytes (for answers of
    /// a known size, such as tiles).
    pub fn get_limited(&self, path: &str, limit: u64) -> anyhow::Result<Reply> {
        let mut req = self.agent.get(format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let mut resp = req.call().map_err(|e| anyhow!("GET {path}: {e}"))?;
        let status = resp.status().as_u16();
        let retry_after = retry_after(resp.headers());
        let body = resp
            .body_mut()
            .with_config()
            .limit(limit.saturating_add(1))
            .read_to_vec()
            .map_err(|e| anyhow!("GET {path}: {e}"))?;
        Ok(Reply {
            status,
            body,
            retry_after,
        })
    }

    /// `POST /v1/events/batch` with `envelopes` (each one envelope's JSON
    /// bytes, as `POST /v1/events` takes it) as one JSON array.
    pub fn post_batch<'e>(
        &self,
        envelopes: impl IntoIterator<Item = &'e [u8]>,
    ) -> anyhow::Result<Reply> {
        let mut body = vec![b'['];
        for (k, env) in envelopes.into_iter().enumerate() {
            if k > 0 {
                body.push(b',');
            }
            body.extend_from_slice(env);
        }
        body.push(b']');
        self.post_json("/v1/events/batch", &body)
    }

    pub fn post_json(&self, path: &str, body: &[u8]) -> anyhow::Result<Reply> {
        self.post(path, "application/json", body)
    }

    /// `POST path` with `body` of media type `content_type`.
    pub fn post(&self, path: &str, content_type: &str, body: &[u8]) -> anyhow::Result<Reply> {
        let mut resp = self
            .agent
            .post(format!("{}{path}", self.base))
            .header("content-type", content_type)
            .send(body)
            .map_err(|e| anyhow!("POST {path}: {e}"))?;
        let status = resp.status().as_u16();
        let retry_after = retry_after(resp.headers());
        let body = resp
            .body_mut()
            .read_to_vec()
            .map_err(|e| anyhow!("POST {path}: {e}"))?;
        Ok(Reply {
            status,
            body,
            retry_after,
        })
    }

    /// GET a text document, failing on a non-2xx status.
    pub fn get_text(&self, path: &str) -> anyhow::Result<String> {
        let r = self.get(path)?;
        if !(200..300).contains(&r.status) {
            return Err(anyhow!("GET {path}: status {}: {}", r.status, r.text()));
        }
        Ok(r.text())
    }

    /// The key to check this server's answers with: `key` when the caller
    /// gives one (a key it trusts), otherwise the one the server names
    /// (`GET /v1/log/key`), which then vouches for its own answers; `warn`
    /// is told so.
    pub fn verifier_key(
        &self,
        key: Option<String>,
        warn: impl FnOnce(&str),
    ) -> anyhow::Result<String> {
        match key {
            Some(k) => Ok(k),
            None => {
                let k = self.get_text("/v1/log/key")?.trim().to_owned();
                warn(&k);
                Ok(k)
            }
        }
    }

    /// GET a JSON document, failing on a non-2xx status.
    pub fn get_json<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        let r = self.get(path)?;
        if !(200..300).contains(&r.status) {
            return Err(anyhow!("GET {path}: status {}: {}", r.status, r.text()));
        }
        r.json()
    }
}
