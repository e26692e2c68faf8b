#!/usr/bin/env bash
# The per-family table under a memory cap: pipe against BigMoeOnEdge tuned
# (issue 39 item 2's other half), one `pipe bench` per preset, interleaved
# rounds, the page cache dropped and the disk probed before every run.
#
# For each preset it generates the real-shape model with
# `pipe gen --preset P --seed 1` into MODELS (unless the file is there; with
# -layers N the cut MODELS/P-LN.gguf, as scripts/speed-table.sh names it),
# then runs, as root (the cgroup and the cache drop):
#
#   pipe bench -m F --mem-cap CAP --cold --roofline --roofline-disk 5s
#     --repeat R -n N --timeout 30m --out-dir OUT/P
#     --peer bmoe="BMOE -m {model} -p {prompt} -n {n} -t T --moe-stream
#       --io-threads 4 -c 1024 --ubatch 128 --cache-mb M --predict-prefetch"
#     -- --cache-mb auto --hot-set none -t T --temp 0
#
# The peer at its best, as its README tunes a model bigger than RAM: the
# expert stream with its prediction-driven prefetch, and its cache sized to
# the cap: M = CAP − the model's dense bytes (`pipe inspect --json`) −
# RESERVE MiB (default 1280: its compute buffer at --ubatch 128, the KV
# cache at -c 1024, the process), because bmoe-cli's --cache-mb auto sizes
# from /proc/meminfo's MemAvailable, not from the cgroup. pipe sizes its own
# budget from the cap (--cache-mb auto) and starts cold (--hot-set none: no
# warm start from earlier runs, which the peer has no counterpart of). Both
# greedy, the same prompt.
# BigMoeOnEdge built from source against a stock llama.cpp has no --overlap
# (it needs the project's llama.cpp fork); the command line above is what
# that build runs.
#
# Prints, per preset, a heading with M and the dense bytes, then the
# bench.md that pipe bench wrote (every run with its disk probe, pipe's
# bound, and the pipe ÷ bmoe ratio per round); the raw files stay in OUT.
# Models generated here are deleted at the end unless -keep. Run it alone on
# the machine: the disk and the CPUs are what is measured.
#
# Usage: scripts/cap-table.sh [-cap 8G] [-rounds R] [-n N] [-t T] [-layers N]
#          [-keep] [-out DIR] PIPE BMOE_CLI MODELS PRESET…
#   e.g. sudo scripts/cap-table.sh ./pipe $BMOE/build/cli/bmoe-cli /tmp/m qwen3.6-35b-a3b gpt-oss-20b
set -euo pipefail
# shellcheck source=scripts/preset-model.sh
. "$(dirname "$0")/preset-model.sh"
cap=8G rounds=3 n=64 t=2 layers='' keep='' out=''
while :; do
  case "${1:-}" in
    -cap) cap=$2; shift 2 ;;
    -rounds) rounds=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -t) t=$2; shift 2 ;;
    -layers) layers=$2; shift 2 ;;
    -keep) keep=1; shift ;;
    -out) out=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -ge 4 ] || { sed -n '2,38p' "$0" >&2; exit 2; }
case "$layers" in
  '') ;;
  *[!0-9]* | 0*) echo "cap-table: -layers $layers: want a positive number of layers" >&2; exit 2 ;;
esac
case "$cap" in
  *[0-9]G) capmib=$(( ${cap%G} * 1024 )) ;;
  *[0-9]M) capmib=${cap%M} ;;
  *) echo "cap-table: -cap $cap: want a size in G or M, e.g. 8G" >&2; exit 2 ;;
esac
pipe=$1 bmoe=$2 models=$3; shift 3
command -v jq >/dev/null || { echo "cap-table: jq is required" >&2; exit 2; }
[ -x "$pipe" ] || { echo "cap-table: PIPE $pipe is not executable" >&2; exit 2; }
[ -x "$bmoe" ] || { echo "cap-table: BMOE_CLI $bmoe is not executable" >&2; exit 2; }
[ -d "$models" ] || { echo "cap-table: MODELS $models is not a directory" >&2; exit 2; }
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/cap-table.XXXXXX")}
mkdir -p "$out"
reserve=${RESERVE:-1280}

for preset in "$@"; do
  preset_model cap-table "$pipe" "$models" "$out" "$preset" "$layers"
  dense=$("$pipe" inspect "$f" --json --no-tensors | jq -r '.dense_bytes')
  size=$(stat -c %s "$f")
  mb=$(( capmib - (dense >> 20) - reserve ))
  [ "$mb" -ge 512 ] || { echo "cap-table: $f: $cap leaves bmoe $mb MiB of cache after $((dense >> 20)) MiB of dense weights" >&2; exit 1; }
  echo "### $row under $cap: pipe ÷ BigMoeOnEdge tuned"
  echo
  echo "File $((size >> 20)) MiB, dense $((dense >> 20)) MiB; bmoe --cache-mb $mb --predict-prefetch; -n $n -t $t; raw files: $out/$preset"
  echo
  "$pipe" bench -m "$f" --mem-cap "$cap" --cold --roofline --roofline-disk 5s --repeat "$rounds" -n "$n" \
    --timeout 30m --out-dir "$out/$preset" --format markdown \
    --peer bmoe="$bmoe -m {model} -p {prompt} -n {n} -t $t --moe-stream --io-threads 4 -c 1024 --ubatch 128 --cache-mb $mb --predict-prefetch" \
    -- --cache-mb auto --hot-set none -t "$t" --temp 0 >"$out/$preset.stdout" 2>"$out/$preset.log" ||
    { echo "cap-table: pipe bench failed for $preset, see $out/$preset.log" >&2; exit 1; }
  cat "$out/$preset/bench.md"
  echo
  if [ -n "$made" ] && [ -z "$keep" ]; then rm -f "$f"; fi
done
