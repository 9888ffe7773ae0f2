#!/usr/bin/env bash
# The cost of one projection answer with its evidence: starts `ledger serve`
# on DIR (a log grown by `scale`), waits for its background checks to end
# and its CPU to go idle, then asks `GET /v1/task-classes/{name}` for the
# first task class REQUESTS times at one tree size (no write in between, so
# each answer reads back and proves the same evidence). Prints the p50,
# p90 and p99 of curl's total time and the server's CPU per answer (from
# /proc), then stops the server. With BASE_BIN set, it does the same with
# that build after this one, ROUNDS times, alternating: an A/B on one log.
#
#   cargo build --release -p api --bin ledger
#   bash bench/projection_answers.sh DIR [REQUESTS] [ROUNDS]
#   BASE_BIN=/path/to/other/ledger bash bench/projection_answers.sh DIR 200 2
set -euo pipefail
dir=$1
requests=${2:-200}
rounds=${3:-1}
bin=${LEDGER_BIN:-target/release/ledger}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
checked() { curl -fs "$base/metrics" 2>/dev/null | grep -q '^ledger_derived_check_status 1$'; }

measure() {
    local name=$1 b=$2
    LEDGER_LOG=warn "$b" serve --data-dir "$dir" --listen "127.0.0.1:$port" \
        --anchor-interval-secs 0 > /dev/null 2>&1 &
    local pid=$!
    until checked; do sleep 0.5; done
    # Idle: under 10 ticks (0.1 s) of CPU in 2 s.
    while true; do
        local a b2
        a=$(cpu_ticks "$pid")
        sleep 2
        b2=$(cpu_ticks "$pid")
        [ $((b2 - a)) -lt 10 ] && break
    done
    local class
    class=$(curl -fs "$base/v1/task-classes" | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["task_class"])')
    local url="$base/v1/task-classes/$class"
    for _ in 1 2 3 4 5; do curl -fs -o /dev/null "$url"; done
    local c0 c1 times
    c0=$(cpu_ticks "$pid")
    times=$(for _ in $(seq 1 "$requests"); do curl -fs -o /dev/null -w '%{time_total}\n' "$url"; done | sort -n)
    c1=$(cpu_ticks "$pid")
    local hz
    hz=$(getconf CLK_TCK)
    echo "$times" | awk -v name="$name" -v cpu=$((c1 - c0)) -v hz="$hz" -v n="$requests" '
        { t[NR] = $1 }
        END {
            printf "%s: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms; server CPU %.2f ms per answer (%d answers)\n",
                name, t[int(NR * 0.5)] * 1000, t[int(NR * 0.9)] * 1000, t[int(NR * 0.99)] * 1000,
                cpu * 1000 / hz / n, n
        }'
    kill -TERM "$pid"
    wait "$pid" || true
}

for i in $(seq 1 "$rounds"); do
    measure "round $i, $bin" "$bin"
    if [ -n "${BASE_BIN:-}" ]; then
        measure "round $i, $BASE_BIN" "$BASE_BIN"
    fi
done
