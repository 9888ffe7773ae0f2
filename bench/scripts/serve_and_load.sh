#!/bin/bash
# Targets 1 and 2 with the server as its own process, on a fresh directory.
# usage: bench/scripts/serve_and_load.sh BINDIR t1|t2   (BINDIR: where ledger and loadgen are, e.g. target/release)
B=$1; MODE=$2
D=/tmp/bl_ab; rm -rf $D
$B/ledger init --data-dir $D >/dev/null 2>&1
$B/ledger serve --data-dir $D --listen 127.0.0.1:7979 > /tmp/ab_serve.log 2>&1 &
SP=$!
for i in $(seq 1 50); do curl -sf http://127.0.0.1:7979/healthz >/dev/null && break; sleep 0.2; done
if [ $MODE = t1 ]; then
  $B/loadgen --server http://127.0.0.1:7979 --operator-key $D/operator.key --clients 64 --seconds 10 --presign 40000 2>&1 | grep acknowledged
else
  $B/loadgen --server http://127.0.0.1:7979 --operator-key $D/operator.key --clients 32 --rate 2000 --seconds 10 2>&1 | grep acknowledged
fi
kill $SP; wait $SP 2>/dev/null
