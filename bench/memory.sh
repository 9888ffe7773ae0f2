#!/usr/bin/env bash
# Resident memory of `ledger serve` over a whole start and a clean stop, by
# phase: it samples VmRSS and VmHWM every 0.2 s and prints the peak (VmHWM)
# at the end of each phase:
#   ready     /readyz answers 200;
#   checked   the background check is done (ledger_derived_check_status 1);
#   idle      the lookup tables checked too: the server's CPU idle for 2 s;
#   stopped   the last sample before the process exited after SIGTERM (a
#             clean stop saves the derived state: the projection checkpoint
#             and the event-state snapshot, as the periodic save does);
# and the resident memory once idle (VmRSS, with RssAnon: the heap).
# Nothing is written to DIR but what a start and a stop write.
#
#   cargo build --release -p api --bin ledger
#   bash bench/memory.sh DIR [STARTS]
#
# MALLOC_CONF for the allocator (jemalloc) is passed as _RJEM_MALLOC_CONF.
set -euo pipefail
dir=$1
starts=${2:-1}
bin=${LEDGER_BIN:-target/release/ledger}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
samples=$(mktemp)
trap 'rm -f "$samples"' EXIT

ready() { curl -fs "$base/readyz" > /dev/null 2>&1; }
checked() { curl -fs "$base/metrics" 2>/dev/null | grep -q '^ledger_derived_check_status 1$'; }
mb() { awk -v k="$1" '$1 == k":" {print int($2/1024)}' "/proc/$pid/status"; }
cpu() { awk '{print $14+$15}' "/proc/$pid/stat"; }

for i in $(seq 1 "$starts"); do
    LEDGER_PROJECTION_SAVE_SECS=${LEDGER_PROJECTION_SAVE_SECS:-3600} LEDGER_LOG=warn \
        "$bin" serve --data-dir "$dir" --listen "127.0.0.1:$port" \
        --anchor-interval-secs 0 > /dev/null 2>&1 &
    pid=$!
    ( while kill -0 "$pid" 2> /dev/null; do
        awk '/^VmHWM/ {h=int($2/1024)} END {print h}' "/proc/$pid/status" 2> /dev/null || true
        sleep 0.2
    done ) > "$samples" &
    sampler=$!
    until ready; do sleep 0.05; done
    at_ready=$(mb VmHWM)
    until checked; do sleep 0.5; done
    at_checked=$(mb VmHWM)
    while true; do
        a=$(cpu); sleep 2; b=$(cpu)
        [ $((b - a)) -lt 10 ] && break
    done
    at_idle=$(mb VmHWM)
    rss=$(mb VmRSS)
    anon=$(mb RssAnon)
    kill -TERM "$pid"
    wait "$pid" || true
    wait "$sampler" || true
    at_stop=$(grep -v '^$' "$samples" | tail -1)
    echo "start $i: peak RSS ${at_ready} MB at ready, ${at_checked} MB when checked, ${at_idle} MB when idle, ${at_stop} MB through the stop; idle RSS ${rss} MB (heap ${anon} MB)"
done
