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
# serves, cosigned by the quorum) first covers that size is one sample of
# write to witnessed checkpoint. Each sample is within one 10 ms poll of
# the true figure for the newest entry of that head. Prints their p50,
# p99 and maximum.
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
work=$(mktemp -d)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
[[ -e $dir ]] || "$bin" init --data-dir "$dir" > /dev/null
port=$(free_port)
wport=$(free_port)
base="http://127.0.0.1:$port"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
serve() {
    LEDGER_LOG=warn "$bin" serve --data-dir "$dir" --listen "127.0.0.1:$port" \
        --anchor-interval-secs 0 "$@" > /dev/null 2>&1 &
    pids+=($!)
    until curl -fs "$base/readyz" > /dev/null 2>&1; do sleep 0.05; done
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
until curl -s -o /dev/null "http://127.0.0.1:$wport/" 2>/dev/null; do sleep 0.05; done
cat > "$work/policy" <<EOF
log $logkey
witness w1 $wkey http://127.0.0.1:$wport
quorum w1
EOF
serve --witness-policy "$work/policy" --witness-interval-secs "$interval"
until curl -fs "$base/metrics" | grep -q '^ledger_derived_check_status 1$'; do sleep 0.1; done
python3 - "$base/metrics" "$((seconds + 2 * interval + 3))" > "$work/samples" <<'EOF' &
import sys, time, urllib.request
url, secs = sys.argv[1], float(sys.argv[2])
end = time.monotonic() + secs
while time.monotonic() < end:
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
"$loadgen" --server "$base" --operator-key "$dir/operator.key" --clients 32 \
    --rate "$rate" --seconds "$seconds"
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
print(f"write to witnessed checkpoint: p50 {q(0.5):.0f} ms, p99 {q(0.99):.0f} ms, max {lat[-1] * 1000:.0f} ms ({len(lat)} heads, polled every 10 ms)")
EOF
