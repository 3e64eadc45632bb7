#!/usr/bin/env bash
# Builds the real control plane for the end-to-end tests (etcd, kube-apiserver,
# kube-scheduler) from their Go modules, into a cache folder keyed by the hash of
# go.sum: a second run with the same go.sum does nothing. Prints the folder.
#
#   tests/e2e/build.sh            # -> $WASM_SCHEDULER_E2E_CACHE/<hash>/bin or ~/.cache/...
#
# Needs Go >= 1.24 and the Go module proxy. Cold, on 2 cores: see README.md ("End-to-end").
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cache="${WASM_SCHEDULER_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/wasm-scheduler-e2e}"
key="$(cat "$here/go.mod" "$here/go.sum" "$here"/cmd/*/main.go | sha256sum | cut -c1-16)"
out="$cache/$key/bin"
binaries=(etcd kube-apiserver kube-scheduler)
done_all=1
for b in "${binaries[@]}"; do [ -x "$out/$b" ] || done_all=0; done
if [ "$done_all" = 1 ]; then
    echo "$out"
    exit 0
fi
command -v go >/dev/null || { echo "build.sh: Go >= 1.24 is needed to build the e2e binaries" >&2; exit 2; }
mkdir -p "$out.partial"
cd "$here"
start=$SECONDS
for b in "${binaries[@]}"; do
    echo "build.sh: building $b" >&2
    # -trimpath and no debug info: smaller binaries, a cache entry independent of the checkout's path.
    go build -mod=readonly -trimpath -ldflags='-s -w' -o "$out.partial/$b" "./cmd/$b"
done
rm -rf "$out"
mv "$out.partial" "$out"
echo "build.sh: built ${binaries[*]} in $((SECONDS - start)) s" >&2
echo "$out"
