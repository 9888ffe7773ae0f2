#!/usr/bin/env bash
# Completeness by replay at scale: `ledger audit --projections` against a
# server on DATA_DIR (a copy is served; the original is left alone), first
# with an empty replica (a full replay of the log), then again after the
# load generator has added about NEW more entries (an incremental replay).
#
#   bash bench/replay.sh /var/tmp/s1m-new [NEW]
#
# Prints the wall time, the peak RSS of the auditor and the replica's size
# on disk for both runs. Needs release builds of `ledger` and `loadgen`:
#   cargo build --release --locked -p api --bin ledger -p bench --bin loadgen
set -euo pipefail
cd "$(dirname "$0")/.."
src=${1:?usage: bench/replay.sh DATA_DIR [NEW]}
new=${2:-10000}
bin=target/release
work=$(mktemp -d /var/tmp/ledger-replay.XXXXXX)
cleanup() {
    [[ -n "${server:-}" ]] && kill "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

cp -r "$src" "$work/data"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
"$bin/ledger" serve --data-dir "$work/data" --listen "127.0.0.1:$port" 2> "$work/server.log" &
server=$!
for _ in $(seq 600); do
    curl -sf "$base/readyz" > /dev/null && break
    sleep 0.5
done
curl -sf "$base/readyz" > /dev/null || { echo "the server did not become ready"; exit 1; }
vkey=$(curl -sf "$base/v1/log/key")
size() { curl -sf "$base/v1/log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tree_size"])'; }

audit() {
    /usr/bin/time -f "%e s wall, %M KiB peak RSS" -o "$work/time" \
        "$bin/ledger" audit --quiet --init --server "$base" --key "$vkey" \
        --trusted "$work/trusted" --projections "$work/replica"
    echo "  $(cat "$work/time"); replica $(du -sh "$work/replica" | cut -f1)"
}

echo "full replay of $(size) entries:"
audit
echo "adding about $new entries with the load generator"
rate=2000
"$bin/loadgen" --server "$base" --operator-key "$work/data/operator.key" \
    --clients 8 --batch 100 --rate "$rate" --seconds $(( (new + rate - 1) / rate )) > "$work/load.log"
echo "incremental replay to $(size) entries:"
audit
