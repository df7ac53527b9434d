#!/usr/bin/env bash
# The whole test suite, as the README and CI run it:
#   bash scripts/test.sh
# It installs what the tests need (scripts/deps.sh), starts a standalone
# Redis and a 3-master Redis Cluster on free loopback ports for the Redis
# backend tests and a throwaway PostgreSQL cluster for the Postgres ones, checks formatting and vet, and runs every test with -race.
# Extra arguments go to `go test` (for example -run TestX).
# With CI=true nothing may be skipped for want of a server.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then
  echo "gofmt would change:"; echo "$bad"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== redis"
# shellcheck disable=SC1090
# The assignment, unlike a bare eval "$(...)", stops the run (set -e) when
# the servers cannot be started.
# This run's servers live in a directory of its own, made here so the
# trap can stop them even when start fails halfway.
export DELAYQ_REDIS_TEST_DIR="${DELAYQ_REDIS_TEST_DIR:-$(mktemp -d -t delayq-redis-test.XXXXXX)}"
export DELAYQ_PG_TEST_DIR="${DELAYQ_PG_TEST_DIR:-$(mktemp -d -t delayq-pg-test.XXXXXX)}"
trap 'bash scripts/redis-test-env.sh stop >/dev/null 2>&1 || true; bash scripts/pg-test-env.sh stop >/dev/null 2>&1 || true' EXIT
redis_env="$(bash scripts/redis-test-env.sh start)"
eval "$redis_env"
echo "DELAYQ_TEST_REDIS=$DELAYQ_TEST_REDIS DELAYQ_TEST_REDIS_CLUSTER=$DELAYQ_TEST_REDIS_CLUSTER"

echo "== postgres"
# As for Redis: a cluster that cannot start stops the run, and with
# CI=true the Postgres tests fail rather than skip without it.
pg_env="$(bash scripts/pg-test-env.sh start)"
eval "$pg_env"
echo "DELAYQ_TEST_POSTGRES=$DELAYQ_TEST_POSTGRES"

export DELAYQ_TEST_BEANSTALKD="${DELAYQ_TEST_BEANSTALKD:-$(command -v beanstalkd || true)}"

echo "== go test -race"
go test -race -shuffle=on -timeout 15m "$@" ./...
