#!/usr/bin/env bash
# Recovery after a crash at full write rate: `ledger serve` takes batched
# writes from loadgen (64 clients, batches of 64) and is killed with SIGKILL
# after KILL_AFTER seconds of load; it is then started again and the times
# from spawning it to /healthz and to the event state caught up (/readyz no
# longer 503 ledger_unavailable: writes are taken) are printed. Repeats
# ROUNDS times on the same, growing data directory.
#
#   cargo build --release -p api --bin ledger -p bench --bin loadgen
#   bash bench/recovery_under_load.sh [ROUNDS] [KILL_AFTER]
set -euo pipefail
rounds=${1:-3}
kill_after=${2:-20}
bin=${LEDGER_BIN:-target/release/ledger}
loadgen=${LOADGEN_BIN:-target/release/loadgen}
work=$(mktemp -d /var/tmp/recovery-load.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin" init --data-dir "$work/data" > /dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"

# Prints the milliseconds from $1 (date +%s%N) until $2 returns true.
wait_ms() {
    local t0=$1
    shift
    until "$@"; do sleep 0.002; done
    echo $(( ($(date +%s%N) - t0) / 1000000 ))
}
healthy() { curl -fs "$base/healthz" > /dev/null 2>&1; }
caught_up() {
    local body
    body=$(curl -s "$base/readyz" 2>/dev/null) || return 1
    [[ -n $body && $body != *ledger_unavailable* ]]
}

start() {
    local t0
    t0=$(date +%s%N)
    LEDGER_LOG=warn "$bin" serve --data-dir "$work/data" --listen "127.0.0.1:$port" \
        --anchor-interval-secs 0 > /dev/null 2>&1 &
    server=$!
    h=$(wait_ms "$t0" healthy)
    c=$(wait_ms "$t0" caught_up)
}

start
for round in $(seq 1 "$rounds"); do
    until curl -fs "$base/readyz" > /dev/null 2>&1; do sleep 0.05; done
    "$loadgen" --server "$base" --operator-key "$work/data/operator.key" --clients 64 \
        --seconds $((kill_after + 10)) --presign 400000 --batch 64 > "$work/load.txt" 2>&1 &
    load=$!
    sleep "$kill_after"
    size=$(curl -fs "$base/v1/log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tree_size"])')
    kill -9 "$server"
    wait "$server" 2> /dev/null || true
    wait "$load" 2> /dev/null || true
    start
    echo "round $round: SIGKILL at about $size entries under load; restart: /healthz ${h} ms, event state caught up ${c} ms"
done
kill "$server"
wait "$server" 2> /dev/null || true
