#!/usr/bin/env bash
# Signed durable events per second through two `ledger serve` frontends of
# one log in PostgreSQL (target R2.8), measured as the sum of two load
# generators run at once, one against each frontend (32 clients each,
# batches of 64, every receipt checked). Each run uses a fresh schema, so
# runs and builds compare on equal logs. Prints one line per run, then the
# median. The servers' CPU (utime+stime from /proc) per acknowledged event
# is printed beside the rate.
#
# PG is a PostgreSQL URL the connecting role may create schemas in, e.g.
# postgres://postgres@127.0.0.1:55432/postgres (start one as
# ops/postgres.md says; fsync and synchronous_commit on).
#
#   cargo build --release -p api --bin ledger -p bench --bin loadgen
#   bash bench/frontends.sh PG [RUNS] [SECONDS]
# LEDGER_BIN / LOADGEN_BIN pick other builds (for an A/B comparison).
set -euo pipefail
pg=$1
runs=${2:-5}
seconds=${3:-10}
bin=${LEDGER_BIN:-target/release/ledger}
loadgen=${LOADGEN_BIN:-target/release/loadgen}
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rates=()
for run in $(seq "$runs"); do
    work=$(mktemp -d)
    schema="bench_frontends_$$_$run"
    "$bin" init --data-dir "$work/a" --storage "$pg" --schema "$schema" > /dev/null
    "$bin" init --data-dir "$work/b" --join --storage "$pg" --schema "$schema" \
        --log-key "$work/a/log.key" > /dev/null
    pa=$(free_port); pb=$(free_port)
    LEDGER_LOG=warn "$bin" serve --data-dir "$work/a" --listen "127.0.0.1:$pa" \
        --anchor-interval-secs 0 > /dev/null 2>&1 &
    sa=$!
    LEDGER_LOG=warn "$bin" serve --data-dir "$work/b" --listen "127.0.0.1:$pb" \
        --anchor-interval-secs 0 > /dev/null 2>&1 &
    sb=$!
    cleanup() {
        kill -TERM "$sa" "$sb" 2>/dev/null || true
        wait "$sa" "$sb" 2>/dev/null || true
    }
    trap cleanup EXIT
    for p in "$pa" "$pb"; do
        until curl -fs "http://127.0.0.1:$p/readyz" > /dev/null 2>&1; do sleep 0.05; done
    done
    size() { curl -fs "http://127.0.0.1:$pa/v1/log" | python3 -c 'import json,sys; print(json.load(sys.stdin)["tree_size"])'; }
    z0=$(size); ta0=$(ticks "$sa"); tb0=$(ticks "$sb"); t0=$(date +%s.%N)
    "$loadgen" --server "http://127.0.0.1:$pa" --operator-key "$work/a/operator.key" \
        --clients 32 --seconds "$seconds" --presign 60000 --batch 64 > "$work/la" 2>&1 &
    la=$!
    "$loadgen" --server "http://127.0.0.1:$pb" --operator-key "$work/a/operator.key" \
        --clients 32 --seconds "$seconds" --presign 60000 --batch 64 > "$work/lb" 2>&1 &
    lb=$!
    # Each load generator signs its envelopes before it starts its clock;
    # the rate is what both acknowledged over the span both were loading.
    wait "$la" || { cat "$work/la"; exit 1; }
    wait "$lb" || { cat "$work/lb"; exit 1; }
    z1=$(size); ta1=$(ticks "$sa"); tb1=$(ticks "$sb")
    rate=$(python3 - "$work/la" "$work/lb" <<'PY'
import re, sys
total = 0.0
for f in sys.argv[1:]:
    m = re.search(r"([0-9.]+) events/s", open(f).read())
    if not m:
        sys.exit(f"no rate in {f}: {open(f).read()[-500:]}")
    total += float(m.group(1))
print(f"{total:.0f}")
PY
)
    hz=$(getconf CLK_TCK)
    cpu=$(python3 -c "import sys; n=$z1-$z0; print(f'{1e6*(($ta1-$ta0)+($tb1-$tb0))/$hz/max(n,1):.1f}')")
    echo "run $run: $rate events/s (two frontends, sum of the load generators); servers' CPU $cpu us/event over $((z1 - z0)) entries"
    rates+=("$rate")
    cleanup
    trap - EXIT
    rm -rf "$work"
done
printf '%s\n' "${rates[@]}" | sort -n | awk '{ a[NR] = $1 } END { print "median " a[int((NR + 1) / 2)] " events/s over " NR " runs (" a[1] "-" a[NR] ")" }'
