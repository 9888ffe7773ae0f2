#!/usr/bin/env bash
# Write to a witnessed checkpoint at a steady rate (target R2.5's second
# half): serves DIR (initialised when it does not exist) with a witness
# policy naming one `ledger witness serve` on this machine (quorum 1),
# submitting the grown head every WITNESS_INTERVAL seconds (1; the server's
# default is 5), and runs loadgen open loop at RATE events/s (2,000), one
# envelope per request, 32 clients, every receipt checked, for SECONDS.
# loadgen prints the write to log-signed receipt latency. Meanwhile the
# server's /metrics is read every 10 ms: each time the head has grown, the
# time until `ledger_witnessed_size` (the checkpoint `GET /checkpoint`
# serves, cosigned by the quorum) first covers that size is one sample:
# from a write's durable commit (when the head shows it) to a witnessed
# checkpoint covering it; add the receipt's latency (loadgen's figure)
# for the time from the write's request. Each sample is within one poll
# of the true figure for the newest entry of that head; the largest gap
# between two polls is printed with the p50, p99 and maximum.
#
#   cargo build --release -p api --bin ledger -p bench --bin loadgen
#   [RATE=2000] [WITNESS_INTERVAL=1] bash bench/witnessed.sh DIR [SECONDS]
set -euo pipefail
dir=$1
seconds=${2:-10}
rate=${RATE:-2000}
interval=${WITNESS_INTERVAL:-1}
bin=${LEDGER_BIN:-target/release/ledger}
loadgen=${LOADGEN_BIN:-target/release/loadgen}
pids=()
work=""
cleanup() {
    for p in ${pids[@]+"${pids[@]}"}; do kill -TERM "$p" 2>/dev/null || true; done
    for p in ${pids[@]+"${pids[@]}"}; do wait "$p" 2>/dev/null || true; done
    if [[ -n $work ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT
work=$(mktemp -d)
# Waits until "$@" succeeds, failing if process $pid exits or 60 s pass.
wait_for() {
    local pid=$1 deadline=$((SECONDS + 60))
    shift
    until "$@" > /dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || { echo "process $pid exited while waiting for: $*" >&2; exit 1; }
        (( SECONDS < deadline )) || { echo "timed out waiting for: $*" >&2; exit 1; }
        sleep 0.05
    done
}
checked() { [[ $(curl -fs "$base/metrics") == *$'\nledger_derived_check_status 1\n'* ]]; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
[[ -e $dir ]] || "$bin" init --data-dir "$dir" > /dev/null
port=$(free_port)
wport=$(free_port)
base="http://127.0.0.1:$port"
serve() {
    LEDGER_LOG=warn "$bin" serve --data-dir "$dir" --listen "127.0.0.1:$port" \
        --anchor-interval-secs 0 "$@" > /dev/null 2>&1 &
    pids+=($!)
    wait_for "$!" curl -fs "$base/readyz"
}
# The log's verifier key, from a first start without a policy.
serve
logkey=$(curl -fs "$base/v1/log/key" | tr -d '[:space:]')
kill -TERM "${pids[0]}"
wait "${pids[0]}" || true
pids=()
wkey=$("$bin" witness keygen --name bench.local/w1 --out "$work/w1.key" | sed -n 's/.*verifier key: *//p')
LEDGER_LOG=warn "$bin" witness serve --key "$work/w1.key" --log "$logkey" \
    --state-dir "$work/state" --listen "127.0.0.1:$wport" > /dev/null 2>&1 &
pids+=($!)
wait_for "$!" curl -fs "http://127.0.0.1:$wport/healthz"
cat > "$work/policy" <<EOF
log $logkey
witness w1 $wkey http://127.0.0.1:$wport
quorum w1
EOF
serve --witness-policy "$work/policy" --witness-interval-secs "$interval"
wait_for "${pids[-1]}" checked
# Polls until told to stop (a file written once the load has ended and
# two intervals have passed, so that its last heads can be witnessed).
python3 - "$base/metrics" "$work/stop" > "$work/samples" <<'EOF' &
import os, sys, time, urllib.request
url, stop = sys.argv[1], sys.argv[2]
while not os.path.exists(stop):
    t = time.monotonic()
    size = witnessed = None
    for line in urllib.request.urlopen(url).read().decode().splitlines():
        if line.startswith("ledger_tree_size "):
            size = int(float(line.split()[1]))
        elif line.startswith("ledger_witnessed_size "):
            witnessed = int(float(line.split()[1]))
    print(f"{t:.6f} {size} {witnessed}", flush=True)
    time.sleep(max(0.0, 0.010 - (time.monotonic() - t)))
EOF
poller=$!
pids+=("$poller")
"$loadgen" --server "$base" --operator-key "$dir/operator.key" --clients 32 \
    --rate "$rate" --seconds "$seconds"
sleep $((2 * interval + 1))
touch "$work/stop"
wait "$poller"
python3 - "$work/samples" <<'EOF'
import sys
rows = [line.split() for line in open(sys.argv[1])]
rows = [(float(t), int(s), int(w)) for t, s, w in rows if s != "None" and w != "None"]
lat, last = [], None
for i, (t, size, _) in enumerate(rows):
    if last is not None and size > last:
        seen = next((t2 for t2, _, w in rows[i:] if w >= size), None)
        if seen is None:
            print(f"head {size} not witnessed by the end of the run")
            sys.exit(1)
        lat.append(seen - t)
    last = size
if not lat:
    print("the head never grew")
    sys.exit(1)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1000
gap = max(b[0] - a[0] for a, b in zip(rows, rows[1:])) * 1000
print(f"durable write to witnessed checkpoint: p50 {q(0.5):.0f} ms, p99 {q(0.99):.0f} ms, max {lat[-1] * 1000:.0f} ms ({len(lat)} heads; polls at most {gap:.0f} ms apart)")
EOF
