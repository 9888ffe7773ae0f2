//! The wire types: every JSON body the server answers with and the
//! clients read. The server serializes them and documents them in its
//! OpenAPI description; the clients deserialize and check them.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A 32-byte hash as 64 lower-case hex digits: leaf, chain and tree
/// hashes, roots, proof steps and key ids in every JSON answer (base64 is
/// used only inside checkpoints, keys and leaves; docs/FORMAT.md §9).
#[derive(ToSchema)]
#[schema(value_type = String, pattern = "^[0-9a-f]{64}$")]
pub struct HexHash(pub String);

/// An RFC 9457 problem document.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Problem {
    /// `urn:evidence-ledger:problem:<code>`.
    #[serde(rename = "type")]
    pub kind: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// The stable error code (docs/reject_codes.md and the API codes in docs/API.md).
    pub code: String,
    /// The JSON path or parameter the problem concerns, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// For a refusal that was recorded (tier.apply): the entry recording it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recorded_index: Option<u64>,
}

/// A successful write.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct WriteReceipt {
    /// The entry's 0-based index.
    pub index: u64,
    /// Hex RFC 6962 leaf hash.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub leaf_hash: String,
    /// Hex SHA-256 chain hash.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub chain_hash: String,
    /// The tree size of the checkpoint below (covers this entry).
    pub tree_size: u64,
    /// Hex RFC 6962 root at `tree_size`.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub root: String,
    /// RFC 6962 inclusion proof of `index` in `tree_size`, nearest sibling first (hex).
    #[schema(value_type = Vec<HexHash>)]
    pub inclusion_proof: Vec<String>,
    /// C2SP checkpoint in a signed note, covering `tree_size`.
    pub checkpoint: String,
    /// The envelope id.
    pub id: String,
    /// The event kind.
    pub kind: String,
    /// True when this envelope was already in the log (nothing appended).
    pub existing: bool,
    /// When the ledger sequenced the entry (RFC 3339, µs, UTC). With the
    /// envelope that was posted, it rebuilds the exact leaf bytes
    /// (`{"envelope", "sequenced_at", "v"}`, docs/FORMAT.md), so a client can
    /// check that `leaf_hash` is its own event and not some other entry.
    #[schema(format = DateTime)]
    pub sequenced_at: String,
}

/// An entry with its raw leaf and decoded view.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EntryView {
    pub index: u64,
    /// Base64 of the exact leaf bytes that are hashed.
    #[schema(format = Byte)]
    pub leaf: String,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub leaf_hash: String,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub chain_hash: String,
    /// The ledger's sequencing time (RFC 3339, UTC).
    #[schema(format = DateTime)]
    pub sequenced_at: String,
    pub id: String,
    pub kind: String,
    /// Key id of the signer.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub signer: String,
    /// The decoded signed payload.
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
    /// For a reader with a role (docs/PRIVACY.md), the disclosures of the
    /// values the payload commits to, in field order; absent for anyone
    /// else, and for an entry whose disclosures the server does not keep (a
    /// log restored from a backup taken without a reader token). Check each
    /// against the payload (`events::disclose`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disclosures: Option<Vec<String>>,
    /// For a reader with a role, the committed fields whose disclosure was
    /// destroyed by a redaction (their commitments stay in the leaf).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<Vec<String>>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EntryPage {
    pub entries: Vec<EntryView>,
    /// The start of the next page, if there are more entries.
    pub next: Option<u64>,
    pub tree_size: u64,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct InclusionProof {
    pub index: u64,
    pub tree_size: u64,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub leaf_hash: String,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub root: String,
    #[schema(value_type = Vec<HexHash>)]
    pub proof: Vec<String>,
    /// A signed checkpoint at `tree_size`.
    pub checkpoint: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ConsistencyProof {
    pub first: u64,
    pub second: u64,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub first_root: String,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub second_root: String,
    #[schema(value_type = Vec<HexHash>)]
    pub proof: Vec<String>,
    /// A signed checkpoint at `second`.
    pub checkpoint: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct LogInfo {
    /// The checkpoint origin and note key name.
    pub origin: String,
    /// The note verifier key.
    pub verifier_key: String,
    /// Key id of the ledger's own event key (role `ledger`).
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub ledger_key_id: String,
    pub tree_size: u64,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub root: String,
    /// `verifying`, `verified` or `failed`.
    pub verify_status: String,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TaskClassSummary {
    pub task_class: String,
    pub tier: String,
}

/// One evidence entry with everything needed to check it offline.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EvidenceProof {
    pub index: u64,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub leaf_hash: String,
    /// Base64 leaf bytes: re-hash them to get `leaf_hash`.
    #[schema(format = Byte)]
    pub leaf: String,
    /// Inclusion proof against the response's checkpoint.
    #[schema(value_type = Vec<HexHash>)]
    pub proof: Vec<String>,
}

/// A projection with its proof bundle: the signed checkpoint it was
/// computed at, and every evidence entry with an inclusion proof.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ProjectionResponse {
    pub checkpoint: String,
    pub verifier_key: String,
    pub tree_size: u64,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub root: String,
    /// The projection (docs/PROJECTIONS.md).
    #[schema(value_type = Object)]
    pub view: projections::TaskClassView,
    pub evidence: Vec<EvidenceProof>,
}

/// A projection's numbers alone, at a signed checkpoint: no evidence
/// entries and no proofs, so nothing in it can be checked against the log
/// by its reader. For display; a decision rests on [`ProjectionResponse`],
/// the committed state, or a replay (docs/API.md).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ViewResponse {
    /// The signed checkpoint of the tree the view was folded from.
    pub checkpoint: String,
    pub tree_size: u64,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub root: String,
    /// The projection (docs/PROJECTIONS.md), its evidence cited by index
    /// and leaf hash but not included.
    #[schema(value_type = Object)]
    pub view: projections::TaskClassView,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RecommendationResponse {
    /// The appended promotion.recommended entry.
    pub recommendation: WriteReceipt,
    /// The projection it was computed from, with its proof bundle.
    pub projection: ProjectionResponse,
}

/// The DSSE envelope every write posts (docs/FORMAT.md §6).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EnvelopeBody {
    /// Base64 of the canonical JSON payload.
    pub payload: String,
    /// `application/vnd.evidence-ledger.event+json`.
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    pub signatures: Vec<EnvelopeSig>,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct EnvelopeSig {
    pub keyid: String,
    pub sig: String,
}

/// One envelope's outcome in a batch: what `POST /v1/events` would have
/// answered for it alone.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BatchItem {
    /// 201 (appended), 200 (already in the log) or the refusal's status.
    pub status: u16,
    /// The write receipt, when `status` is 201 or 200.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt: Option<WriteReceipt>,
    /// Why the envelope was refused, when it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<Problem>,
}

/// The answer to a batch of envelopes.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct BatchResponse {
    /// One result per posted envelope, in the order posted.
    pub results: Vec<BatchItem>,
    /// How many envelopes were appended by this request (status 201).
    pub appended: u64,
    /// The tree size every receipt of this answer is proven in (its
    /// checkpoint); 0 when no envelope was acknowledged.
    pub tree_size: u64,
}

/// The `state.committed` entry an answer rests on, with its proofs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CommitmentProof {
    /// Its log index: the size of the log whose state it commits.
    pub index: u64,
    /// Base64 of the leaf bytes.
    #[schema(format = Byte)]
    pub leaf: String,
    /// RFC 6962 inclusion proof of the leaf in the checkpoint's tree.
    #[schema(value_type = Vec<HexHash>)]
    pub inclusion_proof: Vec<String>,
    /// RFC 6962 consistency proof from the committed size (`index`) to the
    /// checkpoint's size.
    #[schema(value_type = Vec<HexHash>)]
    pub consistency_proof: Vec<String>,
}

/// A task class's committed state with its proofs (docs/COMPLETENESS.md):
/// every case record of the class, the class record's place under the
/// committed state root, and the commitment's place in the signed log; or,
/// for a class that is not registered, its two neighbours.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StateResponse {
    pub task_class: String,
    /// The signed checkpoint the commitment is proven in.
    pub checkpoint: String,
    pub verifier_key: String,
    pub tree_size: u64,
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub root: String,
    pub commitment: CommitmentProof,
    /// The committed state root (hex) and how many classes it holds.
    #[schema(pattern = "^[0-9a-f]{64}$")]
    pub state_root: String,
    pub task_classes: u64,
    /// The class record, when the class is registered.
    #[schema(value_type = Option<Object>)]
    pub class: Option<projections::commit::ClassRecord>,
    #[schema(value_type = Option<Object>)]
    pub class_proof: Option<projections::commit::ClassProof>,
    /// Every case record of the class, sorted by case id.
    #[schema(value_type = Vec<Object>)]
    pub cases: Vec<projections::commit::CaseRecord>,
    /// For a class that is not registered: the classes just before and
    /// just after its name (either may be null).
    #[schema(value_type = Option<Vec<Option<Object>>>)]
    pub neighbours: Option<[Option<projections::commit::Neighbour>; 2]>,
    /// The decision numbers the records give at `view.now_micros`.
    #[schema(value_type = Option<Object>)]
    pub view: Option<projections::commit::CommittedView>,
}
