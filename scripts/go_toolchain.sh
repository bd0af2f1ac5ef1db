#!/usr/bin/env bash
# Prints the path of a Go toolchain new enough for tests/kafka_reference/go (its go.mod's go line): the
# machine's `go` (PATH, or /usr/local/go/bin) when it is, else Go's own toolchain module from the Go
# module proxy, unpacked once into .peers/go-<version> (~70 MB), as `GOTOOLCHAIN` would fetch it.
set -euo pipefail
cd "$(dirname "$0")/.."
want=$(sed -n 's/^go \([0-9.]*\).*/\1/p' tests/kafka_reference/go/go.mod)
newer_or_same() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$2" ]; }
for go in "$(command -v go || true)" /usr/local/go/bin/go; do
    [ -n "$go" ] && [ -x "$go" ] || continue
    have=$("$go" env GOVERSION 2>/dev/null | sed 's/^go//')
    if [ -n "$have" ] && newer_or_same "$have" "$want"; then
        echo "$go"
        exit 0
    fi
done
version=1.26.8  # a release at or above the go line, from the module proxy
home=.peers/go-$version
if [ ! -x "$home/bin/go" ]; then
    echo "go toolchain: fetching go$version from the Go module proxy into $home (~70 MB)" >&2
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    curl -fsSL -o "$work/go.zip" \
        "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$version.linux-amd64.zip"
    (cd "$work" && python3 -m zipfile -e go.zip unpacked)
    rm -rf "$home"
    mkdir -p .peers
    mv "$work/unpacked/golang.org/toolchain@v0.0.1-go$version.linux-amd64" "$home"
    chmod +x "$home"/bin/* "$home"/pkg/tool/*/*
fi
echo "$PWD/$home/bin/go"
