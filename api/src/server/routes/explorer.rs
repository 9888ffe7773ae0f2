//! The web explorer (`api/explorer/`): a read-only page that checks in the
//! browser what it shows (checkpoint signatures, proofs, statistics). Its
//! files are built into the binary and served as they are in the
//! repository; they hold no data, so they need no read token (the page
//! sends the token the user gives it with every API call). Not part of the
//! API, so not in `/openapi.json`.

use axum::extract::Path;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use crate::error::ApiError;

/// Where the explorer is served.
pub const PREFIX: &str = "/explorer";

/// What the page may load and run: its own files and the API, nothing
/// inline, never framed.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of the explorer: name, media type, bytes.
pub const FILES: &[(&str, &str, &[u8])] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_bytes!("../../../explorer/index.html"),
    ),
    (
        "explorer.css",
        "text/css; charset=utf-8",
        include_bytes!("../../../explorer/explorer.css"),
    ),
    ("app.js", JS, include_bytes!("../../../explorer/app.js")),
    ("ui.js", JS, include_bytes!("../../../explorer/ui.js")),
    (
        "page-head.js",
        JS,
        include_bytes!("../../../explorer/page-head.js"),
    ),
    (
        "page-entries.js",
        JS,
        include_bytes!("../../../explorer/page-entries.js"),
    ),
    (
        "page-classes.js",
        JS,
        include_bytes!("../../../explorer/page-classes.js"),
    ),
    (
        "page-settings.js",
        JS,
        include_bytes!("../../../explorer/page-settings.js"),
    ),
    ("rules.js", JS, include_bytes!("../../../explorer/rules.js")),
    ("api.js", JS, include_bytes!("../../../explorer/api.js")),
    (
        "blake3.js",
        JS,
        include_bytes!("../../../explorer/blake3.js"),
    ),
    (
        "envelope.js",
        JS,
        include_bytes!("../../../explorer/envelope.js"),
    ),
    ("libm.js", JS, include_bytes!("../../../explorer/libm.js")),
    (
        "merkle.js",
        JS,
        include_bytes!("../../../explorer/merkle.js"),
    ),
    ("note.js", JS, include_bytes!("../../../explorer/note.js")),
    ("plot.js", JS, include_bytes!("../../../explorer/plot.js")),
    ("stats.js", JS, include_bytes!("../../../explorer/stats.js")),
];

/// Whether `path` is one of the explorer's (read without a token).
pub fn is_explorer_path(path: &str) -> bool {
    path == PREFIX
        || path
            .strip_prefix(PREFIX)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// `GET /explorer`: to `/explorer/`, which the page's relative links need.
pub async fn redirect() -> Redirect {
    Redirect::permanent("/explorer/")
}

/// `GET /explorer/`: the page.
pub async fn index() -> Response {
    serve("index.html")
}

/// `GET /explorer/{file}`: one of [`FILES`]; anything else is 404.
pub async fn file(Path(name): Path<String>) -> Response {
    serve(&name)
}

fn serve(name: &str) -> Response {
    let Some((_, media, body)) = FILES.iter().find(|(n, _, _)| *n == name) else {
        return ApiError::NotFound(format!("the explorer has no file `{name}`")).into_response();
    };
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, HeaderValue::from_static(media)),
            (
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY),
            ),
            (
                header::X_CONTENT_TYPE_OPTIONS,
                HeaderValue::from_static("nosniff"),
            ),
            (header::CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (
                header::REFERRER_POLICY,
                HeaderValue::from_static("no-referrer"),
            ),
        ],
        *body,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_explorer_directory_is_served_and_nothing_else() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("explorer");
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .expect("explorer dir")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "README.md")
            .collect();
        on_disk.sort();
        let mut served: Vec<String> = FILES.iter().map(|(n, _, _)| n.to_string()).collect();
        served.sort();
        assert_eq!(
            served, on_disk,
            "a file of api/explorer/ is not served, or gone"
        );
    }

    #[test]
    fn explorer_paths_are_the_prefix_and_below_it_only() {
        assert!(is_explorer_path("/explorer"));
        assert!(is_explorer_path("/explorer/"));
        assert!(is_explorer_path("/explorer/app.js"));
        assert!(!is_explorer_path("/explorerx"));
        assert!(!is_explorer_path("/v1/explorer"));
    }
}
