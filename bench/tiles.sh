#!/usr/bin/env bash
# Tile reads from `ledger serve` and a whole-log walk by the watcher (R2.7):
# starts the server on DIR, waits until its background checks are done (the
# whole log walked again and the lookup tables checked: minutes at 10M),
# then RUNS times each: `tileload` over hash tiles of levels 0-2, over level
# 0 alone, and over entry bundles, each for SECONDS with CLIENTS clients;
# then one `ledger watch --once` from an empty state, timed with its peak
# RSS and the server's CPU. Stops the server.
#
#   cargo build --release -p api --bin ledger -p bench --bin tileload
#   bash bench/tiles.sh DIR [RUNS] [SECONDS] [CLIENTS]
set -euo pipefail
dir=$1
runs=${2:-3}
seconds=${3:-6}
clients=${4:-8}
bin=${LEDGER_BIN:-target/release/ledger}
tileload=${TILELOAD_BIN:-target/release/tileload}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
work=$(mktemp -d)
log="$work/serve.log"

LEDGER_LOG=info "$bin" serve --data-dir "$dir" --listen "127.0.0.1:$port" \
    --anchor-interval-secs 0 > "$log" 2>&1 &
pid=$!
stop() {
    kill -TERM "$pid" 2> /dev/null || true
    wait "$pid" 2> /dev/null || true
    rm -rf "$work"
}
trap stop EXIT
until grep -q "the lookup tables agree with the log" "$log"; do
    if grep -q "FAILED" "$log" || ! kill -0 "$pid" 2> /dev/null; then
        echo "the server failed or stopped:" >&2
        tail -5 "$log" >&2
        exit 1
    fi
    sleep 2
done
echo "server idle after its background checks; size $(curl -fs "$base/checkpoint" | sed -n 2p)"

for r in $(seq 1 "$runs"); do
    for mix in "hashes 0,1,2" "hashes 0" "entries 0"; do
        set -- $mix
        echo "run $r, $1 ${2/#/levels }: $("$tileload" --server "$base" --kind "$1" --levels "$2" \
            --clients "$clients" --seconds "$seconds" --server-pid "$pid")"
    done
done

vkey=$(curl -fs "$base/v1/log/key")
cpu() { awk '{print $14 + $15}' "/proc/$pid/stat"; }
before=$(cpu)
/usr/bin/time -f "watcher: %e s wall, %U s user, %S s system, peak RSS %M KB" \
    "$bin" watch --log "$base" --key "$vkey" --state "$work/watch.checkpoint" --once
after=$(cpu)
echo "server CPU during the walk: $(( (after - before) / 100 )) s"
