#!/usr/bin/env bash
# The arm64 tests under user-mode emulation (qemu-aarch64-static), once with
# each arm64 kernel set forced (sdot: the ARMv8.2 dot-product kernels; neon:
# the plain NEON kernels, -tags nodotprod): the kernels, quant, model and
# stages packages (quant and model/gen, which do not compute with the
# kernels, with the first set only), and from cmd/pipe the logits
# fingerprints (every golden model's logits bit-identical to amd64's) and,
# with sdot, the teacher-forced golden tests against llama.cpp's logits.
# The fingerprints imply the other golden and invariance tests (same logits
# bits as amd64, which runs them all), and emulation is slow: under a load
# of 40 the cmd/pipe tests alone took 23 minutes. PIPE_KERNELS makes a run
# fail if the set in use is not the one named. -short trims the slow
# sweeps; the golden tests still run every model file.
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
emulated_skip="$native|^TestTinyMatchesGolden\$|^TestPresetsRoundTrip\$"
# The second kernel set runs only the packages whose tests compute with the
# kernels: model/gen writes model files and quant (de)quantizes, neither
# calls package kernels, so under -tags nodotprod their tests would repeat
# the sdot run's bit for bit (model/gen took ~3 minutes per run on a loaded
# machine).
all_pkgs=$(go list ./kernels/ ./quant/ ./model/... ./stages/)
kernel_pkgs=$(grep -v -e '/quant$' -e '/model/gen$' <<<"$all_pkgs")
run() {
  local set=$1 tests=$2 pkgs=$3; shift 3
  echo "== arm64 under qemu: kernel set $set (at ${SECONDS}s)"
  # shellcheck disable=SC2086 # one package per word
  PIPE_KERNELS=$set go test -count=1 -short -timeout "$timeout" -skip "$emulated_skip" -exec qemu-aarch64-static "$@" $pkgs
  PIPE_KERNELS=$set go test -count=1 -short -timeout "$timeout" -exec qemu-aarch64-static "$@" \
    -run "$tests" ./cmd/pipe/
}
run sdot 'Fingerprint|GoldenTeacherForced' "$all_pkgs"
run neon 'Fingerprint' "$kernel_pkgs" -tags nodotprod
# The OS-facing packages as an Android build (GOOS=android: no THP, no
# memcg under /sys/fs/cgroup, O_DIRECT fallbacks, CPU pinning), run by
# scripts/qemu-android.sh.
echo "== android/arm64 under qemu: OS-facing packages (at ${SECONDS}s)"
# TestBatchInvariance is compute only (the logits of batched sequences, the
# same kernels and code as the linux/arm64 runs above): not OS-facing.
GOOS=android go test -count=1 -short -timeout "$timeout" -skip "$native|^TestBatchInvariance\$" -exec "$PWD/scripts/qemu-android.sh" \
  ./internal/... ./cache/ ./reader/ ./stages/
echo "== test-arm64.sh done (at ${SECONDS}s)"
