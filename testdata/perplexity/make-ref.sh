#!/bin/sh
# Regenerates the llama-perplexity reference numbers in this folder.
# usage: LLAMA_PERPLEXITY=<llama.cpp build>/bin/llama-perplexity ./make-ref.sh
# (llama.cpp commit 3f545becc, CMAKE_BUILD_TYPE=Release, GGML_NATIVE=ON, LLAMA_CURL=OFF, CPU backend)
#
# -b 128 (= -c) evaluates one chunk per batch and -fa off uses plain attention, which is how
# pipe evaluates a chunk; README.md says how llama-perplexity's defaults move its own numbers.
set -eu
# llama-perplexity's logger sometimes loses its last lines at exit: each run is repeated (up to 5
# times) until its output is whole (it ends with the line named by $2).
whole() { # whole OUT LAST CMD...
	out=$1 last=$2; shift 2
	for i in 1 2 3 4 5; do
		"$@" > "$out" 2>&1 || true
		grep -q "$last" "$out" && return 0
	done
	echo "no whole output from: $*" >&2; return 1
}
L=${LLAMA_PERPLEXITY:?set LLAMA_PERPLEXITY to the llama-perplexity binary}
M=../golden/models
for m in tiny-qwen3moe-F32 tiny-qwen3moe-Q4_K_M tiny-gemma4-F32 tiny-gemma4-Q4_K_M; do
	# The result lines only: "[1]…," (stdout) and "Final estimate" (its log, stderr).
	whole run.log "Final estimate" "$L" -m "$M/$m.gguf" -f text.txt -c 128 -b 128 -fa off -t 2
	grep -E '^\[1\]|Final estimate' run.log | sed 's/^.*Final estimate/Final estimate/' > "$m.ref"
done
# The F32 models with an F32 KV cache (pipe perplexity --kv-type f32): no F16 rounding of K, V,
# Q and the attention weights, so the two programs' float-order differences are not amplified.
for m in tiny-qwen3moe-F32 tiny-gemma4-F32; do
	whole run.log "Final estimate" "$L" -m "$M/$m.gguf" -f text.txt -c 128 -b 128 -fa off -t 2 -ctk f32 -ctv f32
	grep -E '^\[1\]|Final estimate' run.log | sed 's/^.*Final estimate/Final estimate/' > "$m-kvf32.ref"
done
# The base (F32 log-probabilities, llama-perplexity's file) and the KL report of Q4_K_M against it.
"$L" -m "$M/tiny-qwen3moe-F32.gguf" -f text.txt -c 128 -b 128 -fa off -t 2 --kl-divergence-base tiny-qwen3moe-F32.kld >/dev/null 2>&1
whole run.log "Same top p" "$L" -m "$M/tiny-qwen3moe-Q4_K_M.gguf" -c 128 -b 128 -fa off -t 2 --kl-divergence-base tiny-qwen3moe-F32.kld --kl-divergence
grep -E '^ *[0-9]+ +[0-9]|^Mean|^Maximum|^Median|^Minimum|^Same|^RMS|^Cor|^ ?[0-9.]+%' run.log > tiny-qwen3moe-Q4_K_M-vs-F32.kl.ref
rm run.log
