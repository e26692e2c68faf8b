#!/usr/bin/env bash
# The per-family speed table in RAM: pipe against `llama-bench -lm none`,
# prefill and decode, interleaved rounds, the CPU and the load named
# (issue 39 item 2). For each preset it generates the real-shape model with
# `pipe gen --preset P --seed 1` into MODELS (unless the file is there), then
# per round runs, in this order:
#
#   pipe run -m F -i -n N -t T --temp 0 --ignore-eos --no-warm-start
#            (PIPE_HOT_SET=none) on two chat turns fed through a fifo: the
#            first (the text four times) has its prompt pass read the experts
#            it routes to (cold, O_DIRECT: the "cold" column, tok/s over that
#            longer prompt) while the cache fill (--cache-fill auto, the
#            default: the cache budget holds every expert in RAM) reads the
#            others in the background; the second (the text once) is fed only
#            once the log shows the fill's `cache_fill` event (every expert
#            resident, as llama-bench holds every weight; no event within
#            FILL_TIMEOUT seconds, default 1800, stops the table with an
#            error) and is measured: its prompt pass (the `prefill` event)
#            and its N decoded tokens (Σ wall_ms of the CSV's last N rows),
#            with no expert read from disk inside the measurement (the
#            "hit %" column, the decode's, reads 100);
#   llama-bench -m F -p P -n N -t T -r R -lm none -o json
#            P = the second turn's prompt tokens as pipe counted them in round 1
#            (llama-bench runs its own warm-up first; weights in anonymous
#            memory, repacked); R = -reps (default 1), the rate its mean over
#            R repetitions.
#
# One markdown row per round on stdout (ratio = pipe ÷ llama.cpp); the raw
# logs, CSVs and JSON stay in OUT. Models generated here are deleted at the
# end unless -keep. Run it alone on the machine if the figures are to mean
# anything: the load average at the start of each run is in the table, and
# "pipe CPU %" is the run's cpu_occupancy (its CPU time over wall time × T;
# the wall time includes the wait for the cache fill, which reads while the
# CPUs idle).
# llama-bench -lm none copies the whole file into anonymous memory: each of
# its runs first checks MemAvailable ≥ the file + 1 GiB and stops the table
# with a message otherwise (an OOM kill partway took the Qwen3.6 rounds twice).
#
# -layers N times a layer cut instead of the real shape: the model is
# `pipe gen --preset P --layers N --seed 1`, written to MODELS/P-LN.gguf (a
# name of its own, never mistaken for the whole model), and the row's preset
# cell reads "P (first N layers)". For models whose real shape does not fit
# in RAM beside llama-bench's anonymous copy; every other shape is the
# preset's, so per-layer work is the real model's. Without -layers the
# table is the real shape's, as above.
#
# -jinja adds --jinja to pipe's run: the chat turns are rendered by the
# model's own tokenizer.chat_template (as llama-cli's default), for families
# whose template is not one of pipe run's built-in formats (minimax-m2).
# llama-bench renders no chat either way; its -p is pipe's token count.
#
# Usage: scripts/speed-table.sh [-rounds R] [-reps R] [-n N] [-t T] [-layers N] [-keep]
#          [-jinja] [-out DIR] [-text TEXT] PIPE LLAMA_BENCH MODELS PRESET…
#   e.g. scripts/speed-table.sh ./pipe $LLAMA/build/bin/llama-bench /tmp/m qwen3.6-35b-a3b lfm2-8b-a1b
set -euo pipefail
# shellcheck source=scripts/preset-model.sh
. "$(dirname "$0")/preset-model.sh"
rounds=3 reps=1 n=32 t=2 layers='' keep='' out='' jinja=()
text='The quick brown fox jumps over the lazy dog while the village baker counts loaves of b'
while :; do
  case "${1:-}" in
    -rounds) rounds=$2; shift 2 ;;
    -reps) reps=$2; shift 2 ;;
    -n) n=$2; shift 2 ;;
    -t) t=$2; shift 2 ;;
    -layers) layers=$2; shift 2 ;;
    -keep) keep=1; shift ;;
    -jinja) jinja=(--jinja); shift ;;
    -out) out=$2; shift 2 ;;
    -text) text=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -ge 4 ] || { sed -n '2,54p' "$0" >&2; exit 2; }
case "$reps" in
  '' | *[!0-9]* | 0*) echo "speed-table: -reps $reps: want a positive number of repetitions" >&2; exit 2 ;;
esac
case "$layers" in
  '') ;;
  *[!0-9]* | 0*) echo "speed-table: -layers $layers: want a positive number of layers" >&2; exit 2 ;;
esac
pipe=$1 lb=$2 models=$3; shift 3
command -v jq >/dev/null || { echo "speed-table: jq is required" >&2; exit 2; }
[ -x "$pipe" ] || { echo "speed-table: PIPE $pipe is not executable" >&2; exit 2; }
[ -x "$lb" ] || { echo "speed-table: LLAMA_BENCH $lb is not executable" >&2; exit 2; }
[ -d "$models" ] || { echo "speed-table: MODELS $models is not a directory" >&2; exit 2; }
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/speed-table.XXXXXX")}
mkdir -p "$out"
printf '%s %s %s %s\n%s\n' "$text" "$text" "$text" "$text" "$text" >"$out/turns.txt"

cpu() {
  local name fam model flags
  name=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
  fam=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
  model=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ')
  flags=$(grep -m1 '^flags' /proc/cpuinfo)
  local isa=AVX2
  case "$flags" in *avx512_vnni*) isa='AVX-512 VNNI' ;; *avx512f*) isa=AVX-512 ;; esac
  case "$flags" in *amx_tile*) isa="$isa, AMX" ;; esac
  printf '%s, family 0x%X model 0x%X, %s, %s vCPU' "$name" "$fam" "$model" "$isa" "$(nproc)"
}
load() { cut -d' ' -f1 /proc/loadavg; }

# wait_fill LOG PID: waits until LOG has the cache_fill event (every expert
# read into the cache), or fails when pipe (PID) exits first or after
# FILL_TIMEOUT seconds.
wait_fill() {
  local waited=0
  until grep -q '"event":"cache_fill"' "$1"; do
    kill -0 "$2" 2>/dev/null ||
      { echo "speed-table: pipe exited before its cache fill completed, see $1" >&2; return 1; }
    [ "$waited" -lt "${FILL_TIMEOUT:-1800}" ] ||
      { echo "speed-table: no cache_fill event in $1 after ${FILL_TIMEOUT:-1800} s: the cache budget must hold every expert (the load event's cache budget; --cache-fill auto) for the measured turn to run from RAM" >&2; return 1; }
    sleep 1
    waited=$((waited + 1))
  done
}

# pipe_round PRESET FILE ROUND: runs pipe's two turns, the second once the
# cache fill is done; prints
# "cold_tok_s warm_prompt_tokens warm_tok_s decode_tok_s hit_pct cpu_occupancy".
pipe_round() {
  local base="$out/$1-r$3" pid w
  rm -f "$base.fifo" && mkfifo "$base.fifo"
  PIPE_HOT_SET=none "$pipe" run -m "$2" -i -n "$n" -t "$t" --temp 0 --ignore-eos --no-warm-start "${jinja[@]}" \
    --log-format json --csv "$base.csv" <"$base.fifo" >"$base.out" 2>"$base.log" &
  pid=$!
  exec {w}>"$base.fifo"
  sed -n 1p "$out/turns.txt" >&"$w"
  if ! wait_fill "$base.log" "$pid"; then
    exec {w}>&-
    kill "$pid" 2>/dev/null || true
    wait "$pid" || true
    return 1
  fi
  sed -n 2p "$out/turns.txt" >&"$w"
  exec {w}>&-
  rm -f "$base.fifo"
  wait "$pid" || { echo "speed-table: pipe run failed, see $base.log" >&2; return 1; }
  local pf
  pf=$(jq -r 'select(.event=="prefill") | "\(.prefill_tokens) \(.prefill_tok_s)"' "$base.log")
  [ "$(wc -l <<<"$pf")" -eq 2 ] || { echo "speed-table: want 2 prefill events in $base.log" >&2; return 1; }
  local cold warm_n warm dec hit occ
  cold=$(head -1 <<<"$pf" | cut -d' ' -f2)
  warm_n=$(tail -1 <<<"$pf" | cut -d' ' -f1)
  warm=$(tail -1 <<<"$pf" | cut -d' ' -f2)
  # the CSV's last N token rows (its `# summary` trailer is no row)
  dec=$(grep -v '^#' "$base.csv" | tail -n "$n" | awk -F, -v n="$n" '{s += $3} END {printf "%.3f", n * 1000 / s}')
  # cache_hit_pct is the run's cumulative hit rate over its decode steps, each
  # of which looks up the same number of experts (layers × top-k): the last
  # N rows' own rate is the difference of the cumulative hits.
  hit=$(awk -F, -v n="$n" '$1 ~ /^[0-9]+$/ {k++; s[k] = $1; p[k] = $7}
    END {a = k - n; printf "%.1f", (p[k] * s[k] - (a > 0 ? p[a] * s[a] : 0)) / n}' "$base.csv")
  occ=$(jq -r 'select(.event=="summary") | .cpu_occupancy * 100 | floor' "$base.log")
  echo "$cold $warm_n $warm $dec $hit $occ"
}

# fits FILE: llama-bench -lm none copies the whole file into anonymous
# memory; on a machine whose MemAvailable (page cache included) is short of
# that plus 1 GiB it is OOM-killed partway (twice for Qwen3.6 on the shared
# VM), so the round stops here with the figures instead.
fits() {
  local need avail
  need=$(( $(stat -c %s "$1") + (1 << 30) ))
  avail=$(( $(awk '/^MemAvailable:/ {print $2}' /proc/meminfo) * 1024 ))
  [ "$avail" -ge "$need" ] && return 0
  echo "speed-table: llama-bench -lm none needs $((need >> 20)) MiB for $1, MemAvailable is $((avail >> 20)) MiB: stop the other memory users first" >&2
  return 1
}

# llama_round PRESET FILE ROUND P: prints "pp_tok_s tg_tok_s".
llama_round() {
  local base="$out/$1-r$3-llama"
  fits "$2" || return 1
  "$lb" -m "$2" -p "$4" -n "$n" -t "$t" -r "$reps" -lm none -o json >"$base.json" 2>"$base.log" ||
    { echo "speed-table: llama-bench failed, see $base.log" >&2; return 1; }
  local pp tg
  jq -r '.[0].build_commit' "$base.json" >"$out/llama-commit"
  pp=$(jq -r '.[] | select(.n_prompt > 0 and .n_gen == 0) | .avg_ts' "$base.json")
  tg=$(jq -r '.[] | select(.n_gen > 0 and .n_prompt == 0) | .avg_ts' "$base.json")
  echo "$pp $tg"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
f2() { awk -v a="$1" 'BEGIN {printf "%.2f", a}'; }

rev() { go version -m "$1" 2>/dev/null | awk -F'[\t=]' '$3 == "vcs.revision" {print substr($4, 1, 9)}'; }
echo "CPU: $(cpu). pipe: ${PIPE_REV:-$(rev "$pipe")}. llama.cpp: the build_commit of each llama-bench JSON in OUT."
echo "Prompt: two chat turns (the text four times, then once; the second measured); llama-bench -p = pipe's second-turn prompt tokens, -r $reps; -n $n -t $t; raw files: $out"
echo
echo '| preset | round | load (pipe / llama) | llama.cpp pp | pipe prefill, warm | **ratio** | pipe prefill, cold | llama.cpp tg | pipe decode | **ratio** | pipe hit % | pipe CPU % |'
echo '|---|---|---|---|---|---|---|---|---|---|---|---|'
for preset in "$@"; do
  preset_model speed-table "$pipe" "$models" "$out" "$preset" "$layers"
  p=''
  for r in $(seq 1 "$rounds"); do
    l1=$(load)
    res=$(pipe_round "$preset" "$f" "$r")
    read -r cold warm_n warm dec hit occ <<<"$res"
    p=${p:-$warm_n}
    l2=$(load)
    res=$(llama_round "$preset" "$f" "$r" "$p")
    read -r pp tg <<<"$res"
    echo "| $row | $r | $l1 / $l2 | $(f2 "$pp") (pp$p) | $(f2 "$warm") ($warm_n) | $(ratio "$warm" "$pp") | $(f2 "$cold") | $(f2 "$tg") | $(f2 "$dec") | $(ratio "$dec" "$tg") | $hit | $occ |"
  done
  if [ -n "$made" ] && [ -z "$keep" ]; then rm -f "$f"; fi
done
echo
echo "llama.cpp build_commit: $(cat "$out/llama-commit" 2>/dev/null || echo unknown)"
