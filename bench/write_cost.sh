#!/usr/bin/env bash
# What one batched write costs on a given log: serves DIR (a fresh one when
# DIR does not exist: it is initialised), waits until it is ready and idle, runs
# loadgen for SECONDS (64 clients, batches of 64, every receipt checked)
# and prints, per acknowledged event: the server's CPU (utime+stime from
# /proc), the bytes the block device wrote (/proc/diskstats, the device
# holding DIR: other writers on the machine count too), the bytes the
# server's write calls passed (/proc/PID/io wchar) and the bytes the
# kernel charged the server for writing back (/proc/PID/io write_bytes).
# The load generator's CPU is reported apart by loadgen itself.
#
# With RUNS=N, N runs one after the other on the same server (a start at
# 10M entries is followed by minutes of background checks; the server is
# idle again between runs once the load generator has stopped). CLIENTS
# (64) and BATCH (64; 1 posts one envelope per request) shape the load.
# SERVER_LOG=FILE keeps the server's log (at LEDGER_LOG, `warn` by
# default; `info` shows each seal of the data file and how long it took).
# Where `perf` is installed, the instructions the server retired per event
# are printed too (`perf stat`): a figure a noisy machine does not move.
#
#   cargo build --release -p api --bin ledger -p bench --bin loadgen
#   [RUNS=N] [CLIENTS=C] [BATCH=B] bash bench/write_cost.sh DIR [SECONDS]
set -euo pipefail
dir=$1
seconds=${2:-10}
clients=${CLIENTS:-64}
batch=${BATCH:-64}
bin=${LEDGER_BIN:-target/release/ledger}
loadgen=${LOADGEN_BIN:-target/release/loadgen}
[[ -e $dir ]] || "$bin" init --data-dir "$dir" > /dev/null
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
LEDGER_LOG=${LEDGER_LOG:-warn} "$bin" serve --data-dir "$dir" --listen "127.0.0.1:$port" \
    --anchor-interval-secs 0 > "${SERVER_LOG:-/dev/null}" 2>&1 &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
until curl -fs "$base/readyz" > /dev/null 2>&1; do sleep 0.05; done
until curl -fs "$base/metrics" 2>/dev/null | grep -q '^ledger_derived_check_status 1$'; do sleep 0.1; done
dev=$(basename "$(df --output=source "$dir" | tail -1)")
sectors() { awk -v d="$dev" '$3 == d { print $10 }' /proc/diskstats; }
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
# The background check goes on after signing is allowed (the lookup
# tables): measure only once the server is idle (under 5% of a core for
# a second).
for run in $(seq "${RUNS:-1}"); do
while :; do
    a=$(ticks); sleep 1; b=$(ticks)
    (( b - a < $(getconf CLK_TCK) / 20 )) && break
done
io() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/io"; }
size0=$(curl -fs "$base/v1/log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tree_size"])')
s0=$(sectors); t0=$(ticks); w0=$(io wchar); b0=$(io write_bytes)
# Instructions the server retires during the load (`perf stat`, when the
# machine has it): a figure a noisy machine does not move.
stat=$(mktemp)
if command -v perf > /dev/null 2>&1; then
    perf stat -x, -e instructions -p "$pid" -o "$stat" &
    perf_pid=$!
    sleep 0.2
fi
batch_args=()
(( batch > 1 )) && batch_args=(--batch "$batch")
out=$(mktemp)
"$loadgen" --server "$base" --operator-key "$dir/operator.key" --clients "$clients" \
    --seconds "$seconds" --presign 200000 "${batch_args[@]}" > "$out" 2>&1
grep -E "acknowledged|CPU" "$out"
s1=$(sectors); t1=$(ticks); w1=$(io wchar); b1=$(io write_bytes)
if [[ -n ${perf_pid:-} ]]; then
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    unset perf_pid
fi
instructions=$(awk -F, '$3 ~ /^instructions/ { print $1 }' "$stat")
rm -f "$out" "$stat"
size1=$(curl -fs "$base/v1/log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tree_size"])')
hz=$(getconf CLK_TCK)
python3 - "$size0" "$size1" "$s0" "$s1" "$t0" "$t1" "$w0" "$w1" "$b0" "$b1" "$hz" "${instructions:-0}" <<'PY'
import sys
z0, z1, s0, s1, t0, t1, w0, w1, b0, b1, hz = map(int, sys.argv[1:12])
try:
    instructions = int(sys.argv[12])
except ValueError:
    instructions = 0
n = z1 - z0
print(f"log {z0} -> {z1}: {n} entries")
print(f"server CPU {1e6 * (t1 - t0) / hz / n:.1f} us/event; device writes {512 * (s1 - s0) / n:.0f} B/event;"
      f" write calls {(w1 - w0) / n:.0f} B/event; written back {(b1 - b0) / n:.0f} B/event"
      + (f"; {instructions / n / 1000:.1f}k instructions/event" if instructions
         else "; instructions not counted (perf missing, or no hardware counters on this machine)"))
PY
done
