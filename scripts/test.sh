#!/usr/bin/env bash
# The README's test command. Unit tests, the race detector on the concurrent
# packages, and the purego build of the kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=${CGO_ENABLED:-0}
go test -count=1 -timeout 30m ./...
go test -count=1 -timeout 30m -tags purego ./kernels/... ./quant/...
# -race needs cgo; run it where a C toolchain exists.
if command -v gcc >/dev/null 2>&1; then
  CGO_ENABLED=1 go test -count=1 -timeout 30m -race -short ./...
fi
