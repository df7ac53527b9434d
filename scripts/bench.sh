#!/usr/bin/env bash
# Side-by-side benchmarks: delayq (durable) against beanstalkd in memory and
# beanstalkd with fsync on every write (-b DIR -f0), all measured by the
# same client (`delayq bench`) in one run, on free loopback ports.
#
#   bash scripts/bench.sh            # every run below (a few minutes)
#   bash scripts/bench.sh put        # only runs whose name contains "put"
#   bash scripts/bench.sh history    # (4): the figures again after 10M far-future jobs and 1M passed through
#
# DELAYQ_BIN=path measures that binary instead of building this tree (A/B
# against an older build). Set FSYNC_DELAY_US=1000 to add 1 ms to every fsync of delayq and the
# durable beanstalkd (needs strace), as a real disk would.
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${1:-}"
bash scripts/deps.sh
work=$(mktemp -d)
go build -o "$work/delayq" ./cmd/delayq
bin="${DELAYQ_BIN:-$work/delayq}"
pids=()
# strace does not pass SIGTERM on to its tracee: stop the children first.
cleanup() {
  for p in "${pids[@]}"; do pkill -P "$p" 2>/dev/null || true; kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wrap=()
if [ -n "${FSYNC_DELAY_US:-}" ]; then
  # -e trace= keeps the seccomp filter to these calls; without it strace
  # stops the server at every syscall and measures strace, not the disk.
  wrap=(strace -f --seccomp-bpf -e trace=fdatasync,fsync,msync -e "inject=fdatasync,fsync,msync:delay_exit=${FSYNC_DELAY_US}" -o /dev/null)
fi
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }

dq_http=$(free_port); dq_bs=$(free_port); bs_mem=$(free_port); bs_disk=$(free_port)
"${wrap[@]}" "$bin" serve --http-addr "127.0.0.1:$dq_http" --beanstalk-addr "127.0.0.1:$dq_bs" \
  --data-dir "$work/data" --log-level warn & pids+=($!); dq_pid=$!
beanstalkd -l 127.0.0.1 -p "$bs_mem" & pids+=($!); bsm_pid=$!
mkdir -p "$work/binlog"
"${wrap[@]}" beanstalkd -l 127.0.0.1 -p "$bs_disk" -b "$work/binlog" -f0 & pids+=($!); bsd_pid=$!
for p in $dq_http $dq_bs $bs_mem $bs_disk; do wait_port "$p"; done
# strace runs the server as its child: sample the server's own RSS.
[ -n "${FSYNC_DELAY_US:-}" ] && { sleep 0.5; dq_pid=$(pgrep -P "$dq_pid" -f "delayq serve" || echo "$dq_pid"); }

run() { # name target pid args...
  local name=$1 target=$2 pid=$3; shift 3
  [[ -z "$filter" || "$name" == *"$filter"* ]] || return 0
  printf '%-34s ' "$name"
  "$bin" bench "$target" --pid "$pid" --line "$@" | sed 's/^bench //'
}
DQ="http://127.0.0.1:$dq_http"; DQB="beanstalk://127.0.0.1:$dq_bs"
BSM="beanstalk://127.0.0.1:$bs_mem"; BSD="beanstalk://127.0.0.1:$bs_disk"

# The aims of issue 8, in its order; 100-byte bodies throughout.
B=(--body 100)
# (1) put and reserve+delete, 32 connections.
run "put c=32 delayq-beanstalk"      "$DQB" "$dq_pid"  --mode put -n 100000 -c 32 "${B[@]}"
run "put c=32 beanstalkd-memory"     "$BSM" "$bsm_pid" --mode put -n 100000 -c 32 "${B[@]}"
run "put c=32 beanstalkd-fsync"      "$BSD" "$bsd_pid" --mode put -n 30000 -c 32 "${B[@]}"
run "put c=32 delayq-http"           "$DQ"  "$dq_pid"  --mode put -n 50000 -c 32 "${B[@]}"
run "put c=1 delayq-beanstalk"       "$DQB" "$dq_pid"  --mode put -n 5000 -c 1 "${B[@]}"
run "put c=1 beanstalkd-memory"      "$BSM" "$bsm_pid" --mode put -n 5000 -c 1 "${B[@]}"
run "reserve c=32 delayq-beanstalk"  "$DQB" "$dq_pid"  --mode reserve -n 100000 -c 32 "${B[@]}"
run "reserve c=32 beanstalkd-memory" "$BSM" "$bsm_pid" --mode reserve -n 100000 -c 32 "${B[@]}"
run "reserve c=32 beanstalkd-fsync"  "$BSD" "$bsd_pid" --mode reserve -n 30000 -c 32 "${B[@]}"
run "reserve c=32 delayq-http"       "$DQ"  "$dq_pid"  --mode reserve -n 50000 -c 32 --batch 100 "${B[@]}"
# (6) HTTP batches: batch put of 100; reserve 100 + batch finish of 100.
run "put batch100 c=4 delayq-http"   "$DQ"  "$dq_pid"  --mode put -n 300000 -c 4 --batch 100 "${B[@]}"
run "reserve take100 c=4 delayq-http" "$DQ" "$dq_pid"  --mode reserve -n 300000 -c 4 --batch 100 --take 100 "${B[@]}"
# (2) 5,000 jobs/s due uniformly over 5 s, 32 consumers, as the issue words
# it: 8 producers put each job during the run with a 1 s delay, so the
# server fires while it takes puts and whole-second delays add no rounding.
P=(--mode spread --rate 5000 --duration 5s --delay 1s -c 32 "${B[@]}")
run "spread 5k/s x5s delayq-http"         "$DQ"  "$dq_pid"  "${P[@]}"
run "spread 5k/s x5s take100 delayq-http" "$DQ"  "$dq_pid"  "${P[@]}" --take 100
run "spread 5k/s x5s delayq-beanstalk"    "$DQB" "$dq_pid"  "${P[@]}"
run "spread 5k/s x5s beanstalkd-memory"   "$BSM" "$bsm_pid" "${P[@]}"
# The same jobs all put before the first is due (no puts while firing).
run "spread preput take100 delayq-http"   "$DQ"  "$dq_pid"  --mode spread --rate 5000 --duration 5s -c 32 --batch 100 --take 100 --lead 2s "${B[@]}"
# (3) 100,000 jobs due at one instant.
run "burst 100k c=32 delayq-beanstalk"   "$DQB" "$dq_pid"  --mode burst -n 100000 -c 32 --lead 10s "${B[@]}"
run "burst 100k c=32 beanstalkd-memory"  "$BSM" "$bsm_pid" --mode burst -n 100000 -c 32 --lead 10s "${B[@]}"
run "burst 100k c=32 take100 delayq-http" "$DQ" "$dq_pid"  --mode burst -n 100000 -c 32 --batch 100 --take 100 --lead 8s "${B[@]}"
run "burst 100k c=32 delayq-http"        "$DQ"  "$dq_pid"  --mode burst -n 100000 -c 32 --batch 100 --lead 8s "${B[@]}"
# The same burst behind a backlog: 200,000 ready jobs nobody consumes in
# another topic, enough to fill the default hot budget (128 MiB of records).
run "backlog 200k ready delayq-http"      "$DQ"  "$dq_pid"  --mode put -n 200000 -c 4 --batch 100 "${B[@]}"
run "backlog 200k ready beanstalkd-memory" "$BSM" "$bsm_pid" --mode put -n 200000 -c 32 "${B[@]}"
run "backlog: burst 100k c=32 take100 delayq-http" "$DQ" "$dq_pid" --mode burst -n 100000 -c 32 --batch 100 --take 100 --lead 8s "${B[@]}"
run "backlog: burst 100k c=32 beanstalkd-memory"   "$BSM" "$bsm_pid" --mode burst -n 100000 -c 32 --lead 10s "${B[@]}"

# (4) History: only when asked for by name (`bash scripts/bench.sh history`),
# it takes several minutes. HISTORY_FAR far-future jobs (default
# 10,000,000) are put and HISTORY_THROUGH jobs (default 1,000,000) pass
# through the store, then (1) is measured again on the same server.
if [ "$filter" = history ]; then
  far="${HISTORY_FAR:-10000000}"; through="${HISTORY_THROUGH:-1000000}"
  filter=""
  run "history fresh: put c=32 delayq-beanstalk"     "$DQB" "$dq_pid" --mode put -n 100000 -c 32 "${B[@]}"
  run "history fresh: reserve c=32 delayq-beanstalk" "$DQB" "$dq_pid" --mode reserve -n 100000 -c 32 "${B[@]}"
  run "history load: $far far-future puts"           "$DQ"  "$dq_pid" --mode put -n "$far" -c 4 --batch 1000 --delay 1h --spread 23h --timeout 30m "${B[@]}"
  run "history load: $through through the store"     "$DQ"  "$dq_pid" --mode reserve -n "$through" -c 8 --batch 100 --take 100 --timeout 30m "${B[@]}"
  run "history after: put c=32 delayq-beanstalk"     "$DQB" "$dq_pid" --mode put -n 100000 -c 32 "${B[@]}"
  run "history after: reserve c=32 delayq-beanstalk" "$DQB" "$dq_pid" --mode reserve -n 100000 -c 32 "${B[@]}"
fi
