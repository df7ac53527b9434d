#!/usr/bin/env bash
# Side-by-side benchmarks, all measured by the same client (`delayq bench`)
# in one run, on free loopback ports, against the peers a user would choose
# between at each durability:
#   --fsync always (default)  against Redis 7 appendfsync always (one Lua
#                             script HSET+ZADD per put, redis-benchmark -c 32)
#                             and beanstalkd -b DIR -f0 (fsync every write)
#   --fsync 50ms              against beanstalkd -b DIR (its default: fsync
#                             at most every 50 ms)
#   and beanstalkd in memory, the ceiling of the old comparison.
# Each row ends with the server's CPU (user+system, from /proc) per 100,000
# jobs when the row has a job count, and the load client's CPU.
#
#   bash scripts/bench.sh            # every run below (a few minutes)
#   bash scripts/bench.sh put        # only runs whose name contains "put"
#   bash scripts/bench.sh history    # (4): the figures again after 10M far-future jobs and 1M passed through
#   bash scripts/bench.sh postgres [ROW]  # the PostgreSQL store against River (scripts/bench-postgres.sh)
#   bash scripts/bench.sh redis [ROW]     # the Redis store against asynq (scripts/bench-redis.sh)
#
# DELAYQ_BIN=path measures that binary instead of building this tree (A/B
# against an older build). Set FSYNC_DELAY_US=1000 to add 1 ms to every fsync of delayq and the
# durable beanstalkd (needs strace), as a real disk would.
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${1:-}"
case "$filter" in
  postgres) shift; exec bash scripts/bench-postgres.sh "$@" ;;
  redis) shift; exec bash scripts/bench-redis.sh "$@" ;;
esac
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
dqw_http=$(free_port); dqw_bs=$(free_port); bs_win=$(free_port); rd_port=$(free_port)
"${wrap[@]}" "$bin" serve --http-addr "127.0.0.1:$dq_http" --beanstalk-addr "127.0.0.1:$dq_bs" \
  --data-dir "$work/data" --log-level warn & pids+=($!); dq_pid=$!
"${wrap[@]}" "$bin" serve --http-addr "127.0.0.1:$dqw_http" --beanstalk-addr "127.0.0.1:$dqw_bs" \
  --data-dir "$work/data-50ms" --fsync 50ms --log-level warn & pids+=($!); dqw_pid=$!
beanstalkd -l 127.0.0.1 -p "$bs_mem" & pids+=($!); bsm_pid=$!
mkdir -p "$work/binlog" "$work/binlog-50ms"
"${wrap[@]}" beanstalkd -l 127.0.0.1 -p "$bs_disk" -b "$work/binlog" -f0 & pids+=($!); bsd_pid=$!
"${wrap[@]}" beanstalkd -l 127.0.0.1 -p "$bs_win" -b "$work/binlog-50ms" & pids+=($!); bsw_pid=$!
"${wrap[@]}" redis-server --bind 127.0.0.1 --port "$rd_port" --dir "$work" --save '' --appendonly yes \
  --appendfsync always --daemonize no --logfile "$work/redis.log" & pids+=($!); rd_pid=$!
for p in $dq_http $dq_bs $dqw_http $dqw_bs $bs_mem $bs_disk $bs_win $rd_port; do wait_port "$p"; done
# strace runs the server as its child: measure the server's own process.
if [ -n "${FSYNC_DELAY_US:-}" ]; then
  sleep 0.5
  dq_pid=$(pgrep -P "$dq_pid" -f "delayq serve" || echo "$dq_pid")
  dqw_pid=$(pgrep -P "$dqw_pid" -f "delayq serve" || echo "$dqw_pid")
  rd_pid=$(pgrep -P "$rd_pid" -f "redis-server" || echo "$rd_pid")
fi

cpu_ms() { awk -v t="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / t)}' "/proc/$1/stat"; }
# jobs_of ARGS...: the -n of a row, for its CPU per 100,000 jobs.
jobs_of() { local n=""; while [ $# -gt 0 ]; do [ "$1" = -n ] && n=$2; shift; done; echo "$n"; }
# client_ms: the CPU (user+system, ms) of a subshell's children, from the
# last line of bash's `times`.
client_ms() { awk 'END {n = 0; for (i = 1; i <= 2; i++) {split($i, a, "m"); sub("s", "", a[2]); n += a[1] * 60 + a[2]} printf "%d", n * 1000}'; }
cpus=$(nproc)
cpu_line() { # pid cpu0 n client_ms
  local used=$(( $(cpu_ms "$1") - $2 ))
  if [ -n "$3" ]; then
    # The load client shares the cores, so a row whose server and client
    # together keep every core busy is bound by their CPU per job:
    # cpu_bound_per_s is the rate at which they would fill all cores.
    echo " server_cpu_ms=$used cpu_s_per_100k=$(awk -v u="$used" -v n="$3" 'BEGIN{printf "%.2f", u/n*100}') client_cpu_ms=$4 cpu_bound_per_s=$(awk -v u="$used" -v c="$4" -v n="$3" -v k="$cpus" 'BEGIN{printf "%.0f", n * k * 1000 / (u + c)}')"
  else echo " server_cpu_ms=$used client_cpu_ms=$4"; fi
}
run() { # name target pid args...
  local name=$1 target=$2 pid=$3; shift 3
  [[ -z "$filter" || "$name" == *"$filter"* ]] || return 0
  printf '%-40s ' "$name"
  local c0 out; c0=$(cpu_ms "$pid")
  # A failed row (its error is on stderr) does not end the run: the rows
  # after it, the peers' included, still measure.
  out=$("$bin" bench "$target" --pid "$pid" --line "$@" | sed 's/^bench //' && times) || { echo "failed"; return 0; }
  echo "$(head -1 <<<"$out")$(cpu_line "$pid" "$c0" "$(jobs_of "$@")" "$(client_ms <<<"$out")")"
}
# redis_put NAME N: N puts of one Lua script (HSET of the job + ZADD of its
# due time) from 32 clients against Redis with appendfsync always: what a
# Redis sorted-set delay queue does per put, durable before each reply.
redis_put() {
  local name=$1 n=$2
  [[ -z "$filter" || "$name" == *"$filter"* ]] || return 0
  printf '%-40s ' "$name"
  local c0 rps out; c0=$(cpu_ms "$rd_pid")
  out=$(redis-benchmark -h 127.0.0.1 -p "$rd_port" -c 32 -n "$n" -r 1000000000 -q \
    EVAL "redis.call('HSET', KEYS[1], 'body', ARGV[1], 'due', ARGV[2]); return redis.call('ZADD', KEYS[2], ARGV[2], KEYS[1])" \
    2 "job:__rand_int__" due "$(printf 'x%.0s' $(seq 100))" __rand_int__ | tr '\r' '\n' | awk '/requests per second/ {for (i=1;i<=NF;i++) if ($i=="requests") print $(i-1)}' | tail -1 && times)
  rps=$(head -1 <<<"$out")
  echo "rate=${rps}/s (reserve+delete: two such round trips per job, so half: $(awk -v r="$rps" 'BEGIN{printf "%.0f", r/2}')/s)$(cpu_line "$rd_pid" "$c0" "$n" "$(client_ms <<<"$out")")"
}
DQ="http://127.0.0.1:$dq_http"; DQB="beanstalk://127.0.0.1:$dq_bs"
DQW="http://127.0.0.1:$dqw_http"; DQWB="beanstalk://127.0.0.1:$dqw_bs"
BSM="beanstalk://127.0.0.1:$bs_mem"; BSD="beanstalk://127.0.0.1:$bs_disk"; BSW="beanstalk://127.0.0.1:$bs_win"

# Issue 17's aims. (1) default mode against Redis appendfsync always;
# (2) --fsync 50ms against beanstalkd -b DIR; (6) the CPU column of both.
B=(--body 100)
run "a1 put c=32 delayq-always"            "$DQB"  "$dq_pid"  --mode put -n 100000 -c 32 "${B[@]}"
redis_put "a1 put c=32 redis-fsync-always" 100000
run "a1 reserve c=32 delayq-always"        "$DQB"  "$dq_pid"  --mode reserve -n 100000 -c 32 "${B[@]}"
run "a2 put c=32 delayq-50ms"              "$DQWB" "$dqw_pid" --mode put -n 100000 -c 32 "${B[@]}"
run "a2 put c=32 beanstalkd-binlog-50ms"   "$BSW"  "$bsw_pid" --mode put -n 100000 -c 32 "${B[@]}"
run "a2 reserve c=32 delayq-50ms"          "$DQWB" "$dqw_pid" --mode reserve -n 100000 -c 32 "${B[@]}"
run "a2 reserve c=32 beanstalkd-binlog-50ms" "$BSW" "$bsw_pid" --mode reserve -n 100000 -c 32 "${B[@]}"
# (4) 5,000 jobs/s due over 5 s with puts running, both modes, both protocols.
P=(--mode spread --rate 5000 --duration 5s --delay 1s -c 32 "${B[@]}")
run "a4 spread delayq-always-beanstalk"    "$DQB"  "$dq_pid"  "${P[@]}"
run "a4 spread delayq-always-http"         "$DQ"   "$dq_pid"  "${P[@]}"
run "a4 spread delayq-50ms-beanstalk"      "$DQWB" "$dqw_pid" "${P[@]}"
run "a4 spread delayq-50ms-http"           "$DQW"  "$dqw_pid" "${P[@]}"
run "a4 spread beanstalkd-binlog-50ms"     "$BSW"  "$bsw_pid" "${P[@]}"
# (5) 100,000 jobs due at one instant over the beanstalkd protocol.
run "a5 burst 100k delayq-always"          "$DQB"  "$dq_pid"  --mode burst -n 100000 -c 32 --lead 15s "${B[@]}"
run "a5 burst 100k delayq-50ms"            "$DQWB" "$dqw_pid" --mode burst -n 100000 -c 32 --lead 15s "${B[@]}"
run "a5 burst 100k beanstalkd-binlog-50ms" "$BSW"  "$bsw_pid" --mode burst -n 100000 -c 32 --lead 15s "${B[@]}"

# The aims of issue 8, in its order; 100-byte bodies throughout.
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
