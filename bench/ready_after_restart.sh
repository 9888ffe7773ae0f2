#!/usr/bin/env bash
# Ready time after a clean restart: starts `ledger serve` on DIR, prints the
# milliseconds from spawning it to /healthz, to /readyz 200 (the walk since
# the verified head, the anchors, the projection loaded) and to the
# background check's end (ledger_derived_check_status 1: the whole log
# walked again, the lookup tables, the event state and the projection
# checked), then stops it with SIGTERM (a clean stop) and starts it again,
# STARTS times. The first start of a build without a verified head in DIR
# walks the whole log before it is ready; the ones after it do not.
# SERVER_LOG=FILE keeps the servers' logs (appended, at LEDGER_LOG: `warn`
# by default; `info` shows how long the event state took to catch up).
#
#   cargo build --release -p api --bin ledger
#   [SERVER_LOG=FILE LEDGER_LOG=info] bash bench/ready_after_restart.sh DIR [STARTS]
set -euo pipefail
dir=$1
starts=${2:-4}
bin=${LEDGER_BIN:-target/release/ledger}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"

ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
healthy() { curl -fs "$base/healthz" > /dev/null 2>&1; }
ready() { curl -fs "$base/readyz" > /dev/null 2>&1; }
checked() { curl -fs "$base/metrics" 2>/dev/null | grep -q '^ledger_derived_check_status 1$'; }

for i in $(seq 1 "$starts"); do
    t0=$(date +%s%N)
    LEDGER_LOG=${LEDGER_LOG:-warn} "$bin" serve --data-dir "$dir" --listen "127.0.0.1:$port" \
        --anchor-interval-secs 0 >> "${SERVER_LOG:-/dev/null}" 2>&1 &
    pid=$!
    until healthy; do sleep 0.002; done
    h=$(ms_since "$t0")
    until ready; do sleep 0.005; done
    r=$(ms_since "$t0")
    until checked; do sleep 0.05; done
    c=$(ms_since "$t0")
    rss=$(awk '/VmHWM/ {print int($2/1024)}' "/proc/$pid/status")
    kill -TERM "$pid"
    wait "$pid" || true
    echo "start $i: /healthz ${h} ms, /readyz ${r} ms, background check done ${c} ms, peak RSS ${rss} MB"
done
