#!/usr/bin/env bash
# Builds a release into OUTDIR (default dist/):
#   delayq-linux-amd64, delayq-linux-arm64  static binaries (CGO_ENABLED=0,
#                                           -trimpath), version and revision
#                                           stamped: `delayq --version`
#   SHA256SUMS                              their sums (sha256sum -c SHA256SUMS)
#   VERSION                                 the version stamped
#   container/                              the build context of ./Containerfile:
#                                           the binaries, CA certificates, a
#                                           passwd/group with the delayq user,
#                                           the image's config file
# Then, for an image:
#   podman build -f Containerfile --build-arg VERSION=$(cat dist/VERSION) -t delayq:$(cat dist/VERSION) dist/container
#
# VERSION defaults to the repository's VERSION file (the version every
# build from source reports too, see CHANGELOG.md); set it to name a
# build more exactly (e.g. VERSION=$(git describe --tags --dirty)). PLATFORMS to
# "linux/amd64 linux/arm64". Needs Go and git; the CA bundle comes from
# /etc/ssl/certs/ca-certificates.crt (Debian's ca-certificates) or CA_BUNDLE.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-dist}"
platforms="${PLATFORMS:-linux/amd64 linux/arm64}"
ca_bundle="${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"

revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
version="${VERSION:-$(tr -d '[:space:]' < VERSION)}"
if [ -z "$version" ]; then
  echo "release: no version: the VERSION file is empty and VERSION is not set" >&2
  exit 1
fi
commit_time=$(TZ=UTC git log -1 --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd 2>/dev/null || echo unknown)
modified=false
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  modified=true
fi

pkg=github.com/delayq/delayq/internal/buildinfo
ldflags="-s -w -X $pkg.version=$version -X $pkg.revision=$revision -X $pkg.commitTime=$commit_time -X $pkg.modified=$modified"

rm -rf "$out"
mkdir -p "$out/container"
for p in $platforms; do
  os="${p%/*}" arch="${p#*/}"
  bin="delayq-$os-$arch"
  echo "release: $bin ($version, revision $revision)" >&2
  # -buildvcs=false: the stamp above is the record, the same from a git
  # clone or a tarball; -trimpath: no build machine paths in the binary.
  CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" \
    go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$out/$bin" ./cmd/delayq
  cp "$out/$bin" "$out/container/$bin"
done
(cd "$out" && sha256sum delayq-* > SHA256SUMS)
echo "$version" > "$out/VERSION"

# The image is FROM scratch: everything it holds comes from here.
cp "$ca_bundle" "$out/container/ca-certificates.crt"
cp packaging/container/passwd packaging/container/group packaging/container/delayq.toml "$out/container/"
mkdir -p "$out/container/data"
echo "release: $out/ ($(cd "$out" && ls delayq-* | tr '\n' ' '))" >&2
echo "release: image: podman build -f Containerfile --build-arg VERSION=$version -t delayq:$version $out/container" >&2
