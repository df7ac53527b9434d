#!/usr/bin/env bash
# Memory and restart with many far-future jobs: puts N delayed jobs
# (100-byte bodies, due in 1 to 24 hours) into a fresh embedded store,
# reports the server's RSS, kills it with SIGKILL, and times the restart
# until /healthz answers, then reports RSS again.
#
#   bash scripts/bench-memory.sh            # N=10,000,000 (a few minutes, ~3 GB of disk)
#   N=1000000 bash scripts/bench-memory.sh
#   DELAYQ_BIN=/tmp/old bash scripts/bench-memory.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-10000000}"
work=$(mktemp -d)
go build -o "$work/delayq" ./cmd/delayq
bin="${DELAYQ_BIN:-$work/delayq}" # DELAYQ_BIN=path: measure that binary (A/B against an older build)
trap 'kill -9 "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
start() {
  "$bin" serve --http-addr "127.0.0.1:$port" --beanstalk-addr "" --data-dir "$work/data" --log-level "${1:-info}" 2>>"$work/log" &
  pid=$!
}
healthy() { curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; }
rss() { awk '/VmRSS/ {printf "%.1f MiB", $2/1024}' "/proc/$pid/status"; }

start
until healthy; do sleep 0.05; done
echo "putting $N delayed jobs (due in 1h..24h, 100-byte bodies)"
"$bin" bench "http://127.0.0.1:$port" --mode put -n "$N" -c 4 --batch 1000 --body 100 \
  --delay 1h --spread 23h --timeout 30m --pid "$pid" --line
echo "RSS after the puts: $(rss)"
du -sh "$work/data" | awk '{print "data dir: " $1}'
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
t0=$(date +%s.%N)
start debug # Pebble's WAL replay lines are logged at debug
until healthy; do sleep 0.01; done
t1=$(date +%s.%N)
echo "restart after kill -9: serving in $(echo "$t1 - $t0" | bc) s"
echo "RSS after the restart: $(rss)"
# The server's own account of the restart: how long the store took to open
# (Pebble's WAL replay and the near-future index) out of the time to serve.
grep 'msg="store opened"' "$work/log" | tail -1 | grep -o 'took=[^ ]*' | sed 's/^/store open: /' || true
# Its parts: delayq's own check of the newest WAL, pebble.Open (WAL replay
# and the flush of what it replayed), and loading the indexes into memory.
grep 'msg="diskstore: pebble opened"' "$work/log" | tail -1 | grep -o 'wal_check=[^ ]* pebble_open=[^ ]*' | sed 's/^/open parts: /' || true
grep 'msg="diskstore: memory loaded"' "$work/log" | tail -1 | grep -o 'took=[^ ]*' | sed 's/^/memory load: /' || true
grep -o 'stopped reading at offset: ([^)]*); replayed [0-9]* keys' "$work/log" | sed 's/.*: \([0-9]*\)); replayed \([0-9]*\) keys/WAL replayed: \1 bytes, \2 keys/' || true
curl -s "http://127.0.0.1:$port/v1/topics" | head -c 300; echo
