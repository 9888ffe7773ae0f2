//! The one place errors become HTTP: `application/problem+json` (RFC 9457)
//! with a stable `code`. Internal details are logged here and never sent.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use events::{RejectCode, Rejection};
use verifier::wire::Problem;

/// API-level codes (besides the event rejection codes).
pub const API_CODES: &[(&str, &str)] = &[
    (
        "not_found",
        "No such route, entry, envelope id or task class.",
    ),
    (
        "method_not_allowed",
        "The route exists but not with this method.",
    ),
    (
        "invalid_parameter",
        "A path or query parameter is missing, malformed or out of range.",
    ),
    (
        "unsupported_media_type",
        "Writes must be sent as application/json.",
    ),
    (
        "payload_too_large",
        "The request body exceeds the server's limit.",
    ),
    (
        "read_token_required",
        "This server requires a bearer token for reads.",
    ),
    (
        "overloaded",
        "Too many requests in flight or queued; retry after the Retry-After delay.",
    ),
    (
        "timeout",
        "The request took longer than the server's limit; retry.",
    ),
    (
        "checkpoint_not_witnessed",
        "The server submits its checkpoints to witnesses and no checkpoint has a quorum of cosignatures yet; retry.",
    ),
    (
        "log_verifying",
        "The server is still verifying its log; projections are withheld until it is done.",
    ),
    (
        "log_unverified",
        "The log failed verification; projections are withheld. See docs/ops.",
    ),
    (
        "log_corrupt",
        "Storage disagrees with itself; the server refuses to serve this read.",
    ),
    (
        "derived_state_mismatch",
        "Derived state (a projection) does not match the log; nothing was signed. See ops/runbooks/derived-state-mismatch.md.",
    ),
    (
        "writes_halted",
        "The server can no longer sequence writes; it is not ready. See its log.",
    ),
    (
        "internal",
        "An unexpected server error (details are in the server's log).",
    ),
];

/// The code of a problem response, for metrics.
#[derive(Debug, Clone)]
pub struct ErrorCode(pub String);

/// The public description of an API code.
fn api_detail(code: &str) -> String {
    API_CODES
        .iter()
        .find(|(c, _)| *c == code)
        .map(|(_, d)| (*d).to_owned())
        .unwrap_or_default()
}

#[derive(Debug)]
pub enum ApiError {
    Rejected {
        rejection: Rejection,
        recorded: Option<u64>,
    },
    NotFound(String),
    MethodNotAllowed,
    InvalidParameter {
        field: String,
        detail: String,
    },
    UnsupportedMediaType,
    PayloadTooLarge,
    ReadTokenRequired,
    Overloaded,
    Timeout,
    LogVerifying,
    NotWitnessed,
    LogUnverified(String),
    LogCorrupt(String),
    /// Derived state disagrees with the log (a projection checkpoint, or
    /// numbers that do not follow from their evidence): nothing is signed.
    DerivedStateMismatch(String),
    /// The committer has stopped: no write can be sequenced.
    WritesHalted(String),
    StorageUnavailable(String),
    Internal(String),
}

impl ApiError {
    pub fn param(field: &str, detail: impl Into<String>) -> ApiError {
        ApiError::InvalidParameter {
            field: field.to_owned(),
            detail: detail.into(),
        }
    }

    /// The stable code.
    pub fn code(&self) -> String {
        match self {
            ApiError::Rejected { rejection, .. } => rejection.code.as_str(),
            ApiError::NotFound(_) => "not_found",
            ApiError::MethodNotAllowed => "method_not_allowed",
            ApiError::InvalidParameter { .. } => "invalid_parameter",
            ApiError::UnsupportedMediaType => "unsupported_media_type",
            ApiError::PayloadTooLarge => "payload_too_large",
            ApiError::ReadTokenRequired => "read_token_required",
            ApiError::Overloaded => "overloaded",
            ApiError::Timeout => "timeout",
            ApiError::LogVerifying => "log_verifying",
            ApiError::NotWitnessed => "checkpoint_not_witnessed",
            ApiError::LogUnverified(_) => "log_unverified",
            ApiError::LogCorrupt(_) => "log_corrupt",
            ApiError::DerivedStateMismatch(_) => "derived_state_mismatch",
            ApiError::WritesHalted(_) => "writes_halted",
            ApiError::StorageUnavailable(_) => "storage_unavailable",
            ApiError::Internal(_) => "internal",
        }
        .to_owned()
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::Rejected { rejection, .. } => rejection_status(rejection.code),
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::InvalidParameter { .. } => StatusCode::BAD_REQUEST,
            ApiError::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::ReadTokenRequired => StatusCode::UNAUTHORIZED,
            ApiError::Overloaded
            | ApiError::Timeout
            | ApiError::LogVerifying
            | ApiError::NotWitnessed
            | ApiError::LogUnverified(_)
            | ApiError::LogCorrupt(_)
            | ApiError::DerivedStateMismatch(_)
            | ApiError::WritesHalted(_)
            | ApiError::StorageUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// The HTTP status of each event rejection code.
pub fn rejection_status(code: RejectCode) -> StatusCode {
    use RejectCode::*;
    match code {
        MalformedEnvelope
        | UnsupportedPayloadType
        | MalformedBase64
        | MalformedJson
        | DuplicateKey
        | IntegerPrecision
        | NonCanonicalPayload
        | UnknownField
        | MissingField
        | InvalidType
        | InvalidValue
        | UnknownEventKind
        | UnsupportedSchema
        | InvalidIdentifier
        | InvalidText
        | InvalidDigest
        | InvalidTimestamp
        | SignatureCount
        | SignerMismatch => StatusCode::BAD_REQUEST,
        EntryTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        SignatureInvalid | UnknownSigner => StatusCode::UNAUTHORIZED,
        SignerRevoked | RoleNotPermitted | PromotionMustBeHumanAuthorized | GenesisRequired => {
            StatusCode::FORBIDDEN
        }
        EnvelopeIdReused | PrincipalExists | TaskClassExists | CaseExists | ProposalExists
        | RunExists | InvocationExists | CapabilityExists | CapabilitySpent => StatusCode::CONFLICT,
        LedgerUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    }
}

impl From<ledger::Error> for ApiError {
    fn from(e: ledger::Error) -> Self {
        match e {
            ledger::Error::IndexOutOfRange { index, size } => ApiError::param(
                "index",
                format!("index {index} is not below the tree size {size}"),
            ),
            ledger::Error::InvalidSize { size, rule } => {
                ApiError::param("tree_size", format!("tree size {size}: {rule}"))
            }
            ledger::Error::EntryTooLarge { .. } => ApiError::PayloadTooLarge,
            ledger::Error::TileNotInTree { tile, size } => {
                ApiError::NotFound(format!("{tile} is not in the tree of size {size}"))
            }
            ledger::Error::Busy | ledger::Error::Closed | ledger::Error::HeadMoved { .. } => {
                ApiError::Overloaded
            }
            ledger::Error::Corrupt(c) => ApiError::LogCorrupt(c.to_string()),
            ledger::Error::Storage(e) => ApiError::StorageUnavailable(e.to_string()),
            e => ApiError::Internal(e.to_string()),
        }
    }
}

impl From<ledger::AppendError<Rejection>> for ApiError {
    fn from(e: ledger::AppendError<Rejection>) -> Self {
        match e {
            ledger::AppendError::Rejected { reason, recorded } => ApiError::Rejected {
                rejection: reason,
                recorded: recorded.map(|a| a.index),
            },
            ledger::AppendError::Ledger(e) => e.into(),
        }
    }
}

impl From<projections::driver::DriverError> for ApiError {
    fn from(e: projections::driver::DriverError) -> Self {
        use projections::driver::DriverError as D;
        match e {
            D::Ledger(e) => e.into(),
            D::Rejected(r) => ApiError::Rejected {
                rejection: r,
                recorded: None,
            },
            D::NotARequest => ApiError::Rejected {
                rejection: Rejection::new(
                    RejectCode::InvalidValue,
                    "event.kind",
                    "this route takes a promotion.requested envelope",
                ),
                recorded: None,
            },
            D::Projection(projections::ProjectionError::UnknownTaskClass(t)) => {
                ApiError::NotFound(format!("task class `{t}` is not registered"))
            }
            D::Projection(p @ projections::ProjectionError::Unverified { .. }) => {
                ApiError::LogUnverified(p.to_string())
            }
            D::Projection(p) => ApiError::LogCorrupt(p.to_string()),
            D::Mismatch(m) => ApiError::DerivedStateMismatch(m.to_string()),
            D::Busy => ApiError::Overloaded,
        }
    }
}

impl ApiError {
    /// The problem document this error is answered with (internal details
    /// are logged here and never put in it).
    pub fn problem(&self) -> Problem {
        let status = self.status();
        let code = self.code();
        let (detail, field, recorded_index) = match self {
            ApiError::Rejected {
                rejection,
                recorded,
            } => (
                rejection.message.clone(),
                (!rejection.field.is_empty()).then(|| rejection.field.clone()),
                *recorded,
            ),
            ApiError::NotFound(d) => (d.clone(), None, None),
            ApiError::InvalidParameter { field, detail } => {
                (detail.clone(), Some(field.clone()), None)
            }
            ApiError::LogUnverified(d)
            | ApiError::LogCorrupt(d)
            | ApiError::DerivedStateMismatch(d)
            | ApiError::WritesHalted(d)
            | ApiError::StorageUnavailable(d)
            | ApiError::Internal(d) => {
                tracing::error!(code = %code, detail = %d, "serving an error");
                (api_detail(&code), None, None)
            }
            _ => (api_detail(&code), None, None),
        };
        Problem {
            kind: format!("urn:evidence-ledger:problem:{code}"),
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            detail,
            code,
            field,
            recorded_index,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let problem = self.problem();
        let body = serde_json::to_vec(&problem).unwrap_or_default();
        let mut resp = (status, body).into_response();
        resp.extensions_mut()
            .insert(ErrorCode(problem.code.clone()));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        resp
    }
}
