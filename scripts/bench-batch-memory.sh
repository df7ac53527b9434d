#!/usr/bin/env bash
# Memory under concurrent maximal batch puts (issue 18, item 9): starts a
# real server binary on a fresh embedded store, sends C concurrent batch
# puts of 1,000 jobs (delayq.MaxBatch) whose bodies are 65,535 bytes
# (the default --max-body) written as body_base64 (the longest a full
# batch can be on the wire: ~87 MB), and reads the server's VmRSS before
# and VmHWM (peak RSS) after from /proc/PID/status. Each curl streams
# its body from a file (-T), so the client holds none of it in memory.
#
#   bash scripts/bench-batch-memory.sh          # C=12, ~10-30 s
#   C=50 bash scripts/bench-batch-memory.sh
#   DELAYQ_BIN=/tmp/old bash scripts/bench-batch-memory.sh   # A/B against an older build
#   EXTRA="--max-inflight-bytes 134217728" bash scripts/bench-batch-memory.sh
#   PPROF=/tmp/heap bash scripts/bench-batch-memory.sh   # heap profiles: /tmp/heap.N.pb.gz during, /tmp/heap.end.pb.gz after
#   (then: go tool pprof -sample_index=inuse_space -top /tmp/heap.3.pb.gz;
#    go tool pprof -sample_index=alloc_space -top /tmp/heap.end.pb.gz)
#
# Prints one line: statuses of the C answers (201 stored, 503 refused
# for want of budget; a refused batch stores nothing and may be retried),
# RSS before, peak RSS, growth, and the budget's peak charge from
# /metrics.
set -euo pipefail
cd "$(dirname "$0")/.."
C="${C:-12}"
JOBS="${JOBS:-1000}"
BODY="${BODY:-65535}"
work=$(mktemp -d)
bin="${DELAYQ_BIN:-}"
if [ -z "$bin" ]; then
  go build -o "$work/delayq" ./cmd/delayq
  bin="$work/delayq"
fi
trap 'kill -9 "${pid:-0}" 2>/dev/null || true; rm -rf "$work"' EXIT
freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(freeport)
extra="${EXTRA:-}"
if [ -n "${PPROF:-}" ]; then
  dport=$(freeport)
  extra="$extra --debug-addr 127.0.0.1:$dport"
fi
# shellcheck disable=SC2086 # extra is a list of flags
"$bin" serve --http-addr "127.0.0.1:$port" --beanstalk-addr "" --data-dir "$work/data" --log-level warn $extra &
pid=$!
until curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do sleep 0.05; done

python3 - "$work/batch.json" "$JOBS" "$BODY" <<'PY'
import base64, os, sys
path, jobs, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
body = base64.b64encode(os.urandom(size)).decode()
with open(path, "w") as f:
    f.write('{"jobs":[')
    for i in range(jobs):
        f.write((',' if i else '') + '{"body_base64":"%s"}' % body)
    f.write(']}')
PY
kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$pid/status"; }
before=$(kib VmRSS)
t0=$(date +%s.%N)
pids=()
for i in $(seq "$C"); do
  curl -s -o /dev/null -w '%{http_code}\n' -X POST -T "$work/batch.json" \
    -H 'Content-Type: application/json' -H 'Expect:' \
    "http://127.0.0.1:$port/v1/topics/big$i/jobs/batch" >"$work/status.$i" &
  pids+=($!)
done
running() { for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
if [ -n "${PPROF:-}" ]; then # a heap profile a second while the batches run
  ( i=0; while running; do
      curl -s -o "$PPROF.$i.pb.gz" "http://127.0.0.1:$dport/debug/pprof/heap"; i=$((i + 1)); sleep 1
    done ) &
fi
wait "${pids[@]}" 2>/dev/null || true
while running; do sleep 0.1; done
t1=$(date +%s.%N)
if [ -n "${PPROF:-}" ]; then
  curl -s -o "$PPROF.end.pb.gz" "http://127.0.0.1:$dport/debug/pprof/heap"
fi
hwm=$(kib VmHWM)
after=$(kib VmRSS)
peak=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^delayq_http_inflight_bytes_peak / {printf "%.0f MB", $2/1e6}')
statuses=$(cat "$work"/status.* | sort | uniq -c | awk '{printf "%s×%s ", $1, $2}')
awk -v c="$C" -v s="$statuses" -v b="$before" -v h="$hwm" -v a="$after" -v p="${peak:-n/a}" -v t="$(echo "$t1 - $t0" | bc)" -v w="$(stat -c %s "$work/batch.json")" 'BEGIN {
  printf "c=%d batch=%.1f MB answers: %s in %.1f s; RSS before %.0f MiB, peak (VmHWM) %.0f MiB, after %.0f MiB; growth %.0f MiB; budget peak %s\n",
    c, w/1e6, s, t, b/1024, h/1024, a/1024, (h-b)/1024, p }'
