#!/usr/bin/env bash
# redis-test-env.sh starts the Redis servers delayq's Redis tests need, on
# free loopback ports in a temporary directory, and prints the variables
# the tests read:
#
#   source <(scripts/redis-test-env.sh)      # start (or reuse) and export
#   go test -race ./internal/store/redisstore/
#   scripts/redis-test-env.sh stop           # stop them and remove the directory
#
# It starts one standalone redis-server (DELAYQ_TEST_REDIS) and a 3-master
# Redis Cluster (DELAYQ_TEST_REDIS_CLUSTER), all with appendonly yes and
# appendfsync everysec, and installs redis-server with apt-get when it is
# missing. Only the export lines go to stdout; progress goes to stderr.
set -euo pipefail

dir="${DELAYQ_REDIS_TEST_DIR:-${TMPDIR:-/tmp}/delayq-redis-test}"

log() { echo "redis-test-env: $*" >&2; }

stop() {
	[ -d "$dir" ] || return 0
	for pidfile in "$dir"/*/redis.pid; do
		[ -f "$pidfile" ] || continue
		pid="$(cat "$pidfile")"
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	done
	rm -rf "$dir"
	log "stopped and removed $dir"
}

install() {
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null && return 0
	log "installing redis-server with apt-get"
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo"
	$sudo apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server >&2
}

# free_port prints a loopback port nothing listens on.
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 30000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
}

# start_server PORT NAME [extra redis-server args...]
start_server() {
	local port="$1" name="$2"
	shift 2
	local d="$dir/$name"
	mkdir -p "$d"
	redis-server --bind 127.0.0.1 --port "$port" --dir "$d" --daemonize yes \
		--pidfile "$d/redis.pid" --logfile "$d/redis.log" --save '' \
		--appendonly yes --appendfsync everysec "$@" >&2
	for _ in $(seq 100); do
		redis-cli -p "$port" ping >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	log "redis-server on port $port did not start; see $d/redis.log"
	exit 1
}

alive() {
	[ -f "$dir/env" ] || return 1
	for pidfile in "$dir"/*/redis.pid; do
		[ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null || return 1
	done
}

start() {
	if alive; then
		log "reusing the servers in $dir"
		cat "$dir/env"
		return
	fi
	stop
	install
	mkdir -p "$dir"
	local single
	single="$(free_port)"
	start_server "$single" standalone
	local ports=() addrs=()
	for i in 1 2 3; do
		local p
		p="$(free_port)"
		while [ "$p" = "$single" ] || [[ " ${ports[*]} " == *" $p "* ]] || [[ " ${ports[*]} " == *" $((p + 10000)) "* ]]; do p="$(free_port)"; done
		ports+=("$p")
		addrs+=("127.0.0.1:$p")
		start_server "$p" "node$i" --cluster-enabled yes --cluster-config-file "$dir/node$i/nodes.conf" --cluster-node-timeout 5000
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >&2
	for _ in $(seq 100); do
		if redis-cli -p "${ports[0]}" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; then
			break
		fi
		sleep 0.1
	done
	local cluster
	cluster="$(IFS=,; echo "${addrs[*]}")"
	{
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
