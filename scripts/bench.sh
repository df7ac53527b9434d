#!/usr/bin/env bash
# Side-by-side benchmarks: delayq (durable) against beanstalkd in memory and
# beanstalkd with fsync on every write (-b DIR -f0), all measured by the
# same client (`delayq bench`) in one run, on free loopback ports.
#
#   bash scripts/bench.sh            # every run below (a few minutes)
#   bash scripts/bench.sh put        # only runs whose name contains "put"
#
# Set FSYNC_DELAY_US=1000 to add 1 ms to every fsync of delayq and the
# durable beanstalkd (needs strace), as a real disk would.
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${1:-}"
bash scripts/deps.sh
work=$(mktemp -d)
go build -o "$work/delayq" ./cmd/delayq
bin="$work/delayq"
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
  wrap=(strace -f --seccomp-bpf -e "inject=fdatasync,fsync,msync:delay_exit=${FSYNC_DELAY_US}" -o /dev/null)
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

for c in 1 32; do
  n=$(( c == 1 ? 5000 : 50000 ))
  run "put c=$c delayq-http"        "$DQ"  "$dq_pid"  --mode put -n $n -c $c
  run "put c=$c delayq-beanstalk"   "$DQB" "$dq_pid"  --mode put -n $n -c $c
  run "put c=$c beanstalkd-memory"  "$BSM" "$bsm_pid" --mode put -n $n -c $c
  run "put c=$c beanstalkd-fsync"   "$BSD" "$bsd_pid" --mode put -n $n -c $c
done
run "put batch100 c=4 delayq-http"   "$DQ"  "$dq_pid"  --mode put -n 200000 -c 4 --batch 100
run "reserve c=32 delayq-http"       "$DQ"  "$dq_pid"  --mode reserve -n 50000 -c 32 --batch 100
run "reserve c=32 delayq-beanstalk"  "$DQB" "$dq_pid"  --mode reserve -n 50000 -c 32
run "reserve c=32 beanstalkd-memory" "$BSM" "$bsm_pid" --mode reserve -n 50000 -c 32
run "reserve c=32 beanstalkd-fsync"  "$BSD" "$bsd_pid" --mode reserve -n 50000 -c 32
run "burst 100k c=32 delayq-http"    "$DQ"  "$dq_pid"  --mode burst -n 100000 -c 32 --batch 100 --lead 8s --body 100
run "burst 100k c=32 take100 delayq-http" "$DQ" "$dq_pid" --mode burst -n 100000 -c 32 --batch 100 --take 100 --lead 8s --body 100
run "burst 100k c=32 delayq-beanstalk" "$DQB" "$dq_pid" --mode burst -n 100000 -c 32 --lead 10s --body 100
run "burst 100k c=32 beanstalkd-memory" "$BSM" "$bsm_pid" --mode burst -n 100000 -c 32 --lead 10s --body 100
run "burst 10k c=32 delayq-http"     "$DQ"  "$dq_pid"  --mode burst -n 10000 -c 32 --batch 100 --lead 3s --body 100
run "burst 10k c=32 delayq-beanstalk" "$DQB" "$dq_pid"  --mode burst -n 10000 -c 32 --lead 4s --body 100
run "burst 10k c=32 beanstalkd-memory" "$BSM" "$bsm_pid" --mode burst -n 10000 -c 32 --lead 4s --body 100
run "spread 2k/s x10s delayq-http"   "$DQ"  "$dq_pid"  --mode spread --rate 2000 --duration 10s -c 32 --batch 100 --lead 3s --body 100
run "spread 2k/s x10s delayq-beanstalk" "$DQB" "$dq_pid" --mode spread --rate 2000 --duration 10s -c 32 --lead 5s --body 100
run "spread 2k/s x10s beanstalkd-memory" "$BSM" "$bsm_pid" --mode spread --rate 2000 --duration 10s -c 32 --lead 5s --body 100
run "spread 10k/s x10s delayq-http"  "$DQ"  "$dq_pid"  --mode spread --rate 10000 --duration 10s -c 32 --batch 100 --lead 8s --body 100
run "spread 10k/s x10s take100 delayq-http" "$DQ" "$dq_pid" --mode spread --rate 10000 --duration 10s -c 32 --batch 100 --take 100 --lead 8s --body 100
run "spread 10k/s x10s delayq-beanstalk" "$DQB" "$dq_pid" --mode spread --rate 10000 --duration 10s -c 32 --lead 10s --body 100
run "spread 10k/s x10s beanstalkd-memory" "$BSM" "$bsm_pid" --mode spread --rate 10000 --duration 10s -c 32 --lead 10s --body 100
