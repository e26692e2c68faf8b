#!/usr/bin/env bash
# The arm64 tests under user-mode emulation (qemu-aarch64-static), cross-
# compiled on the host (go test -exec runs only the test binaries emulated),
# with each arm64 kernel set forced (sdot: the ARMv8.2 dot-product kernels;
# neon: the plain NEON kernels, -tags nodotprod). PIPE_KERNELS makes a run
# fail if the set in use is not the one named. -short trims the slow
# sweeps; the golden tests still run every model file.
#
# What arm64 can change, and where each is checked:
#   - the kernels' assembly and their selection (package kernels, both sets:
#     its tests compare every native set the CPU has, sdot and neon alike,
#     bit for bit with the pure-Go reference);
#   - fused multiply-adds in pure-Go float code (the listing check below,
#     statically, over every package);
#   - the standard library's per-architecture math (math.Exp, Log, ...) and
#     anything else in a whole model's arithmetic: every golden model's
#     logits bit-identical to amd64's (cmd/pipe's TestLogitsFingerprint),
#     once per kernel set, and the generated golden files byte-identical
#     (model/gen's TestRegeneratesGoldenFiles).
# The sdot run adds the model, family and stages packages (batch
# invariance, the family goldens) and the teacher-forced goldens against
# llama.cpp's logits. Emulation is slow: under a load of 40 the cmd/pipe
# tests alone took 23 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
# -timeout is a hang guard per test binary (scripts/test.sh says why 60m).
timeout=60m
export CGO_ENABLED=0 GOOS=linux GOARCH=arm64
if ! command -v qemu-aarch64-static >/dev/null 2>&1; then
  echo "qemu-aarch64-static not found (Debian package qemu-user-static)" >&2
  exit 1
fi
# Go fuses x*y+z into one instruction on arm64 unless a float32()/float64()
# conversion forces the rounding; fused code would not match amd64.
echo "== no fused multiply-add in the arm64 build (at ${SECONDS}s)"
listing=$(go build -gcflags='github.com/pipe-engine/pipe/...=-S' -o /dev/null ./... 2>&1)
if ! grep -q 'model\.Softmax STEXT' <<<"$listing"; then echo "no assembly listing from go build -gcflags=-S"; exit 1; fi
fused=$(grep -E '^\s+0x[0-9a-f]+ [0-9]+ \([^)]*\)\s+F(N)?M(ADD|SUB)[SD]\b' <<<"$listing" || true)
if [ -n "$fused" ]; then
  echo "fused multiply-add in (write float32(a*b)+c or float64(a*b)+c so the product rounds apart):"
  echo "$fused"; exit 1
fi
# Tested natively only: the MADV_HUGEPAGE advice, which qemu-user accepts
# without passing it to the kernel.
native='TestHugeBacking'
# Not repeated under emulation: model/gen's TestTinyMatchesGolden and
# TestPresetsRoundTrip check a generated file's header, metadata and
# finite values, none of it float arithmetic that could differ; that arm64
# generates the same bytes is TestRegeneratesGoldenFiles' check, which runs.
# stages' TestBatchInvariance runs, of its two -short combinations per
# model (1 thread mapped, 2 threads streaming), the second only: thread
# count and expert source are pure-Go scheduling that amd64's passes run in
# both combinations (every combination in the plain pass), while what is
# arm64's own, the kernels a batched pass calls (the multi-row products
# against the one-row ones, bit for bit), is the same in either. It was 70 %
# of stages' 160 CPU-s under emulation.
emulated_skip="$native|^TestTinyMatchesGolden\$|^TestPresetsRoundTrip\$|^TestBatchInvariance\$/./^t1\$"
# The second kernel set (neon) runs package kernels (the nodotprod build and
# PIPE_KERNELS' check) and every golden model's fingerprint, not the model,
# family and stages packages again: the sets differ only inside package
# kernels, whose sdot-build tests already compare the neon set with the
# reference bit for bit on every format and shape they cover, and the
# fingerprints check each golden model's whole logits with neon in use. Both
# sets install kernels for the same formats (kernels/dot_arm64.go), so the
# code around them takes the same paths with either. The
# rest of those packages is pure Go that the sdot run has just run on arm64
# (bit for bit the same with either set, by the two checks above); repeated
# it took 240 s of the phase's 637 s on a quiet 2-vCPU machine.
# The package list names the longest first, so that go test -p 2 starts them
# first and the short ones fill the other CPU instead of one long package
# running alone at the end (stages' TestBatchInvariance and model/gen's
# TestRegeneratesGoldenFiles take the most under emulation; go list keeps
# the order and lists a package once).
all_pkgs=$(go list ./stages/ ./model/gen/ ./model/qwen3next/ ./kernels/ ./quant/ ./model/...)
run() {
  local set=$1 tests=$2 pkgs=$3; shift 3
  echo "== arm64 under qemu: kernel set $set (at ${SECONDS}s)"
  # shellcheck disable=SC2086 # one package per word
  PIPE_KERNELS=$set go test -count=1 -short -timeout "$timeout" -skip "$emulated_skip" -exec qemu-aarch64-static "$@" $pkgs
  PIPE_KERNELS=$set go test -count=1 -short -timeout "$timeout" -exec qemu-aarch64-static "$@" \
    -run "$tests" ./cmd/pipe/
}
run sdot 'Fingerprint|GoldenTeacherForced' "$all_pkgs"
run neon 'Fingerprint' ./kernels/ -tags nodotprod
# The OS-facing packages as an Android build (GOOS=android: no THP, no
# memcg under /sys/fs/cgroup, O_DIRECT fallbacks, CPU pinning), run by
# scripts/qemu-android.sh.
echo "== android/arm64 under qemu: OS-facing packages (at ${SECONDS}s)"
# TestBatchInvariance is compute only (the logits of batched sequences, the
# same kernels and code as the linux/arm64 runs above): not OS-facing. Nor
# is internal/jinja (16 s under emulation): standard library imports only,
# no file or system call, and no arm64-specific code (its float arithmetic
# is in the fused multiply-add check above); the amd64 passes run all of
# its tests.
android_pkgs=$(GOOS=android go list ./internal/... ./cache/ ./reader/ ./stages/ | grep -v '/internal/jinja$')
# shellcheck disable=SC2086 # one package per word
GOOS=android go test -count=1 -short -timeout "$timeout" -skip "$native|^TestBatchInvariance\$" -exec "$PWD/scripts/qemu-android.sh" \
  $android_pkgs
echo "== test-arm64.sh done (at ${SECONDS}s)"
