#!/usr/bin/env bash
# redis-test-env.sh starts the Redis servers delayq's Redis tests need, on
# free loopback ports in a temporary directory of their own, and prints the
# variables the tests read:
#
#   source <(scripts/redis-test-env.sh)      # start (or reuse) and export
#   go test -race ./internal/store/redisstore/
#   scripts/redis-test-env.sh stop           # stop them and remove the directory
#
# The directory is $DELAYQ_REDIS_TEST_DIR when set (reused while its
# servers live), else a fresh `mktemp -d`: two runs on one machine never
# share or stop each other's servers. start exports DELAYQ_REDIS_TEST_DIR
# with the other variables, so stop, run in the same shell, finds it.
#
# It starts one standalone redis-server (DELAYQ_TEST_REDIS) and a 3-master
# Redis Cluster (DELAYQ_TEST_REDIS_CLUSTER), all with appendonly yes and
# appendfsync everysec, and installs redis-server with apt-get when it is
# missing. Only the export lines go to stdout; progress goes to stderr.
set -euo pipefail

dir="${DELAYQ_REDIS_TEST_DIR:-}"

# marker marks a directory as this script's, so stop never removes a
# directory it did not fill.
marker=.delayq-redis-test

log() { echo "redis-test-env: $*" >&2; }

stop() {
	if [ -z "$dir" ]; then
		log "DELAYQ_REDIS_TEST_DIR is not set: nothing to stop (run stop in the shell that sourced start)"
		return 0
	fi
	[ -d "$dir" ] || return 0
	for pidfile in "$dir"/*/redis.pid; do
		[ -f "$pidfile" ] || continue
		pid="$(cat "$pidfile")"
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	done
	if [ -f "$dir/$marker" ]; then
		rm -rf "$dir"
		log "stopped and removed $dir"
	else
		log "stopped the servers in $dir (left in place: not made by this script)"
	fi
}

install() {
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return 0
	log "installing redis-server with apt-get"
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo"
	$sudo apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >&2
}

# used holds every port this run has taken, with the cluster bus ports
# (port+10000) of the cluster nodes, so no two servers collide.
used=" "

# listening reports whether something accepts connections on the port.
listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port prints a loopback port that is free, whose port+10000 (the
# cluster bus port) is free too, and that neither is taken by this run.
# Ports come from 20000-22767 so both the port and its bus port
# (30000-32767) lie below Linux's ephemeral range (32768-60999): an
# outgoing connection elsewhere on the machine (apt, the module proxy, a
# test) cannot already hold the port we are about to bind.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 2768))
		case "$used" in *" $p "* | *" $((p + 10000)) "*) continue ;; esac
		listening "$p" || listening "$((p + 10000))" || {
			echo "$p"
			return
		}
	done
}

# start_server NAME [extra redis-server args...] starts one redis-server
# on a free port and prints the port. A server that does not answer
# within 10 s (a port taken between the check and the bind) is retried
# on another port, up to 5 times; the last failure shows its log.
start_server() {
	local name="$1"
	shift
	local d="$dir/$name" port attempt
	for attempt in 1 2 3 4 5; do
		port="$(free_port)"
		rm -rf "$d"
		mkdir -p "$d"
		if redis-server --bind 127.0.0.1 --port "$port" --dir "$d" --daemonize yes \
			--pidfile "$d/redis.pid" --logfile "$d/redis.log" --save '' \
			--appendonly yes --appendfsync everysec "$@" >&2; then
			for _ in $(seq 100); do
				if redis-cli -p "$port" ping >/dev/null 2>&1; then
					echo "$port"
					return 0
				fi
				sleep 0.1
			done
		fi
		log "redis-server $name on port $port did not start (attempt $attempt); its log:"
		tail -n 20 "$d/redis.log" >&2 2>/dev/null || true
		[ -f "$d/redis.pid" ] && kill "$(cat "$d/redis.pid")" 2>/dev/null || true
		used="$used$port "
	done
	log "giving up on redis-server $name"
	return 1
}

alive() {
	[ -f "$dir/env" ] || return 1
	for pidfile in "$dir"/*/redis.pid; do
		[ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null || return 1
	done
}

start() {
	if [ -n "$dir" ] && alive; then
		log "reusing the servers in $dir"
		cat "$dir/env"
		return
	fi
	if [ -n "$dir" ]; then
		stop
		if [ -d "$dir" ] && [ ! -f "$dir/$marker" ] && [ -n "$(ls -A "$dir")" ]; then
			log "$dir is not empty and was not made by this script; give DELAYQ_REDIS_TEST_DIR an empty or new directory"
			exit 1
		fi
		mkdir -p "$dir"
	else
		dir="$(mktemp -d -t delayq-redis-test.XXXXXX)"
	fi
	touch "$dir/$marker"
	install
	local single
	single="$(start_server standalone)"
	used="$used$single "
	local ports=() addrs=()
	for i in 1 2 3; do
		local p
		p="$(start_server "node$i" --cluster-enabled yes --cluster-config-file "$dir/node$i/nodes.conf" --cluster-node-timeout 5000)"
		used="$used$p $((p + 10000)) "
		ports+=("$p")
		addrs+=("127.0.0.1:$p")
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >&2
	local ok=""
	for _ in $(seq 200); do
		if redis-cli -p "${ports[0]}" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; then
			ok=1
			break
		fi
		sleep 0.1
	done
	if [ -z "$ok" ]; then
		log "the cluster on ${addrs[*]} did not reach cluster_state:ok in 20 s"
		exit 1
	fi
	local cluster
	cluster="$(IFS=,; echo "${addrs[*]}")"
	{
		echo "export DELAYQ_REDIS_TEST_DIR=$dir"
		echo "export DELAYQ_TEST_REDIS=127.0.0.1:$single"
		echo "export DELAYQ_TEST_REDIS_CLUSTER=$cluster"
	} >"$dir/env"
	log "standalone on 127.0.0.1:$single, cluster on $cluster (data in $dir)"
	cat "$dir/env"
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
*)
	echo "usage: $0 [start|stop]" >&2
	exit 2
	;;
esac
