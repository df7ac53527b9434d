#!/usr/bin/env bash
# pg-test-env.sh starts a throwaway PostgreSQL cluster for delayq's
# Postgres tests, on a free loopback port in a temporary directory of its
# own, and prints the variable the tests read:
#
#   eval "$(bash scripts/pg-test-env.sh start)"   # start (or reuse) and export
#   go test -race ./internal/store/pgstore/
#   bash scripts/pg-test-env.sh stop               # stop it and remove the directory
#
# The directory is $DELAYQ_PG_TEST_DIR when set (reused while its server
# lives), else a fresh `mktemp -d`: two runs on one machine never share or
# stop each other's clusters. start exports DELAYQ_PG_TEST_DIR with
# DELAYQ_TEST_POSTGRES, so stop, run in the same shell, finds it.
#
# The cluster is made with initdb and run with pg_ctl as the user
# postgres (PostgreSQL refuses to run as root), trusts local connections
# (no password: it listens on 127.0.0.1 only and lives for one run). It
# runs with fsync and synchronous_commit off unless DELAYQ_PG_FSYNC=on:
# no test crashes this shared server (the failover test starts servers
# of its own, internal/pgtest), so waiting for the disk at every commit
# would only slow the suite; the benchmark (scripts/bench-postgres.sh)
# sets DELAYQ_PG_FSYNC=on, so both sides of it pay a durable commit. It
# installs the Debian postgresql package when initdb is missing. Only the
# export lines go to stdout; progress goes to stderr.
set -euo pipefail

dir="${DELAYQ_PG_TEST_DIR:-}"
durable="${DELAYQ_PG_FSYNC:-off}"
case "$durable" in on|off) ;; *) echo "pg-test-env: DELAYQ_PG_FSYNC must be on or off, not $durable" >&2; exit 2;; esac
marker=.delayq-pg-test

log() { echo "pg-test-env: $*" >&2; }

# bindir finds the newest installed PostgreSQL's binaries (Debian keeps
# them out of PATH, under /usr/lib/postgresql/VERSION/bin).
bindir() {
	local d
	d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
	if [ -z "$d" ] && command -v initdb >/dev/null; then
		d="$(dirname "$(command -v initdb)")"
	fi
	echo "$d"
}

# as_postgres runs a command as the user postgres when we are root.
as_postgres() {
	if [ "$(id -u)" = 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

install() {
	[ -n "$(bindir)" ] && [ -x "$(bindir)/initdb" ] && return 0
	log "installing postgresql with apt-get"
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo"
	$sudo apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq postgresql >&2
}

listening() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# free_port prints a free loopback port below Linux's ephemeral range.
free_port() {
	local p
	while :; do
		p=$((23000 + RANDOM % 6000))
		listening "$p" || {
			echo "$p"
			return
		}
	done
}

stop() {
	if [ -z "$dir" ]; then
		log "DELAYQ_PG_TEST_DIR is not set: nothing to stop (run stop in the shell that ran start)"
		return 0
	fi
	[ -d "$dir" ] || return 0
	if [ -f "$dir/data/postmaster.pid" ]; then
		as_postgres "$(bindir)/pg_ctl" -D "$dir/data" -m immediate -w stop >&2 || true
	fi
	if [ -f "$dir/$marker" ]; then
		rm -rf "$dir"
		log "stopped and removed $dir"
	else
		log "stopped the server in $dir (left in place: not made by this script)"
	fi
}

alive() {
	[ -f "$dir/env" ] && [ -f "$dir/data/postmaster.pid" ] &&
		kill -0 "$(head -n 1 "$dir/data/postmaster.pid")" 2>/dev/null
}

start() {
	if [ -n "$dir" ] && alive; then
		log "reusing the server in $dir"
		cat "$dir/env"
		return
	fi
	if [ -n "$dir" ]; then
		stop
		if [ -d "$dir" ] && [ ! -f "$dir/$marker" ] && [ -n "$(ls -A "$dir")" ]; then
			log "$dir is not empty and was not made by this script; give DELAYQ_PG_TEST_DIR an empty or new directory"
			exit 1
		fi
		mkdir -p "$dir"
	else
		dir="$(mktemp -d -t delayq-pg-test.XXXXXX)"
	fi
	touch "$dir/$marker"
	install
	local bin
	bin="$(bindir)"
	[ "$(id -u)" = 0 ] && chown postgres "$dir"
	as_postgres "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --no-locale >"$dir/initdb.log" 2>&1 || {
		log "initdb failed:"
		cat "$dir/initdb.log" >&2
		exit 1
	}
	local port attempt
	for attempt in 1 2 3 4 5; do
		port="$(free_port)"
		# max_connections: every test opens a pool and a listener of
		# its own, and the packages run in parallel. The socket
		# directory is the cluster's own, so nothing in /var/run is
		# needed.
		if as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 30 start \
			-o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=300 -c shared_buffers=64MB -c fsync=$durable -c synchronous_commit=$durable" >&2; then
			break
		fi
		log "postgres on port $port did not start (attempt $attempt); its log:"
		tail -n 20 "$dir/postgres.log" >&2 || true
		port=""
	done
	if [ -z "$port" ]; then
		log "giving up"
		exit 1
	fi
	{
		echo "export DELAYQ_PG_TEST_DIR=$dir"
		echo "export DELAYQ_TEST_POSTGRES=postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
	} >"$dir/env"
	log "postgres on 127.0.0.1:$port (data in $dir)"
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
