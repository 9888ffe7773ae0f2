#!/usr/bin/env bash
# A real filesystem that fills up: the server runs on a small tmpfs, writes
# until the disk is full, must refuse (503, a stable code) without
# acknowledging anything it did not persist, must keep serving verified
# reads (entries, inclusion proofs against a signed checkpoint) while the
# disk is full, and must recover when space returns. Needs root (mount). CI runs it; figures go to docs/TESTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${LEDGER_BIN:-target/debug/ledger}")
work=$(mktemp -d)
mnt="$work/disk"
mkdir -p "$mnt"
mount -t tmpfs -o size=4m tmpfs "$mnt"
cleanup() {
    [[ -n "${server:-}" ]] && kill "$server" 2>/dev/null || true
    sleep 0.2
    umount "$mnt" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
"$BIN" init --data-dir "$mnt/data" --origin disk.test/log > /dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" serve --data-dir "$mnt/data" --listen "127.0.0.1:$port" --anchor-interval-secs 0 2> "$work/server.log" &
server=$!
python3 - "$port" "$mnt" <<'PY'
# Signing and proof checks come from the evidence-ledger package
# (clients/python; .ci/run installs it); HTTP is plain urllib, so that
# every status is seen as it is.
import hashlib, json, subprocess, sys, time, urllib.error, urllib.request
from evidence_ledger.envelope import sign_payload
from evidence_ledger.merkle import verify_inclusion
from evidence_ledger.note import SigningKey, open_checkpoint

port, mnt = sys.argv[1], sys.argv[2]
server = f"http://127.0.0.1:{port}"


def http(method, url, body=None):
    req = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


for _ in range(300):
    try:
        if http("GET", server + "/readyz")[0] == 200:
            break
    except Exception:
        pass
    time.sleep(0.1)
vkey = json.loads(http("GET", server + "/v1/log")[1])["verifier_key"]
operator = SigningKey.load(f"{mnt}/data/operator.key")
harness = SigningKey.generate("harness")
rubric = "blake3:" + hashlib.sha256(b"rubric").hexdigest()


def post(key, kind, body):
    status, reply = http("POST", server + "/v1/events", sign_payload(key, kind, body).write_body())
    assert status == 201, (kind, status, reply[:300])


post(operator, "principal.enrolled", {"public_key": harness.public_key_b64, "identity": "harness", "roles": ["harness"]})
post(operator, "task_class.registered", {"task_class": "disk", "tiers": {"silver": {"min_cases_for_promotion": 1, "score_threshold": 0.5}, "gold": {"min_cases_for_promotion": 2, "score_threshold": 0.9}}, "failure_modes": [], "breakdown_keys": [], "rubric_digest": rubric, "initial_tier": "bronze"})

def run_started(i):
    return sign_payload(harness, "run.started", {"run_id": f"fill-{i}-" + "x" * 64, "task_class": "disk", "harness_version": "v" * 2000, "rubric_digest": rubric, "sandbox_image_digest": rubric.replace("blake3", "sha256"), "isolation_class": "microvm"}).to_json()

acked, codes, i = {}, {}, 0
while True:
    status, body = http("POST", server + "/v1/events", run_started(i))
    i += 1
    if status == 201:
        r = json.loads(body)
        acked[r["index"]] = r["leaf_hash"]
        continue
    code = json.loads(body).get("code")
    codes[code] = codes.get(code, 0) + 1
    assert status == 503 and code == "storage_unavailable", (status, body[:300])
    if codes[code] >= 5:
        break
print(f"disk full after {len(acked)} acknowledged writes; refused with {codes}")
# While the disk is full, reads go on: every acknowledged entry, with an
# inclusion proof checked against a checkpoint signed by the log key.
status, body = http("GET", server + "/checkpoint")
assert status == 200, ("checkpoint during the fault", status, body[:300])
cp, _ = open_checkpoint(body.decode(), [vkey])
size, root = cp.size, cp.root
assert size >= max(acked) + 1, (size, max(acked))
for index, leaf_hash in acked.items():
    status, body = http("GET", f"{server}/v1/entries/{index}")
    assert status == 200 and json.loads(body)["leaf_hash"] == leaf_hash, ("entry during the fault", index, status, body[:300])
    status, body = http("GET", f"{server}/v1/proofs/inclusion?index={index}&tree_size={size}")
    assert status == 200, ("proof during the fault", index, status, body[:300])
    proof = [bytes.fromhex(h) for h in json.loads(body)["proof"]]
    verify_inclusion(index, size, bytes.fromhex(leaf_hash), proof, root)
metrics = http("GET", server + "/metrics")[1].decode()
read_only = [l for l in metrics.splitlines() if l.startswith("ledger_storage_read_only")]
assert read_only == ["ledger_storage_read_only 1"], ("the read-only gauge during the fault", read_only)
print(f"during the fault: all {len(acked)} entries and proofs served and verified ({read_only[0]})")
# Space returns.
subprocess.run(["mount", "-o", "remount,size=64m", mnt], check=True)
for _ in range(200):
    status, body = http("POST", server + "/v1/events", run_started(i))
    i += 1
    if status == 201:
        r = json.loads(body)
        acked[r["index"]] = r["leaf_hash"]
        break
    time.sleep(0.05)
else:
    raise SystemExit("writes did not recover after space returned")
metrics = http("GET", server + "/metrics")[1].decode()
assert "ledger_storage_read_only 0" in metrics, "still read-only after recovering"
# Every acknowledged write is there, unchanged.
for index, leaf_hash in acked.items():
    status, body = http("GET", f"{server}/v1/entries/{index}")
    assert status == 200 and json.loads(body)["leaf_hash"] == leaf_hash, (index, status)
print(f"recovered; all {len(acked)} acknowledged writes present, 0 lost")
PY
# A graceful shutdown exits 0 once the filesystem has grown back.
kill "$server"; wait "$server"; server=
"$BIN" verify --quiet --data-dir "$mnt/data"
echo "full disk: OK"
