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
#   bash scripts/bench-redis.sh cluster      # only when asked: 3-master Cluster vs standalone
#   TOPICS=90 BALANCE=1 bash scripts/bench-redis.sh cluster   # see the cluster rows below
#   MASTERS=1 bash scripts/bench-redis.sh cluster   # a Cluster of one master: delayq's Cluster path on one Redis process
#   (every cluster run ends with its control: three standalone Redis servers, one instance and a third of the load each)
#   CALLGRIND=1 N=3000 BALANCE=1 bash scripts/bench-redis.sh cluster   # the same rows in Redis instructions (needs valgrind; see redis_cost)
#   DELAYQ_BIN=/tmp/old/delayq bash scripts/bench-redis.sh side   # a delayq built elsewhere (A/B)
#
# Rows: put / enqueue; reserve+delete / work (delayq's reserve row preloads
# its jobs with puts: the put row's CPU is subtracted for the per-reserve
# figure, and its commandstats likewise); two delayq instances putting and
# reserving against one Redis; lateness of 2,000 jobs/s due over 5 s with
# two instances sharing the timer buckets (with where it goes: the
# instances' fire and reserve lateness from /metrics); the delayq rows again on a
# Redis with hash-max-listpack-value 256 ("listpack").
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${1:-}"
n="${N:-30000}"
work=$(mktemp -d)
(cd peers/asynq && go build -o "$work/asynq-peer" .)
bin="${DELAYQ_BIN:-$work/delayq}"
[[ -n "${DELAYQ_BIN:-}" ]] || go build -o "$bin" ./cmd/delayq
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }
cpu_us() { awk -v t="$(getconf CLK_TCK)" '{printf "%d", ($14 + $15) * 1000000 / t}' "/proc/$1/stat"; }
# sys_io PID: the read and write system calls PID has made, and the times
# it went to sleep (voluntary context switches: an event loop that found
# nothing more to do). Per job they tell how well a Redis's commands
# arrive batched: each loop turn costs an epoll_wait, a read and a write
# per client with a command, and an AOF write when it wrote.
sys_io() { awk '/^sysc[rw]:/ {s += $2} END {printf "%d ", s}' "/proc/$1/io"; awk '/^voluntary_ctxt_switches:/ {print $2}' "/proc/$1/status"; }

# redis_cost PID: what a Redis has spent so far: its CPU time in µs, or
# with CALLGRIND=1 (side and cluster rows) thousands of instructions. The side
# ratios swing by a fifth between runs because CPU time on two shared
# cores does (asynq's own CPU per task moved from 68 to 115 µs between
# runs): instructions do not, though they leave out the kernel's side of
# each request. Each Redis then runs under callgrind, about fifty times
# slower, so use N of a few thousand; what a Redis executes while its
# clients are idle (timers, heartbeats) is measured first and taken off
# every row in proportion to its wall time, which the slowdown inflates.
redis_run=()
redis_cost() { cpu_us "$1"; }
if [[ "${CALLGRIND:-}" == 1 ]]; then
  redis_run=(valgrind -q --tool=callgrind --callgrind-out-file="$work/cg.%p")
  cg_t0=$(date +%s%N)
  redis_cost() {
    # each callgrind dump holds the count since the one before
    callgrind_control -d "$1" >/dev/null
    local f; f=$(ls -t "$work/cg.$1".* | head -1)
    local sum=$(( $(cat "$work/cgsum.$1" 2>/dev/null || echo 0) + $(awk '/^totals:/ {print $2}' "$f") ))
    echo "$sum" >"$work/cgsum.$1"
    local idle; idle=$(cat "$work/cgidle.$1" 2>/dev/null || echo 0)
    echo $(( sum / 1000 - idle * ($(date +%s%N) - cg_t0) / 1000000000 ))
  }
  # redis_idle PID: measures PID's idle instructions per second (over 3 s)
  # for redis_cost to take off.
  redis_idle() {
    local a b t0 t1
    a=$(redis_cost "$1"); t0=$(date +%s%N); sleep 3; b=$(redis_cost "$1"); t1=$(date +%s%N)
    echo $(( (b - a) * 1000000000 / (t1 - t0) )) >"$work/cgidle.$1"
    echo "CALLGRIND=1: Redis $1 idle at $(cat "$work/cgidle.$1") thousand instructions/s; every redis_cpu_us figure below is thousands of instructions"
  }
fi
# fresh_redis NAME [args...]: a redis-server of its own; sets NAME_port, NAME_pid.
fresh_redis() {
  local name=$1 port; shift; port=$(free_port)
  mkdir -p "$work/$name"
  "${redis_run[@]}" redis-server --bind 127.0.0.1 --port "$port" --dir "$work/$name" --save '' --appendonly yes \
    --appendfsync everysec --daemonize no --logfile "$work/$name/redis.log" "$@" & pids+=($!)
  eval "${name}_pid=$!; ${name}_port=$port"
  wait_port "$port"
}
# instance NAME REDIS_URL [args...]: a delayq server; sets NAME_pid, NAME_bs (beanstalk URL), NAME_http.
instance() {
  local name=$1 url=$2 hp bp; shift 2; hp=$(free_port); bp=$(free_port)
  "$bin" serve --redis "$url" --http-addr "127.0.0.1:$hp" --beanstalk-addr "127.0.0.1:$bp" \
    --log-level warn "$@" 2>>"$work/$name.log" & pids+=($!)
  eval "${name}_pid=$!; ${name}_bs=beanstalk://127.0.0.1:$bp; ${name}_http=http://127.0.0.1:$hp"
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
# stats in row_stats. It also reads the CPU of every other process of the
# row, because on two cores they all compete: the delayq instances (the
# pids in inst_pids; none for asynq, whose client is its whole side) into
# row_inst, and the load client (CMD's processes, from the shell's
# `times`) into row_client, all in µs.
inst_pids=""
row() {
  local name=$1 port=$2 rpid=$3; shift 3
  redis-cli -p "$port" CONFIG RESETSTAT >/dev/null
  local c0 i0 out p; c0=$(redis_cost "$rpid"); i0=0
  for p in $inst_pids; do i0=$(( i0 + $(cpu_us "$p") )); done
  out=$("$@" 2>&1 | tail -1; rc=${PIPESTATUS[0]}; times >"$work/times"; exit "$rc") || { echo "$name failed: $out"; return 1; }
  row_cpu=$(( $(redis_cost "$rpid") - c0 )); row_stats=$(stats "$port"); row_inst=$(( -i0 ))
  for p in $inst_pids; do row_inst=$(( row_inst + $(cpu_us "$p") )); done
  # `times` prints the children's user and system time as 0m1.234s 0m0.567s.
  row_client=$(awk 'NR == 2 {t = 0; for (i = 1; i <= 2; i++) {split($i, a, /[ms]/); t += a[1] * 60 + a[2]} printf "%d", t * 1000000}' "$work/times")
  printf '%-34s %s redis_cpu_us_per_job=%.1f\n' "$name" "$out" "$(awk -v c="$row_cpu" -v n="$n" 'BEGIN{print c/n}')"
  printf '%-34s commandstats per job:%s\n' "" "$(per_job "$row_stats" "$n")"
  cpu_line "$row_cpu" "$row_inst" "$row_client"
}
# cpu_line REDIS INSTANCE CLIENT: the CPU per job of each process of a row
# (µs over the whole row), their sum, and the rate two cores could reach
# if that sum were all that ran: the ceiling of the row on this machine.
cpu_line() {
  awk -v r="$1" -v i="$2" -v c="$3" -v n="$n" 'BEGIN {a = (r + i + c) / n
    printf "%-34s cpu_us_per_job: redis=%.1f instance=%.1f client=%.1f all=%.1f (two cores at most %.0f jobs/s)\n", "", r/n, i/n, c/n, a, 2e6 / a}'
}
dq() { "$bin" bench "$1" --line "${@:2}" | sed 's/^bench //'; }
aq() { "$work/asynq-peer" -redis "127.0.0.1:$1" "${@:2}"; }

if selected side; then
  fresh_redis rd; fresh_redis ra
  instance i1 "redis://127.0.0.1:$rd_port/0"; inst_pids=$i1_pid
  if [[ "${CALLGRIND:-}" == 1 ]]; then redis_idle "$rd_pid"; redis_idle "$ra_pid"; fi
  row "side delayq put c=32" "$rd_port" "$rd_pid" dq "$i1_bs" --mode put -n "$n" -c 32 --body 100
  put_cpu=$row_cpu; put_stats=$row_stats; put_inst=$row_inst; put_client=$row_client
  inst_pids=""
  row "side asynq enqueue c=32" "$ra_port" "$ra_pid" aq "$ra_port" -mode enqueue -n "$n" -c 32 -body 100
  enq_cpu=$row_cpu
  inst_pids=$i1_pid
  row "side delayq put+reserve+delete" "$rd_port" "$rd_pid" dq "$i1_bs" --mode reserve -n "$n" -c 32 --body 100
  res_cpu=$(( row_cpu - put_cpu ))
  printf '%-34s redis_cpu_us_per_job=%.1f commandstats per job:%s\n' "side delayq reserve+delete only" \
    "$(awk -v c="$res_cpu" -v n="$n" 'BEGIN{print c/n}')" "$(per_job "$(sub_stats "$row_stats" "$put_stats")" "$n")"
  cpu_line "$res_cpu" $(( row_inst - put_inst )) $(( row_client - put_client ))
  inst_pids=""
  row "side asynq work c=32" "$ra_port" "$ra_pid" aq "$ra_port" -mode work -n "$n" -c 32
  wrk_cpu=$row_cpu
  awk -v p="$put_cpu" -v e="$enq_cpu" -v r="$res_cpu" -v w="$wrk_cpu" 'BEGIN {
    printf "side ratios: redis cpu per put / per enqueue = %.2fx; per reserve+delete / per processed task = %.2fx\n", p/e, r/w }'
  kill "$i1_pid"; wait "$i1_pid" 2>/dev/null || true
  # Two instances in front of the same Redis, 16 connections each.
  redis-cli -p "$rd_port" FLUSHALL >/dev/null
  instance i1 "redis://127.0.0.1:$rd_port/0"; instance i2 "redis://127.0.0.1:$rd_port/0"; inst_pids="$i1_pid $i2_pid"
  two() { dq "$i1_bs" "$@" -c 16 -n $(( n / 2 )) > "$work/two1" & local a=$!; dq "$i2_bs" "$@" -c 16 -n $(( n / 2 )) > "$work/two2"; wait $a;
          awk '{for (i=1;i<=NF;i++) if ($i ~ /^jobs_per_s=/) {sub("jobs_per_s=","",$i); s+=$i}} END {printf "jobs_per_s=%.0f (sum of two)\n", s}' "$work/two1" "$work/two2"; }
  row "side delayq x2 put c=2x16" "$rd_port" "$rd_pid" two --mode put --body 100
  row "side delayq x2 put+reserve+delete" "$rd_port" "$rd_pid" two --mode reserve --body 100
  kill "$i1_pid" "$i2_pid"; wait "$i1_pid" "$i2_pid" 2>/dev/null || true
  # Retention's share: the same rows with --retain 0 (asynq's default
  # keeps no completed task either).
  redis-cli -p "$rd_port" FLUSHALL >/dev/null
  instance i1 "redis://127.0.0.1:$rd_port/0" --retain 0; inst_pids=$i1_pid
  row "side delayq put --retain 0" "$rd_port" "$rd_pid" dq "$i1_bs" --mode put -n "$n" -c 32 --body 100
  put_cpu=$row_cpu; put_stats=$row_stats; put_inst=$row_inst; put_client=$row_client
  row "side delayq put+reserve+delete --retain 0" "$rd_port" "$rd_pid" dq "$i1_bs" --mode reserve -n "$n" -c 32 --body 100
  printf '%-34s redis_cpu_us_per_job=%.1f commandstats per job:%s\n' "side delayq reserve+delete only --retain 0" \
    "$(awk -v c="$(( row_cpu - put_cpu ))" -v n="$n" 'BEGIN{print c/n}')" "$(per_job "$(sub_stats "$row_stats" "$put_stats")" "$n")"
  cpu_line $(( row_cpu - put_cpu )) $(( row_inst - put_inst )) $(( row_client - put_client ))
  kill "$i1_pid"; wait "$i1_pid" 2>/dev/null || true
  kill "$rd_pid" "$ra_pid"
fi

if selected listpack; then
  # The same delayq rows on a Redis that keeps hashes with values up to
  # 256 bytes as listpacks (hash-max-listpack-value, default 64): a job
  # record with a 100-byte body is then a listpack, not a hashtable.
  fresh_redis rp --hash-max-listpack-value 256
  instance p1 "redis://127.0.0.1:$rp_port/0"; inst_pids=$p1_pid
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
  instance l1 "redis://127.0.0.1:$rl_port/0"; instance l2 "redis://127.0.0.1:$rl_port/0"; inst_pids="$l1_pid $l2_pid"
  sleep 3 # the buckets split between the two instances
  row "lateness 2k/s x5s two instances" "$rl_port" "$rl_pid" dq "$l1_bs" --mode spread --rate 2000 --duration 5s --delay 1s -c 32 --body 100
  # Where the lateness goes, from both instances' /metrics: fire (the
  # timer's tick time minus the due time, delayq_fire_lateness_seconds)
  # and reserve (the reserve's time minus the due time,
  # delayq_reserve_after_due_seconds); the rest of the client's figure is
  # the answer's way back and the put's way in. Histogram buckets: each
  # percentile is the upper bound of the bucket it falls in.
  for m in fire_lateness reserve_after_due; do
    { curl -s "$l1_http/metrics"; curl -s "$l2_http/metrics"; } | awk -v name="$m" -v m="delayq_${m}_seconds_bucket" '
      index($0, m "{le=") == 1 {match($0, /le="[^"]*"/); le = substr($0, RSTART + 4, RLENGTH - 5); n[le] += $2; if (!(le in seen)) {seen[le] = 1; order[++k] = le}}
      END {total = n["+Inf"]; out = ""
        for (q = 1; q <= 2; q++) {p = (q == 1 ? 0.5 : 0.99); for (i = 1; i <= k; i++) if (n[order[i]] >= p * total) {out = out (order[i] == "+Inf" ? sprintf(" p%d>10s", p * 100) : sprintf(" p%d<=%.1fms", p * 100, order[i] * 1000)); break}}
        printf "%-34s %s of %d jobs:%s\n", "", name, total, out}'
  done
  kill "$l1_pid" "$l2_pid" "$rl_pid"
fi

if [[ "$filter" == cluster ]]; then
  # Issue 31 aim 3, only when asked (`bash scripts/bench-redis.sh cluster`):
  # a 3-master Redis Cluster (no replicas, the same persistence as every
  # row above) with 3 delayq instances in front, against one standalone
  # Redis with 3 instances in front, under the same load: N jobs of 100
  # bytes over TOPICS topics (default 30), each instance's load client
  # putting N/3 jobs round-robin over its own TOPICS/3 topics
  # (`delayq bench --topics`), then a reserve run of the same topics
  # (it preloads N/3 more, then reserves+deletes N/3; its puts are
  # subtracted with the put phase's figures), each reserve watching all
  # of its client's topics, and once more with each connection reserving
  # from one of them (--own-topic). The load goes over HTTP:
  # a beanstalkd client switching tubes per put makes the server look up
  # the tube it left (Engine.Topic reads every topic's stats), which would
  # add that lookup to the Redis CPU per job. Topic names are fixed
  # (cb-<i>-<k>), so every run puts the same topics on the same masters;
  # a topic lives in one slot, so with few topics the jobs split as their
  # names hash (the 30 default names: 7/12/11 topics per master). BALANCE=1
  # instead names them cb-<i>.<j>-<k> with the first j whose names split
  # evenly over the masters' slots, to measure the spread of the CPU over
  # the masters apart from the luck of the hashing.
  # For each master: its CPU (/proc utime+stime) per phase and share of
  # the sum, its share of the commands (INFO commandstats calls), and
  # after the put phase its share of the job records (delayq:{t}:j:*)
  # and of the topics; then the summed CPU per job against the standalone.
  topics="${TOPICS:-30}"; conns="${C:-32}"
  (( topics >= 3 && topics % 3 == 0 )) || { echo "TOPICS must be a multiple of 3" >&2; exit 1; }
  per_n=$(( n / 3 )); per_t=$(( topics / 3 )); per_c=$(( (conns + 2) / 3 )); n=$(( per_n * 3 ))
  # cluster_port: a free loopback port whose cluster bus port (+10000) is
  # free too, both below Linux's ephemeral range (as redis-test-env.sh).
  taken=" "
  cluster_port() {
    local p
    for _ in $(seq 1000); do
      p=$(( 20000 + RANDOM % 2768 ))
      [[ "$taken" == *" $p "* ]] && continue
      (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && continue
      (exec 3<>"/dev/tcp/127.0.0.1/$(( p + 10000 ))") 2>/dev/null && continue
      taken="$taken$p "; echo "$p"; return
    done
    echo "no free cluster port" >&2; exit 1
  }
  # MASTERS=1 makes the Cluster one master holding every slot: delayq
  # still takes its Cluster path (the keys of a transition are in several
  # slots), but one Redis process serves it, as in the standalone rows,
  # so the summed figure against the standalone is what delayq's Cluster
  # path costs apart from three Redis processes sharing two cores.
  nm="${MASTERS:-3}"
  [[ "$nm" == 1 || "$nm" == 3 ]] || { echo "MASTERS must be 1 or 3" >&2; exit 1; }
  masters=(); cports=""; cpids=""
  for i in $(seq "$nm"); do
    p=$(cluster_port); mkdir -p "$work/c$i"
    # Under callgrind a node answers the bus fifty times slower: a
    # longer node timeout keeps the others from marking it failed.
    "${redis_run[@]}" redis-server --bind 127.0.0.1 --port "$p" --dir "$work/c$i" --save '' --appendonly yes \
      --appendfsync everysec --daemonize no --logfile "$work/c$i/redis.log" \
      --cluster-enabled yes --cluster-config-file "$work/c$i/nodes.conf" \
      --cluster-node-timeout "$([[ "${CALLGRIND:-}" == 1 ]] && echo 60000 || echo 5000)" & pids+=($!)
    eval "c${i}_pid=$!; c${i}_port=$p"; masters+=("127.0.0.1:$p"); cports+=" $p"; cpids+=" $!"
    wait_port "$p"
  done
  if (( nm == 1 )); then
    redis-cli -p "$c1_port" CLUSTER ADDSLOTSRANGE 0 16383 >/dev/null
  else
    redis-cli --cluster create "${masters[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
  fi
  for i in $(seq "$nm"); do
    p="c${i}_port"; ok=""
    for _ in $(seq 200); do
      redis-cli -p "${!p}" CLUSTER INFO | grep -q 'cluster_state:ok' && { ok=1; break; }; sleep 0.1
    done
    [[ -n "$ok" ]] || { echo "master ${!p} never reached cluster_state:ok" >&2; exit 1; }
  done
  tag=""
  if [[ "${BALANCE:-}" == 1 ]] && (( nm == 3 )); then
    # The first j whose topic names fall evenly on the masters: each
    # topic's keys are in the slot of CRC16(topic) mod 16384 (hash tag).
    tag=$(redis-cli -p "$c1_port" CLUSTER NODES | python3 -c '
import sys
per = int(sys.argv[1])
ranges = []
for line in sys.stdin:
    f = line.split()
    for r in f[8:]:
        if not r.startswith("["):
            a, _, b = r.partition("-")
            ranges.append((int(a), int(b or a), f[1]))
def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc
def owner(name):
    s = crc16(name.encode()) % 16384
    return next(m for a, b, m in ranges if a <= s <= b)
for j in range(10000):
    count = {}
    for i in (1, 2, 3):
        for k in range(per):
            m = owner("cb-%d.%d-%d" % (i, j, k))
            count[m] = count.get(m, 0) + 1
    if len(count) == 3 and len(set(count.values())) == 1:
        print(".%d" % j)
        break
else:
    sys.exit("no balanced topic names in 10000 tries")
' "$per_t")
  fi
  cl_url="redis://${masters[0]}"; (( nm == 1 )) || cl_url+="?addr=${masters[1]}&addr=${masters[2]}"

  # phase SETUP PHASE PORTS PIDS BENCH-ARGS...: the three load clients in
  # parallel (instance i against its own topics cb-i-*), the CPU of each
  # Redis (PIDS) around them; sets ph_cpu[k] (µs), ph_calls[k] and prints
  # one line per Redis.
  phase() {
    local setup=$1 ph=$2; local -a ports=($3) rpids=($4); shift 4
    local k i c0=() bp=() fail=0
    local io0=() io1=()
    for k in "${!ports[@]}"; do redis-cli -p "${ports[k]}" CONFIG RESETSTAT >/dev/null; c0[k]=$(redis_cost "${rpids[k]}"); io0[k]=$(sys_io "${rpids[k]}"); done
    for i in 1 2 3; do
      local target="${setup}${i}_http"
      dq "${!target}" "$@" -n "$per_n" -c "$per_c" --body 100 --topic "cb-$i$tag" --topics "$per_t" --timeout 5m >"$work/ph$i" 2>&1 & bp+=($!)
    done
    for i in "${!bp[@]}"; do wait "${bp[i]}" || fail=1; done
    ph_cpu=(); ph_calls=(); ph_stats=""
    for k in "${!ports[@]}"; do
      ph_cpu[k]=$(( $(redis_cost "${rpids[k]}") - c0[k] ))
      io1[k]="${io0[k]} $(sys_io "${rpids[k]}")"
      local st; st=$(stats "${ports[k]}")
      ph_calls[k]=$(awk -F'[:,=]' '{s+=$3} END {print s+0}' <<<"$st")
      ph_stats+="$st"$'\n'
    done
    # The commands of every Redis summed, for per_job.
    ph_stats=$(awk -F'[:,=]' 'NF >= 5 {c[$1]+=$3; u[$1]+=$5} END {for (k in c) printf "%s:calls=%d,usec=%d\n", k, c[k], u[k]}' <<<"$ph_stats")
    if (( fail )); then echo "$ph failed:"; cat "$work"/ph[123]; return 1; fi
    printf '%-34s %s\n' "$ph rate" "$(awk '{for (i=1;i<=NF;i++) if ($i ~ /^jobs_per_s=/) {sub("jobs_per_s=","",$i); s+=$i}} END {printf "jobs_per_s=%.0f (sum of three)", s}' "$work"/ph[123])"
    printf '  %-30s%s\n' "commandstats per job, summed:" "$(per_job "$ph_stats" "$n")"
    printf '  %-30s%s\n' "syscalls, sleeps per job:" "$(printf '%s\n' "${io1[@]}" | awk -v n="$n" '{r += $3 - $1; w += $4 - $2} END {printf " read+write syscalls %.2f, sleeps %.2f (summed over the Redis servers)", r / n, w / n}')"
  }
  # idle SETUP NAME PORTS PIDS: each Redis's CPU over 2 s with the
  # instances idle (heartbeats, timer buckets), the background that every
  # phase's figure includes.
  idle() {
    local -a rpids=($4) c0=(); local k
    if [[ "${CALLGRIND:-}" == 1 ]]; then
      for k in "${!rpids[@]}"; do redis_idle "${rpids[k]}"; done
      return
    fi
    for k in "${!rpids[@]}"; do c0[k]=$(cpu_us "${rpids[k]}"); done
    sleep 2
    printf '  %-30s' "$2 idle, redis cpu us/s"
    for k in "${!rpids[@]}"; do printf ' %8d' $(( ($(cpu_us "${rpids[k]}") - c0[k]) / 2 )); done
    echo
  }
  # shares NAME VALUES...: each value's share of their sum, and whether
  # every share is within 10% of a third (0.300-0.367).
  shares() {
    local name=$1; shift
    awk -v name="$name" 'BEGIN {for (i = 1; i < ARGC; i++) s += ARGV[i]; ok = "met"
      printf "  %-30s", name
      for (i = 1; i < ARGC; i++) {f = s ? ARGV[i] / s : 0; if (f < 0.3 || f > 1/3*1.1) ok = "missed"; printf " %8s (%.3f)", ARGV[i], f}
      if (ARGC == 2) print "  (one master)"; else printf "  even within 10%%: %s\n", ok}' "$@"
  }

  for i in 1 2 3; do instance k$i "$cl_url"; done
  echo "cluster: $nm masters ${masters[*]}, 3 instances, $n jobs over $topics topics, c=3x$per_c"
  echo "  per master:                     ${masters[*]} (topics cb-<i>$tag-<k>)"
  idle k "cluster" "$cports" "$cpids"
  phase k "cluster put" "$cports" "$cpids" --mode put
  put_cpu=("${ph_cpu[@]}")
  shares "redis cpu us, put" "${ph_cpu[@]}"
  shares "commands, put" "${ph_calls[@]}"
  jobs=(); tops=()
  for p in $cports; do
    jobs+=("$(redis-cli -p "$p" --scan --pattern 'delayq:{cb-*}:j:*' | wc -l)")
    tops+=("$(redis-cli -p "$p" --scan --pattern 'delayq:{cb-*}:ready' | wc -l)")
  done
  shares "job records" "${jobs[@]}"
  shares "topics" "${tops[@]}"
  phase k "cluster put+reserve+delete" "$cports" "$cpids" --mode reserve
  res_cpu=(); for k in "${!put_cpu[@]}"; do res_cpu[k]=$(( ph_cpu[k] - put_cpu[k] )); done
  shares "redis cpu us, reserve+delete" "${res_cpu[@]}"
  shares "commands, put+reserve+delete" "${ph_calls[@]}"
  sum() { local t=0 v; for v in "$@"; do t=$(( t + v )); done; echo "$t"; }
  cl_put=$(sum "${put_cpu[@]}"); cl_res=$(sum "${res_cpu[@]}")
  # The same with each connection reserving from one topic of its client
  # (--own-topic): a reserve of one topic is one script, where one of
  # several topics first peeks each (a read-only script per topic).
  phase k "cluster put+reserve+delete, own topic" "$cports" "$cpids" --mode reserve --own-topic
  own_cpu=(); for k in "${!put_cpu[@]}"; do own_cpu[k]=$(( ph_cpu[k] - put_cpu[k] )); done
  shares "redis cpu us, reserve+delete" "${own_cpu[@]}"
  cl_own=$(sum "${own_cpu[@]}")
  kill "$k1_pid" "$k2_pid" "$k3_pid"; wait "$k1_pid" "$k2_pid" "$k3_pid" 2>/dev/null || true
  kill $cpids; wait $cpids 2>/dev/null || true

  fresh_redis rs
  for i in 1 2 3; do instance s$i "redis://127.0.0.1:$rs_port/0"; done
  echo "standalone: one Redis 127.0.0.1:$rs_port, 3 instances, the same load"
  idle s "standalone" "$rs_port" "$rs_pid"
  phase s "standalone put" "$rs_port" "$rs_pid" --mode put
  sa_put=${ph_cpu[0]}
  phase s "standalone put+reserve+delete" "$rs_port" "$rs_pid" --mode reserve
  sa_res=$(( ph_cpu[0] - sa_put ))
  phase s "standalone put+reserve+delete, own topic" "$rs_port" "$rs_pid" --mode reserve --own-topic
  sa_own=$(( ph_cpu[0] - sa_put ))
  kill "$s1_pid" "$s2_pid" "$s3_pid"; wait "$s1_pid" "$s2_pid" "$s3_pid" 2>/dev/null || true
  kill "$rs_pid"; wait "$rs_pid" 2>/dev/null || true
  awk -v n="$n" -v cp="$cl_put" -v cr="$cl_res" -v sp="$sa_put" -v sr="$sa_res" -v co="$cl_own" -v so="$sa_own" 'BEGIN {
    printf "redis cpu per job, summed over the masters / one standalone: put %.1f / %.1f us = %.2fx; reserve+delete %.1f / %.1f us = %.2fx; both %.1f / %.1f us = %.2fx (aim <= 1.1x)\n",
      cp/n, sp/n, cp/sp, cr/n, sr/n, cr/sr, (cp+cr)/n, (sp+sr)/n, (cp+cr)/(sp+sr)
    printf "the same with one topic per reserving connection: reserve+delete %.1f / %.1f us = %.2fx; both %.1f / %.1f us = %.2fx\n",
      co/n, so/n, co/so, (cp+co)/n, (sp+so)/n, (cp+co)/(sp+so) }'

  # The control: three standalone Redis servers, no Cluster, each with
  # one instance and a third of the load (client i's topics on Redis i),
  # against the one standalone above. What they cost beyond it is what
  # three Redis processes cost on this machine, whatever delayq does.
  for i in 1 2 3; do fresh_redis "t$i"; done
  for i in 1 2 3; do p="t${i}_port"; instance "x$i" "redis://127.0.0.1:${!p}/0"; done
  tports="$t1_port $t2_port $t3_port"; tpids="$t1_pid $t2_pid $t3_pid"
  echo "three standalone: Redis $tports, one instance each, the same load"
  [[ "${CALLGRIND:-}" != 1 ]] || idle x "three standalone" "$tports" "$tpids"
  phase x "three standalone put" "$tports" "$tpids" --mode put
  th_put=$(sum "${ph_cpu[@]}"); tput_cpu=("${ph_cpu[@]}")
  phase x "three standalone put+reserve+delete, own topic" "$tports" "$tpids" --mode reserve --own-topic
  th_own=0; for k in 0 1 2; do th_own=$(( th_own + ph_cpu[k] - tput_cpu[k] )); done
  kill "$x1_pid" "$x2_pid" "$x3_pid"; wait "$x1_pid" "$x2_pid" "$x3_pid" 2>/dev/null || true
  kill $tpids; wait $tpids 2>/dev/null || true
  awk -v n="$n" -v tp="$th_put" -v to="$th_own" -v sp="$sa_put" -v so="$sa_own" 'BEGIN {
    printf "redis cpu per job, three standalone summed / one standalone: put %.1f / %.1f us = %.2fx; reserve+delete, own topic %.1f / %.1f us = %.2fx; both %.1f / %.1f us = %.2fx\n",
      tp/n, sp/n, tp/sp, to/n, so/n, to/so, (tp+to)/n, (sp+so)/n, (tp+to)/(sp+so) }'
fi
