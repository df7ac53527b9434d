#!/usr/bin/env bash
# Regenerates the Go code of delayq's protobuf API (proto/delayq/v1) into
# api/gen, or into the directory given as $1 (the test that checks the
# checked-in code, TestGeneratedCodeIsCurrent in internal/grpcapi, passes a
# temporary one).
#
# Tools, each at a pinned version so the output is the same everywhere:
#   buf                   from the npm registry (@bufbuild/buf@$BUF_VERSION),
#                         installed once into a cache directory
#                         ($DELAYQ_TOOLS_CACHE, default ~/.cache/delayq);
#   protoc-gen-go         and
#   protoc-gen-connect-go built with `go build` at the versions go.mod pins
#                         in its tool directives (google.golang.org/protobuf,
#                         connectrpc.com/connect).
# Needs node/npm (scripts/deps.sh installs them) and Go.
set -euo pipefail

BUF_VERSION=1.75.0

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/api/gen}
mkdir -p "$out"
out=$(cd "$out" && pwd)

cache=${DELAYQ_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/delayq}/buf-$BUF_VERSION
buf=$cache/node_modules/.bin/buf
if ! "$buf" --version >/dev/null 2>&1; then
  command -v npm >/dev/null || { echo "gen-proto: npm is missing (bash scripts/deps.sh installs it)" >&2; exit 1; }
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-audit --no-fund --loglevel=error "@bufbuild/buf@$BUF_VERSION" >&2
fi
[ "$("$buf" --version)" = "$BUF_VERSION" ] || { echo "gen-proto: $buf is not buf $BUF_VERSION" >&2; exit 1; }

bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root" && go build -o "$bin/" google.golang.org/protobuf/cmd/protoc-gen-go connectrpc.com/connect/cmd/protoc-gen-connect-go)

cd "$root/proto"
"$buf" lint
if [ "$out" = "$root/api/gen" ]; then
  rm -rf "$out/delayq" # no stale files from a message or service since removed
fi
PATH="$bin:$PATH" "$buf" generate --template buf.gen.yaml -o "$out"
