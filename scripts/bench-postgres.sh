#!/usr/bin/env bash
# delayq over PostgreSQL next to River on the same database, in one run:
# put, reserve+finish (River: jobs worked), lateness of jobs due at
# 1,000/s over 5 s, and the cost of a transactional put inside an
# application transaction of one INSERT, as a ratio to that transaction
# alone (pgbench, the same SQL any language sends; River's InsertTx from
# Go for comparison). Each row also prints the CPU the delayq process
# spent. The script starts its own throwaway PostgreSQL
# (scripts/pg-test-env.sh) and builds River's side from peers/river, a
# module of its own, so the server never depends on River.
#
#   bash scripts/bench-postgres.sh           # every row (a few minutes)
#   bash scripts/bench-postgres.sh late      # only rows whose name contains "late"
#   bash scripts/bench-postgres.sh table     # only when named: the table's health after
#                                            # TABLE_JOBS (default 1,000,000; in steps of 100,000) jobs went
#                                            # put -> reserve -> finish with --retain
#                                            # TABLE_RETAIN (default 2m), sampled every 30 s
#                                            # until the retained jobs have expired
#
# JOBS (default 20000) and CONC (default 32) size the put and work rows.
set -euo pipefail
cd "$(dirname "$0")/.."
filter="${1:-}"
jobs="${JOBS:-20000}"; conc="${CONC:-32}"
bash scripts/deps.sh
work=$(mktemp -d)
go build -o "$work/delayq" ./cmd/delayq
(cd peers/river && go build -o "$work/riverbench" .)
unset DELAYQ_PG_TEST_DIR # a cluster of this run's own (start exports its directory)
export DELAYQ_PG_FSYNC=on # durable commits, as production runs them
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true
  bash scripts/pg-test-env.sh stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
eval "$(bash scripts/pg-test-env.sh start)"
url="$DELAYQ_TEST_POSTGRES"
pgbin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }
cpu_ms() { awk -v t="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / t)}' "/proc/$1/stat"; }
want() { [[ -z "$filter" || "$1" == *"$filter"* ]]; }

http=$(free_port); bs=$(free_port)
"$work/delayq" serve --postgres "$url" --http-addr "127.0.0.1:$http" --beanstalk-addr "127.0.0.1:$bs" \
  --log-level warn & pids+=($!); dq_pid=$!
wait_port "$http"; wait_port "$bs"

# dq NAME ARGS...: one `delayq bench` row with the delayq process's CPU.
dq() {
  local name=$1; shift
  want "$name" || return 0
  local c0; c0=$(cpu_ms "$dq_pid")
  printf '%-36s %s delayq_cpu_ms=%s\n' "$name" \
    "$("$work/delayq" bench "$@" --line | sed 's/^bench //' || echo failed)" "$(( $(cpu_ms "$dq_pid") - c0 ))"
}
# dqlate NAME ARGS...: a dq row, then where its lateness went, from the
# server's /metrics counted over the row alone: fire (the timer's tick
# minus the due time, delayq_fire_lateness_seconds) and reserve (the
# reservation minus the due time, delayq_reserve_after_due_seconds; a
# job the tick handed to a waiting consumer is reserved in the tick's
# transaction). The rest of the client's figure is the commit and the
# answer's way back. Each percentile is the upper bound of its bucket.
dqlate() {
  want "$1" || return 0
  local before; before=$(curl -s "http://127.0.0.1:$http/metrics")
  dq "$@"
  local after; after=$(curl -s "http://127.0.0.1:$http/metrics")
  for m in fire_lateness reserve_after_due; do
    { echo "$before" | sed 's/^/B /'; echo "$after" | sed 's/^/A /'; } | awk -v name="$m" -v m="delayq_${m}_seconds_bucket" '
      index($2, m "{le=") == 1 {match($2, /le="[^"]*"/); le = substr($2, RSTART + 4, RLENGTH - 5)
        n[le] += ($1 == "A" ? $3 : -$3); if (!(le in seen)) {seen[le] = 1; order[++k] = le}}
      END {total = n["+Inf"]; out = ""
        for (q = 1; q <= 2; q++) {p = (q == 1 ? 0.5 : 0.99); for (i = 1; i <= k; i++) if (n[order[i]] >= p * total) {out = out (order[i] == "+Inf" ? sprintf(" p%d>10s", p * 100) : sprintf(" p%d<=%.1fms", p * 100, order[i] * 1000)); break}}
        printf "%-36s %s of %d jobs:%s\n", "", name, total, out}'
  done
}
# river NAME ARGS...: one riverbench row.
river() {
  local name=$1; shift
  want "$name" || return 0
  printf '%-36s %s\n' "$name" "$("$work/riverbench" -url "$url" "$@" || echo failed)"
}
B=(--body 100)
if [ "$filter" = table ]; then
  n="${TABLE_JOBS:-1000000}"; retain="${TABLE_RETAIN:-2m}"
  thttp=$(free_port)
  "$work/delayq" serve --postgres "$url" --postgres-schema delayq_table --retain "$retain" \
    --http-addr "127.0.0.1:$thttp" --beanstalk-addr "" --log-level warn & pids+=($!)
  wait_port "$thttp"
  sample() { # the jobs table's size, tuples and vacuums, one line
    "$pgbin/psql" "$url" -XAtF' ' -c "SELECT pg_size_pretty(pg_table_size('delayq_table.jobs')),
      pg_size_pretty(pg_indexes_size('delayq_table.jobs')), n_live_tup, n_dead_tup, autovacuum_count, autoanalyze_count
      FROM pg_stat_user_tables WHERE schemaname = 'delayq_table' AND relname = 'jobs'" |
      awk -v label="$1" '{printf "%-28s table=%s index=%s live=%s dead=%s autovacuums=%s autoanalyzes=%s\n", label, $1" "$2, $3" "$4, $5, $6, $7, $8}'
  }
  sample "before"
  for ((done = 0; done < n; done += 100000)); do
    "$work/delayq" bench "http://127.0.0.1:$thttp" --mode reserve -n 100000 -c 8 --batch 100 --take 100 --timeout 30m --line "${B[@]}" | sed 's/^bench /  /'
    sample "after $((done + 100000)) jobs"
  done
  # Every retained job ends within the retention; then the expiry (in
  # bounded batches through jobs_expires) and autovacuum catch up.
  for i in $(seq 1 12); do sleep 30; sample "+$((i * 30))s idle"; done
  exit 0
fi
dq    "put c=$conc delayq-beanstalk"     "beanstalk://127.0.0.1:$bs" --mode put -n "$jobs" -c "$conc" "${B[@]}"
river "put c=$conc river-insert"         -mode put -jobs "$jobs" -conc "$conc"
dq    "reserve+finish c=$conc delayq"    "beanstalk://127.0.0.1:$bs" --mode reserve -n "$jobs" -c "$conc" "${B[@]}"
river "work c=$conc river"               -mode work -jobs "$jobs" -conc "$conc"
# Lateness: jobs put ahead (delayq: during a 3 s lead, batches of 100;
# River: InsertMany, 2 s ahead), due uniformly at 1,000/s over 5 s, taken
# by 16 consumers (delayq: up to 16 jobs a reserve; River: its workers
# fetch in batches too); then delayq with the jobs put during the run,
# each due 2 s after it is sent, by 32 producers.
dqlate "late 1k/s x5s delayq-http"        "http://127.0.0.1:$http" --mode spread --rate 1000 --duration 5s --lead 3s --batch 100 -c 16 --take 16 "${B[@]}"
river "late 1k/s x5s river"              -mode late -rate 1000 -spread 5s -conc 16
dqlate "late-put-during 1k/s x5s delayq"  "http://127.0.0.1:$http" --mode spread --rate 1000 --duration 5s --delay 2s -c 16 --take 16 --producers 32 "${B[@]}"

# The transactional put: pgbench runs an application's transaction of
# one INSERT, alone and with delayq.put in it, from 8 clients.
if want "puttx"; then
  psql_url="$url"
  "$pgbin/psql" "$psql_url" -qXc "CREATE TABLE IF NOT EXISTS bench_orders (id bigserial PRIMARY KEY, note text NOT NULL)" >/dev/null
  printf 'BEGIN;\nINSERT INTO bench_orders (note) VALUES (%s);\nCOMMIT;\n' "'order'" >"$work/alone.sql"
  printf 'BEGIN;\nINSERT INTO bench_orders (note) VALUES (%s);\nSELECT delayq.put(%s, %s, interval %s);\nCOMMIT;\n' \
    "'order'" "'orderclose'" "convert_to(repeat('x', 100), 'UTF8')" "'30 minutes'" >"$work/with.sql"
  tps() { "$pgbin/pgbench" -n -c 8 -j 2 -t 1000 -f "$1" "$psql_url" 2>/dev/null | awk '/^tps/ {print int($3)}' | head -1; }
  alone=$(tps "$work/alone.sql"); with=$(tps "$work/with.sql")
  printf '%-36s tx_alone_per_s=%s tx_with_put_per_s=%s cost_ratio=%s\n' "puttx c=8 delayq-sql" "$alone" "$with" \
    "$(awk -v a="$alone" -v w="$with" 'BEGIN{printf "%.2f", a/w}')"
  river "puttx c=8 river-inserttx" -mode puttx -jobs 8000 -conc 8
fi
