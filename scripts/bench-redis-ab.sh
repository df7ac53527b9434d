#!/usr/bin/env bash
# A/B of two delayq builds on one 3-master Redis Cluster (issue 31): the
# builds take turns, each round with three fresh instances of one build,
# over the same Redis servers (appendonly yes, appendfsync everysec),
# flushed between rounds, so the machine's drift falls on both alike.
#
#   BIN_A=/tmp/old/delayq BIN_B=/tmp/new/delayq bash scripts/bench-redis-ab.sh put
#   ... bash scripts/bench-redis-ab.sh reserve   # reserve+delete of preloaded jobs (the preload's puts count too)
#   ... bash scripts/bench-redis-ab.sh memory    # Redis memory per delayed job (due in an hour)
#   N=15000 ROUNDS=3 C=11 bash scripts/bench-redis-ab.sh put   # jobs per round, rounds, connections per instance
#
# put and reserve print per round the Redis CPU time per job summed over
# the masters (/proc/PID/stat), the read and write system calls per job
# (/proc/PID/io), the rate summed over the three load clients, and the
# scripts and HSETs per job (INFO commandstats); memory prints the bytes
# of used_memory per job and the key count. Each instance's load client
# spreads its jobs over 10 topics of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
mode="${1:-put}"
case "$mode" in put | reserve | memory) ;; *) echo "usage: bench-redis-ab.sh put|reserve|memory" >&2; exit 2 ;; esac
: "${BIN_A:?set BIN_A and BIN_B to the two delayq binaries}" "${BIN_B:?set BIN_A and BIN_B to the two delayq binaries}"
n="${N:-15000}"
per=$((n / 3))
rounds="${ROUNDS:-3}"
conns="${C:-11}"
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
command -v redis-server >/dev/null || { echo "bench-redis-ab.sh: needs redis-server (apt-get install -y redis-server)" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# cluster_port: a free port p whose Cluster bus port, p+10000, is free too.
cluster_port() {
	python3 -c '
import random, socket
while True:
    p = random.randrange(20000, 45000)
    try:
        for q in (p, p + 10000):
            socket.socket().bind(("127.0.0.1", q))
    except OSError:
        continue
    print(p)
    break'
}
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return; sleep 0.1; done; echo "port $1 never opened" >&2; exit 1; }
cpu_us() { awk -v t="$(getconf CLK_TCK)" '{printf "%d", ($14 + $15) * 1000000 / t}' "/proc/$1/stat"; }
syscalls() { awk '/^sysc[rw]:/ {s += $2} END {print s}' "/proc/$1/io"; }

ports=()
masters=()
redis=()
for i in 1 2 3; do
	p=$(cluster_port)
	mkdir -p "$work/r$i"
	redis-server --bind 127.0.0.1 --port "$p" --dir "$work/r$i" --save '' --appendonly yes --appendfsync everysec \
		--cluster-enabled yes --cluster-config-file "$work/r$i/nodes.conf" --cluster-node-timeout 5000 \
		--daemonize no --logfile "$work/r$i/log" &
	pids+=($!)
	redis+=($!)
	ports+=("$p")
	masters+=("127.0.0.1:$p")
	wait_port "$p"
done
redis-cli --cluster create "${masters[@]}" --cluster-replicas 0 --cluster-yes >/dev/null
for p in "${ports[@]}"; do
	for _ in $(seq 100); do
		redis-cli -p "$p" CLUSTER INFO | grep -q cluster_state:ok && break
		sleep 0.1
	done
done
url="redis://${masters[0]}?addr=${masters[1]}&addr=${masters[2]}"

sum() { # sum FUNC: FUNC over the Redis servers, summed
	local s=0 pid
	for pid in "${redis[@]}"; do s=$((s + $("$1" "$pid"))); done
	echo "$s"
}
used_memory() {
	local s=0 p
	for p in "${ports[@]}"; do s=$((s + $(redis-cli -p "$p" INFO memory | awk -F: '/^used_memory:/ {print $2 + 0}'))); done
	echo "$s"
}
keys() {
	local s=0 p
	for p in "${ports[@]}"; do s=$((s + $(redis-cli -p "$p" DBSIZE))); done
	echo "$s"
}
per_job() { awk -v a="$1" -v n="$n" 'BEGIN {printf "%.2f", a / n}'; }

round() { # round NAME BIN
	local name=$1 bin=$2 inst=() hps=() loads=() i hp
	for i in 1 2 3; do
		hp=$(free_port)
		"$bin" serve --redis "$url" --http-addr "127.0.0.1:$hp" --beanstalk-addr "" --log-level warn 2>"$work/i$i.log" &
		inst+=($!)
		hps+=("$hp")
	done
	for hp in "${hps[@]}"; do wait_port "$hp"; done
	local flags=(--body 100 --topics 10 --timeout 5m -c "$conns" -n "$per")
	case "$mode" in
	put) flags+=(--mode put) ;;
	reserve) flags+=(--mode reserve) ;;
	memory) flags+=(--mode put --delay 1h) ;;
	esac
	local c0 s0 m0
	c0=$(sum cpu_us)
	s0=$(sum syscalls)
	m0=$(used_memory)
	for i in 1 2 3; do
		"$bin" bench "http://127.0.0.1:${hps[i - 1]}" --topic "ab$i-$RANDOM" "${flags[@]}" >"$work/load$i" 2>&1 &
		loads+=($!)
	done
	wait "${loads[@]}"
	local rate
	rate=$(grep -ho 'jobs_per_s=[0-9.]*' "$work"/load[123] | awk -F= '{s += $2} END {printf "%.0f", s}')
	if [[ "$mode" == memory ]]; then
		echo "$name: $((($(used_memory) - m0) / n)) bytes of Redis memory per delayed job, $(keys) keys, put rate $rate/s"
	else
		local stats scripts hsets
		stats=$(for p in "${ports[@]}"; do redis-cli -p "$p" INFO commandstats; done)
		scripts=$(awk -F'[:=,]' '/^cmdstat_evalsha:/ {s += $3} END {print s + 0}' <<<"$stats")
		hsets=$(awk -F'[:=,]' '/^cmdstat_hset:/ {s += $3} END {print s + 0}' <<<"$stats")
		echo "$name: Redis CPU $((($(sum cpu_us) - c0) / n)) us per job, read+write system calls $(per_job $(($(sum syscalls) - s0))), rate $rate/s, scripts $(per_job "$scripts"), HSET $(per_job "$hsets") per job"
	fi
	kill "${inst[@]}"
	wait "${inst[@]}" 2>/dev/null || true
	for p in "${ports[@]}"; do
		redis-cli -p "$p" FLUSHALL >/dev/null
		redis-cli -p "$p" CONFIG RESETSTAT >/dev/null
	done
}

echo "bench-redis-ab.sh $mode: 3 masters, 3 instances of each build, $n jobs a round over 30 topics, c=3x$conns"
for r in $(seq "$rounds"); do
	round "A$r" "$BIN_A"
	round "B$r" "$BIN_B"
done
