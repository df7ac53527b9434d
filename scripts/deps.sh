#!/usr/bin/env bash
# Installs the servers and clients the test suite talks to, when missing:
# redis-server (Redis backend tests), beanstalkd (byte-for-byte protocol
# comparison), php-cli + pheanstalk (a real beanstalkd client), chromium
# (the dashboard's browser tests), nc (the README's beanstalkd
# examples), promtool (checks docs/alerts/prometheus-rules.yaml; Debian
# ships it in the prometheus package), podman (builds the Containerfile's
# image), qemu-user (runs the other architecture's release binary's
# --version), systemd-analyze (verifies packaging/delayq.service) and npm
# (fetches buf for scripts/gen-proto.sh, which TestGeneratedCodeIsCurrent
# runs), postgresql (the Postgres backend tests; scripts/pg-test-env.sh
# runs its initdb and pg_ctl). Debian packages only; needs root (or sudo) the first time.
set -euo pipefail

need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v beanstalkd >/dev/null || need+=(beanstalkd)
command -v php >/dev/null || need+=(php-cli)
command -v chromium >/dev/null || need+=(chromium)
command -v nc >/dev/null || need+=(netcat-openbsd)
command -v promtool >/dev/null || need+=(prometheus)
command -v podman >/dev/null || need+=(podman)
{ command -v qemu-aarch64 && command -v qemu-x86_64; } >/dev/null || need+=(qemu-user)
command -v systemd-analyze >/dev/null || need+=(systemd)
command -v npm >/dev/null || need+=(nodejs npm)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -d /usr/share/php/Pheanstalk ] || dpkg -s php-pda-pheanstalk >/dev/null 2>&1 || need+=(php-pda-pheanstalk)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
echo "deps: installing ${need[*]}" >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${need[@]}" >/dev/null
