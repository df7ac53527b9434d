#!/usr/bin/env bash
# delayq over Redis with 1 and 3 instances on one Redis, next to the
# embedded store: put, reserve+delete and firing lateness, with the CPU
# each delayq instance and Redis spend per 1,000 jobs (from /proc), so
# scale-out beyond this machine can be projected.
#
#   bash scripts/bench-redis.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
work=$(mktemp -d)
go build -o "$work/delayq" ./cmd/delayq
bin="$work/delayq"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; exit 1; }
cpu_ms() { # total user+system CPU of the given pids, in ms
  local t=0; for p in "$@"; do t=$(( t + $(awk '{print $14 + $15}' "/proc/$p/stat") )); done
  echo $(( t * 1000 / $(getconf CLK_TCK) ))
}

rport=$(free_port)
redis-server --bind 127.0.0.1 --port "$rport" --dir "$work" --save '' --appendonly yes \
  --appendfsync everysec --daemonize no --logfile "$work/redis.log" & pids+=($!); rpid=$!
wait_port "$rport"

start_instance() { # name args...
  local port; port=$(free_port)
  "$bin" serve --http-addr "127.0.0.1:$port" --beanstalk-addr "" --log-level warn "${@:2}" & pids+=($!)
  wait_port "$port"
  eval "$1_pid=$!; $1_url=http://127.0.0.1:$port"
}

# measure LABEL "pids..." N CMD... : runs CMD (bench processes) and prints
# its lines with CPU per 1,000 jobs for the delayq pids and for Redis.
measure() {
  local label=$1 dpids=$2 n=$3; shift 3
  local d0 r0 d1 r1
  d0=$(cpu_ms $dpids); r0=$(cpu_ms "$rpid")
  "$@"
  d1=$(cpu_ms $dpids); r1=$(cpu_ms "$rpid")
  printf '%-40s delayq_cpu_ms_per_1k=%s redis_cpu_ms_per_1k=%s\n' "$label" \
    "$(echo "scale=1; ($d1 - $d0) * 1000 / $n" | bc)" "$(echo "scale=1; ($r1 - $r0) * 1000 / $n" | bc)"
}
bench() { "$bin" bench "$@" --line | sed 's/^bench /  /'; }
par3() { # run one bench per instance at once: mode n c extra...
  local mode=$1 n=$2 c=$3; shift 3
  local bp=()
  for u in "$i1_url" "$i2_url" "$i3_url"; do bench "$u" --mode "$mode" -n "$n" -c "$c" "$@" & bp+=($!); done
  wait "${bp[@]}"
}

start_instance emb --data-dir "$work/emb"
measure "embedded put c=32"             "$emb_pid" 20000 bench "$emb_url" --mode put -n 20000 -c 32
measure "embedded reserve c=32"         "$emb_pid" 20000 bench "$emb_url" --mode reserve -n 20000 -c 32 --batch 100
measure "embedded spread 1k/s x10s"     "$emb_pid" 10000 bench "$emb_url" --mode spread --rate 1000 --duration 10s -c 16 --batch 100 --body 100
kill "$emb_pid"

start_instance i1 --redis "redis://127.0.0.1:$rport/0"
measure "redis x1 put c=32"             "$i1_pid" 20000 bench "$i1_url" --mode put -n 20000 -c 32
measure "redis x1 reserve c=32"         "$i1_pid" 20000 bench "$i1_url" --mode reserve -n 20000 -c 32 --batch 100
measure "redis x1 spread 1k/s x10s"     "$i1_pid" 10000 bench "$i1_url" --mode spread --rate 1000 --duration 10s -c 16 --batch 100 --body 100

start_instance i2 --redis "redis://127.0.0.1:$rport/0"
start_instance i3 --redis "redis://127.0.0.1:$rport/0"
sleep 3 # buckets rebalance over the three instances
all="$i1_pid $i2_pid $i3_pid"
measure "redis x3 put c=3x11"           "$all" 21000 par3 put 7000 11
measure "redis x3 reserve c=3x11"       "$all" 21000 par3 reserve 7000 11 --batch 100
measure "redis x3 spread 3x333/s x10s"  "$all" 9990 par3 spread 0 6 --rate 333 --duration 10s --batch 100 --body 100
