#!/usr/bin/env bash
# Checks the ops material with the real tools:
#   - the systemd unit with `systemd-analyze verify`;
#   - the nginx config with `nginx -t`, then a real HTTPS request through
#     nginx to a live `ledger serve` on loopback;
#   - the alert rules with `promtool check rules` and `promtool test rules`;
#   - that every metric the alerts and the dashboard use is one the server
#     exports.
# Needs: systemd-analyze, nginx, promtool, openssl, python3 (CI installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${LEDGER_BIN:-target/debug/ledger}")
work=$(mktemp -d)
# Stops process $1 and waits for it to exit (a server still shutting down
# writes into the directories removed next): SIGTERM, then SIGKILL after 10 s.
stop() {
    kill "$1" 2>/dev/null || return 0
    for _ in $(seq 100); do
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -9 "$1" 2>/dev/null || true
}
cleanup() {
    [[ -n "${server:-}" ]] && stop "$server"
    [[ -n "${watcher:-}" ]] && stop "$watcher"
    [[ -f "$work/nginx.pid" ]] && stop "$(cat "$work/nginx.pid")"
    rm -rf "$work" "${tiles:-}"
}
trap cleanup EXIT

echo "-- systemd unit"
sed "s|/usr/local/bin/ledger|$BIN|" ops/systemd/evidence-ledger.service > "$work/evidence-ledger.service"
systemd-analyze verify --man=no "$work/evidence-ledger.service"

echo "-- alert rules"
promtool check rules ops/prometheus/alerts.yml
(cd ops/prometheus && promtool test rules alerts_test.yml)

echo "-- a live server behind nginx"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
tls_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" init --data-dir "$work/data" --origin ops.test/log > /dev/null
static_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# nginx's workers run as another user: the tiles live outside the private $work.
tiles=$(mktemp -d)
chmod 755 "$tiles"
"$BIN" serve --data-dir "$work/data" --listen "127.0.0.1:$port" --tiles-dir "$tiles" --tiles-sync-secs 1 2> "$work/server.log" &
server=$!
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=localhost" \
    -keyout "$work/privkey.pem" -out "$work/fullchain.pem" 2> /dev/null
sed -e "s|127.0.0.1:7878|127.0.0.1:$port|" -e "s|listen 443 ssl http2;|listen 127.0.0.1:$tls_port ssl http2;|" \
    -e "s|/etc/evidence-ledger/tls|$work|g" ops/nginx/evidence-ledger.conf > "$work/site.conf"
sed -e "s|listen 443 ssl http2;|listen 127.0.0.1:$static_port;|" -e "s|/etc/evidence-ledger/tls|$work|g" \
    -e "s|root /var/lib/evidence-ledger/tiles;|root $tiles;|" ops/nginx/tiles-static.conf > "$work/tiles.conf"
cat > "$work/nginx.conf" <<CONF
worker_processes 1;
pid $work/nginx.pid;
error_log $work/nginx-error.log;
events { worker_connections 64; }
http {
    access_log $work/nginx-access.log;
    client_body_temp_path $work/body;
    proxy_temp_path $work/proxy;
    include $work/site.conf;
    include $work/tiles.conf;
}
CONF
nginx -t -c "$work/nginx.conf" -p "$work"
nginx -c "$work/nginx.conf" -p "$work"
python3 - "$tls_port" "$port" <<'PY'
import json, ssl, sys, time, urllib.request
tls, plain = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
for _ in range(300):
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{plain}/readyz", timeout=1).status == 200:
            break
    except Exception:
        time.sleep(0.1)
r = urllib.request.urlopen(urllib.request.Request(f"https://127.0.0.1:{tls}/v1/log", headers={"X-Request-Id": "ops-test-1"}), context=ctx, timeout=5)
info = json.load(r)
assert r.status == 200 and info["origin"] == "ops.test/log", info
assert r.headers["x-request-id"] == "ops-test-1", f"the client's request id through the proxy: {r.headers['x-request-id']}"
r = urllib.request.urlopen(urllib.request.Request(f"https://127.0.0.1:{tls}/v1/log"), context=ctx, timeout=5)
assert len(r.headers["x-request-id"] or "") == 32, f"nginx gives one when the client sent none: {r.headers['x-request-id']}"
try:
    urllib.request.urlopen(f"https://127.0.0.1:{tls}/metrics", context=ctx, timeout=5)
    raise SystemExit("metrics must not be exposed through the proxy")
except urllib.error.HTTPError as e:
    assert e.code == 404
print(f"through nginx over TLS: size {info['tree_size']}, key {info['verifier_key'][:40]}...")
PY

echo "-- the static tiles directory (serve --tiles-dir) through nginx, read by an independent reader"
python3 - "$static_port" "$tiles" <<'PY'
import os, sys, time, urllib.request
base, tiles = f"http://127.0.0.1:{sys.argv[1]}", sys.argv[2]
for _ in range(300):
    if os.path.exists(os.path.join(tiles, "checkpoint")):
        break
    time.sleep(0.1)
else:
    sys.exit("serve --tiles-dir wrote no checkpoint")
r = urllib.request.urlopen(f"{base}/checkpoint", timeout=5)
assert r.headers["Cache-Control"] == "no-cache", r.headers
assert r.headers["Content-Type"].startswith("text/plain"), r.headers
size = int(r.read().decode().split("\n")[1])
r = urllib.request.urlopen(f"{base}/tile/0/000.p/{size}", timeout=5)
assert r.headers["Cache-Control"] == "public, max-age=604800, immutable", r.headers
assert r.headers["Access-Control-Allow-Origin"] == "*", r.headers
assert len(r.read()) == 32 * size
PY
python3 api/tests/tiles_reader.py --base "http://127.0.0.1:$static_port" --api "http://127.0.0.1:$port"

echo "-- ledger watch follows the static tiles through nginx, and exports its metrics"
vkey=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode().strip())' "http://127.0.0.1:$port/v1/log/key")
"$BIN" watch --once --log "http://127.0.0.1:$static_port" --key "$vkey" --state "$work/watch.checkpoint"
watch_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" watch --log "http://127.0.0.1:$static_port" --key "$vkey" --state "$work/watch.checkpoint" \
    --interval 1 --metrics-listen "127.0.0.1:$watch_port" > /dev/null 2> "$work/watch.log" &
watcher=$!

echo "-- every metric the alerts and dashboard use is exported"
python3 - "$port" "$watch_port" <<'PY'
import json, re, sys, time, urllib.error, urllib.request
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/no-such-route")  # so error counters have samples
except urllib.error.HTTPError:
    pass
exported = set()
# The server's metrics, and the watcher's (ledger_watch_*).
for _ in range(300):
    try:
        watch = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[2]}/metrics").read().decode()
        break
    except Exception:
        time.sleep(0.1)
else:
    sys.exit("the watcher serves no metrics")
server = urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics").read().decode()
for line in (server + "\n" + watch).splitlines():
    if line and not line.startswith("#"):
        exported.add(re.split(r"[{ ]", line)[0])
name = r"\bledger_[a-z_]+(?=[\[{\s)]|$)"
used = set(re.findall(name, open("ops/prometheus/alerts.yml").read()))
for p in json.load(open("ops/grafana/evidence-ledger.json"))["panels"]:
    for t in p["targets"]:
        used |= set(re.findall(name, t["expr"]))
missing = sorted(m for m in used if m not in exported)
assert not missing, f"used but not exported: {missing}"
print(f"{len(used)} metrics used, all exported")
PY
echo "ops checks: OK"
