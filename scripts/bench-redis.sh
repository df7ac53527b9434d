#!/usr/bin/env bash
# delayq over Redis against asynq over Redis, side by side in one run
# (issue 31): each side gets a fresh redis-server of its own with the same
# settings (appendonly yes, appendfsync everysec), 100-byte jobs, 32
# connections; delayq over the beanstalkd protocol, asynq v0.26 from the
# separate module peers/asynq (32 producers, 32 workers). Every row reads
# the Redis process's CPU time (/proc/PID/stat utime+stime) before and
# after, and INFO commandstats (reset before the row) per job.
#
#   bash scripts/bench-redis.sh              # every row
#   bash scripts/bench-redis.sh lateness     # rows whose name contains the word
#   N=30000 bash scripts/bench-redis.sh      # jobs per row (default 30,000)
#
# Rows: put / enqueue; reserve+delete / work (delayq's reserve row preloads
# its jobs with puts: the put row's CPU is subtracted for the per-reserve
# figure, and its commandstats likewise); two delayq instances putting and
# reserving against one Redis; lateness of 2,000 jobs/s due over 5 s with
# two instances sharing the timer buckets; the delayq rows again on a
# Redis with hash-max-listpack-value 256 ("listpack").
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${1:-}"
n="${N:-30000}"
work=$(mktemp -d)
go build -o "$work/delayq" ./cmd/delayq
(cd peers/asynq && go build -o "$work/asynq-peer" .)
bin="$work/delayq"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }
cpu_us() { awk -v t="$(getconf CLK_TCK)" '{printf "%d", ($14 + $15) * 1000000 / t}' "/proc/$1/stat"; }

# fresh_redis NAME [args...]: a redis-server of its own; sets NAME_port, NAME_pid.
fresh_redis() {
  local name=$1 port; shift; port=$(free_port)
  mkdir -p "$work/$name"
  redis-server --bind 127.0.0.1 --port "$port" --dir "$work/$name" --save '' --appendonly yes \
    --appendfsync everysec --daemonize no --logfile "$work/$name/redis.log" "$@" & pids+=($!)
  eval "${name}_pid=$!; ${name}_port=$port"
  wait_port "$port"
}
# instance NAME REDIS_URL [args...]: a delayq server; sets NAME_pid, NAME_bs (beanstalk URL).
instance() {
  local name=$1 url=$2 hp bp; shift 2; hp=$(free_port); bp=$(free_port)
  "$bin" serve --redis "$url" --http-addr "127.0.0.1:$hp" --beanstalk-addr "127.0.0.1:$bp" \
    --log-level warn "$@" 2>>"$work/$name.log" & pids+=($!)
  eval "${name}_pid=$!; ${name}_bs=beanstalk://127.0.0.1:$bp"
  wait_port "$hp"; wait_port "$bp"
}
stats() { redis-cli -p "$1" INFO commandstats | tr -d '\r' | grep '^cmdstat_'; }
# per_job STATS N: calls and µs per job of every command (cmdstat lines).
per_job() {
  awk -F'[:,=]' -v n="$2" '{c[$1]=$3; u[$1]=$5}
    END {for (k in c) if (c[k] / n >= 0.01) printf " %s=%.2f×%.1fus", substr(k, 9), c[k] / n, u[k] / c[k]}' <<<"$1"
}
# sub_stats A B: commandstats A minus B (calls and usec), for a reserve row
# that preloads with puts.
sub_stats() {
  awk -F'[:,=]' 'NR == FNR {c[$1]=$3; u[$1]=$5; next}
    {c[$1]-=$3; u[$1]-=$5} END {for (k in c) if (c[k] > 0) printf "%s:calls=%d,usec=%d\n", k, c[k], u[k]}' \
    <(echo "$1") <(echo "$2")
}
selected() { [[ -z "$filter" || "$1" == *"$filter"* ]]; }

# row NAME REDIS-PORT REDIS-PID CMD...: runs CMD, prints its result line,
# Redis CPU per job and commandstats per job; leaves CPU in row_cpu and
# stats in row_stats.
row() {
  local name=$1 port=$2 rpid=$3; shift 3
  redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  local c0 out; c0=$(cpu_us "$rpid")
  out=$("$@" 2>&1 | tail -1) || { echo "$name failed: $out"; return 1; }
  row_cpu=$(( $(cpu_us "$rpid") - c0 )); row_stats=$(stats "$port")
  printf '%-34s %s redis_cpu_us_per_job=%.1f\n' "$name" "$out" "$(awk -v c="$row_cpu" -v n="$n" 'BEGIN{print c/n}')"
  printf '%-34s commandstats per job:%s\n' "" "$(per_job "$row_stats" "$n")"
}
dq() { "$bin" bench "$1" --line "${@:2}" | sed 's/^bench //'; }
aq() { "$work/asynq-peer" -redis "127.0.0.1:$1" "${@:2}"; }

if selected side; then
  fresh_redis rd; fresh_redis ra
  instance i1 "redis://127.0.0.1:$rd_port/0"
  row "side delayq put c=32" "$rd_port" "$rd_pid" dq "$i1_bs" --mode put -n "$n" -c 32 --body 100
  put_cpu=$row_cpu; put_stats=$row_stats
  row "side asynq enqueue c=32" "$ra_port" "$ra_pid" aq "$ra_port" -mode enqueue -n "$n" -c 32 -body 100
  enq_cpu=$row_cpu
  row "side delayq put+reserve+delete" "$rd_port" "$rd_pid" dq "$i1_bs" --mode reserve -n "$n" -c 32 --body 100
  res_cpu=$(( row_cpu - put_cpu ))
  printf '%-34s redis_cpu_us_per_job=%.1f commandstats per job:%s\n' "side delayq reserve+delete only" \
    "$(awk -v c="$res_cpu" -v n="$n" 'BEGIN{print c/n}')" "$(per_job "$(sub_stats "$row_stats" "$put_stats")" "$n")"
  row "side asynq work c=32" "$ra_port" "$ra_pid" aq "$ra_port" -mode work -n "$n" -c 32
  wrk_cpu=$row_cpu
  awk -v p="$put_cpu" -v e="$enq_cpu" -v r="$res_cpu" -v w="$wrk_cpu" 'BEGIN {
    printf "side ratios: redis cpu per put / per enqueue = %.2fx; per reserve+delete / per processed task = %.2fx\n", p/e, r/w }'
  kill "$i1_pid"; wait "$i1_pid" 2>/dev/null || true
  # Two instances in front of the same Redis, 16 connections each.
  redis-cli -p "$rd_port" FLUSHALL >/dev/null
  instance i1 "redis://127.0.0.1:$rd_port/0"; instance i2 "redis://127.0.0.1:$rd_port/0"
  two() { dq "$i1_bs" "$@" -c 16 -n $(( n / 2 )) > "$work/two1" & local a=$!; dq "$i2_bs" "$@" -c 16 -n $(( n / 2 )) > "$work/two2"; wait $a;
          awk '{for (i=1;i<=NF;i++) if ($i ~ /^jobs_per_s=/) {sub("jobs_per_s=","",$i); s+=$i}} END {printf "jobs_per_s=%.0f (sum of two)\n", s}' "$work/two1" "$work/two2"; }
  row "side delayq x2 put c=2x16" "$rd_port" "$rd_pid" two --mode put --body 100
  row "side delayq x2 put+reserve+delete" "$rd_port" "$rd_pid" two --mode reserve --body 100
  kill "$i1_pid" "$i2_pid"; wait "$i1_pid" "$i2_pid" 2>/dev/null || true
  # Retention's share: the same rows with --retain 0 (asynq's default
  # keeps no completed task either).
  redis-cli -p "$rd_port" FLUSHALL >/dev/null
  instance i1 "redis://127.0.0.1:$rd_port/0" --retain 0
  row "side delayq put --retain 0" "$rd_port" "$rd_pid" dq "$i1_bs" --mode put -n "$n" -c 32 --body 100
  put_cpu=$row_cpu; put_stats=$row_stats
  row "side delayq put+reserve+delete --retain 0" "$rd_port" "$rd_pid" dq "$i1_bs" --mode reserve -n "$n" -c 32 --body 100
  printf '%-34s redis_cpu_us_per_job=%.1f commandstats per job:%s\n' "side delayq reserve+delete only --retain 0" \
    "$(awk -v c="$(( row_cpu - put_cpu ))" -v n="$n" 'BEGIN{print c/n}')" "$(per_job "$(sub_stats "$row_stats" "$put_stats")" "$n")"
  kill "$i1_pid"; wait "$i1_pid" 2>/dev/null || true
  kill "$rd_pid" "$ra_pid"
fi

if selected listpack; then
  # The same delayq rows on a Redis that keeps hashes with values up to
  # 256 bytes as listpacks (hash-max-listpack-value, default 64): a job
  # record with a 100-byte body is then a listpack, not a hashtable.
  fresh_redis rp --hash-max-listpack-value 256
  instance p1 "redis://127.0.0.1:$rp_port/0"
  row "listpack delayq put c=32" "$rp_port" "$rp_pid" dq "$p1_bs" --mode put -n "$n" -c 32 --body 100
  put_cpu=$row_cpu; put_stats=$row_stats
  row "listpack delayq put+reserve+delete" "$rp_port" "$rp_pid" dq "$p1_bs" --mode reserve -n "$n" -c 32 --body 100
  printf '%-34s redis_cpu_us_per_job=%.1f commandstats per job:%s\n' "listpack delayq reserve+delete only" \
    "$(awk -v c="$(( row_cpu - put_cpu ))" -v n="$n" 'BEGIN{print c/n}')" "$(per_job "$(sub_stats "$row_stats" "$put_stats")" "$n")"
  kill "$p1_pid" "$rp_pid"; wait "$p1_pid" 2>/dev/null || true
fi

if selected lateness; then
  # 2,000 jobs/s due uniformly over 5 s, put during the run 1 s ahead,
  # served by two instances that share the timer buckets (the load
  # client talks to the first; the second's timer fires its buckets).
  fresh_redis rl; n=10000
  instance l1 "redis://127.0.0.1:$rl_port/0"; instance l2 "redis://127.0.0.1:$rl_port/0"
  sleep 3 # the buckets split between the two instances
  row "lateness 2k/s x5s two instances" "$rl_port" "$rl_pid" dq "$l1_bs" --mode spread --rate 2000 --duration 5s --delay 1s -c 32 --body 100
  kill "$l1_pid" "$l2_pid" "$rl_pid"
fi
