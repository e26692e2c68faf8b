#!/usr/bin/env bash
# The README's test command. Unit tests, the race detector on the concurrent
# packages, the purego build of the kernels, and a fixed count of executions
# (FUZZTIME) of each hostile-input fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=${CGO_ENABLED:-0}
# Each step names the seconds since the script began (.ci/run's log).
# -timeout is a hang guard per test binary, not a speed bound: at a load of
# 35 on 2 cores serve's plain run reached 30 minutes (issue 38's runs are on
# a loaded machine), so it is 60.
timeout=60m
step() { echo "== test.sh: $1 (at ${SECONDS}s)"; }
# Each go test names its longest packages first: go test -p 2 starts
# packages in the order given (and lists each once), so the long ones run
# beside the many short ones instead of one of them running alone at the
# end (serve took 212 of the plain pass's 347 s on a quiet 2-vCPU machine,
# cmd/pipe 166 of the race pass's 381 s).
step "plain"
go test -count=1 -timeout "$timeout" ./serve/ ./model/gen/ ./cmd/pipe/ ./stages/ ./internal/jinja/ ./tools/bench/ ./...
step "purego"
go test -count=1 -timeout "$timeout" -tags purego ./kernels/... ./quant/...
# -race needs cgo; run it where a C toolchain exists. TestLogitsFingerprint
# is bits (the plain pass and the arm64 runs check them); under -race it ran
# every golden model serially (~2 min) on paths the golden tests' -short
# runs already take. model/gen's TestTinyMatchesGolden (headers and
# metadata against llama.cpp's files) and TestRegeneratesGoldenFiles (bytes
# against the goldens) check what the plain pass checks for every
# quantization, and the generator code they run under -race (the worker
# goroutines, each family's weight generator) is what TestPresetsRoundTrip's
# -short run of the same tiny presets runs (at one layer, each preset's
# default quantization; package quant's own -race run covers the
# quantizers); they were half of model/gen's
# race run (914 of 1787 s at load 37). The arm64 runs keep
# TestRegeneratesGoldenFiles.
# internal/jinja is left out: neither it (standard library imports only) nor
# its tests start a goroutine, so the race detector has nothing to compare,
# and its -race run (FuzzTemplate's seeds, the hostile templates, the long
# operations) was the pass's third-longest package (71-177 s); the plain
# pass above runs all of it.
if command -v gcc >/dev/null 2>&1; then
  step "race -short"
  race_pkgs=$(go list ./cmd/pipe/ ./serve/ ./tools/bench/ ./model/gen/ ./stages/ ./kernels/ ./decode/ ./... | grep -v '/internal/jinja$')
  # GORACE=atexit_sleep_ms=0: a race-built process sleeps 1 s before it
  # exits (ThreadSanitizer's default, for goroutines still running to hit a
  # race), and this pass starts ~60 of them as test binaries plus every
  # child the tests start from their own binary (tools/bench's fake peers:
  # 62 children, its race run 64 s against 12 s plain; cmd/pipe's bench,
  # serve and signal children). A race is reported when it happens, so
  # every race during a test is still found; only a goroutine still running
  # after a process's last test or command (a leak) goes unwatched for that
  # second.
  # shellcheck disable=SC2086 # one package per word
  GORACE=atexit_sleep_ms=0 CGO_ENABLED=1 go test -count=1 -timeout "$timeout" -race -short -skip '^TestLogitsFingerprint$|^TestTinyMatchesGolden$|^TestRegeneratesGoldenFiles$' $race_pkgs
fi
# A bounded fuzz run of the hostile-input harnesses (chat templates, the
# HTTP request bodies); their seed corpora already ran above as tests.
# The budget is a count of executions, not a duration: with a duration
# -fuzztime, Go's fuzzing coordinator can report "context deadline exceeded"
# as a failure when the deadline fires while a starved worker is still
# answering (golang/go#75804), which a loaded CI machine hit. A count has no
# deadline to race; a slow machine only takes longer. The minimization of a
# new input is bounded by a count for the same reason. FUZZTIME overrides
# both budgets (a count "Nx" or a duration).
template_budget=${FUZZTIME:-100000x}
request_budget=${FUZZTIME:-50000x}
step "fuzz $template_budget templates, $request_budget request bodies"
go test -count=1 -run '^$' -fuzz '^FuzzTemplate$' -fuzztime "$template_budget" -fuzzminimizetime 1000x ./internal/jinja/
go test -count=1 -run '^$' -fuzz '^FuzzRequestBodies$' -fuzztime "$request_budget" -fuzzminimizetime 1000x ./serve/
step "done"
