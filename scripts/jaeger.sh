#!/usr/bin/env bash
# Builds Jaeger v2 (the `jaeger` program of github.com/jaegertracing/jaeger at a pinned version)
# once from the Go module proxy into the gateway's cache folder, outside the repository, and
# prints the binary's path. `go install …@version` refuses the module (its go.mod has replace
# directives), so it is added as a tool to a scratch module and built from there. About 7
# minutes on two cores the first time; instant afterwards.
#
#   scripts/jaeger.sh            prints the path of the cached binary (building it if missing)
#
# Run with no arguments, the binary serves OTLP/HTTP on 4318, OTLP/gRPC on 4317, and its query API on
# 16686, in memory. (A binary built from the module has no UI assets: its / page is a placeholder;
# the API, /api/traces/{trace id}, is the real one. Jaeger's release images carry the UI.)
set -euo pipefail
version="${JAEGER_VERSION:-v1.76.0}"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/metered-ai-gateway/jaeger-$version"
bin="$cache/jaeger"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
command -v go >/dev/null || { echo "jaeger.sh: needs Go (go.dev/dl) to build Jaeger once" >&2; exit 2; }
mkdir -p "$cache"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
(
  cd "$scratch"
  go mod init jaeger-build >/dev/null 2>&1
  go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$version" >&2
  go build -o "$bin.tmp" github.com/jaegertracing/jaeger/cmd/jaeger >&2
)
mv "$bin.tmp" "$bin"
echo "$bin"
