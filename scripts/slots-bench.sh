#!/usr/bin/env bash
# Parallel slots in RAM (issue 34's "in RAM ≥ 1.6× one client and ≥ llama-server -np 4"):
# interleaved rounds, on one model file, of
#
#   A  pipe serve --parallel 1   with 1 greedy client   (prompt 1)
#   B  pipe serve --parallel 4   with 4 concurrent greedy clients (prompts 1-4, distinct)
#   C  llama-server -np 4        with the same 4 clients
#
# Every server gets the same settings: -c (per-slot context × slots, split as
# llama-server splits it), -b, -ub, -t, --temp 0, KV f16 (both defaults), no
# unified KV (both defaults with an explicit -np); each client's /completion
# streams -n tokens with cache_prompt false (`pipe bench --clients`, package
# tools/load). Each server answers one warm-up request before the clients
# run. pipe serve runs with its defaults otherwise (--moe-stream with
# --cache-mb auto: every expert cached when the model fits in RAM),
# llama-server with its own (mmap).
#
# Per round and configuration: the aggregate decode rate, Σ(tokens−1) over
# the clients ÷ (last token − earliest first token), and the load average
# before the run; the ratios B÷A (4 vs 1) and B÷C (pipe vs llama-server).
# Before the first round each prompt runs alone on pipe --parallel 1 (its solo
# greedy text); every pipe client's text in every round must equal its solo
# text (a mismatch is reported and makes the exit status 1). llama-server's
# texts are compared too, for information only (another engine's greedy
# text may differ). The CPU (model name, CPUID family/model), pipe's commit,
# llama-server's version and the settings head the output; raw JSON and
# logs stay in OUT. Run it alone on a quiet machine.
#
# Usage: scripts/slots-bench.sh [-rounds R] [-n N] [-ctx C] [-b B] [-ub U] [-t T]
#          [-prompts FILE] [-port P] [-out DIR] PIPE LLAMA_SERVER MODEL.gguf
#   PROMPTS: a file of at least 4 prompts, one per line (default: 4 built in).
#   -ctx is the context of each slot (default 1024); -t 0 = every CPU. PIPE_COMMIT names
#   pipe's commit when the binary carries no VCS stamp; LLAMA_SERVER_ARGS adds flags to
#   llama-server's (and is printed). On a random-weight tiny model llama-server 3f545becc
#   ends streams with "does not match the expected Content-only format" (its output
#   parser on random bytes): the C column says error there, as in a dry run.
set -euo pipefail
rounds=3 n=64 ctx=1024 b=2048 ub=512 t=0 prompts='' port=18431 out=''
while :; do
	case "${1:-}" in
	-rounds) rounds=$2; shift 2 ;;
	-n) n=$2; shift 2 ;;
	-ctx) ctx=$2; shift 2 ;;
	-b) b=$2; shift 2 ;;
	-ub) ub=$2; shift 2 ;;
	-t) t=$2; shift 2 ;;
	-prompts) prompts=$2; shift 2 ;;
	-port) port=$2; shift 2 ;;
	-out) out=$2; shift 2 ;;
	*) break ;;
	esac
done
[ $# -eq 3 ] || { sed -n "2,$(( $(grep -n "^set -euo" "$0" | cut -d: -f1) - 1 ))p" "$0" >&2; exit 2; }
pipe=$1 llama=$2 model=$3
for c in jq curl; do command -v "$c" >/dev/null || { echo "slots-bench: $c is required" >&2; exit 2; }; done
[ -x "$pipe" ] || { echo "slots-bench: PIPE $pipe is not executable" >&2; exit 2; }
[ -x "$llama" ] || { echo "slots-bench: LLAMA_SERVER $llama is not executable" >&2; exit 2; }
[ -f "$model" ] || { echo "slots-bench: MODEL $model is not a file" >&2; exit 2; }
[ "$t" -gt 0 ] || t=$(nproc)
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/slots-bench.XXXXXX")}
mkdir -p "$out"
if [ -n "$prompts" ]; then
	grep -v '^[[:space:]]*$' "$prompts" | head -n 4 >"$out/prompts.txt"
else
	cat >"$out/prompts.txt" <<-'EOF'
		The village baker rose before dawn and began to knead the dough for the morning loaves, thinking about
		Explain in simple words how a steam engine turns the heat of burning coal into the motion of a train and
		Once upon a time, in a kingdom by the cold northern sea, there lived a princess who collected maps of
		Write a short letter to a friend describing the garden you planted this spring, the vegetables that grew and
	EOF
fi
[ "$(wc -l <"$out/prompts.txt")" -eq 4 ] || { echo "slots-bench: -prompts $prompts: need 4 non-empty lines" >&2; exit 2; }
url="http://127.0.0.1:$port"

server_pid=''
stop_server() {
	if [ -n "$server_pid" ]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
		server_pid=''
	fi
}
trap stop_server EXIT

# start_server LOG CMD…: runs the server and waits (at most 10 min: a hang
# guard for loading a large model) until /health answers 200.
start_server() {
	local log=$1; shift
	"$@" >"$log" 2>&1 &
	server_pid=$!
	for _ in $(seq 1200); do
		if ! kill -0 "$server_pid" 2>/dev/null; then
			echo "slots-bench: the server exited; see $log" >&2; tail -n 5 "$log" >&2; exit 1
		fi
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" = 200 ] && return 0
		sleep 0.5
	done
	echo "slots-bench: no /health within 10 min; see $log" >&2
	exit 1
}
pipe_serve() { # pipe_serve LOG SLOTS
	start_server "$1" "$pipe" serve -m "$model" --port "$port" -c $((ctx * $2)) --parallel "$2" \
		--batch-size "$b" --ubatch-size "$ub" -t "$t" --temp 0 --no-ui
}
llama_serve() { # llama_serve LOG SLOTS
	start_server "$1" "$llama" -m "$model" --port "$port" -c $((ctx * $2)) -np "$2" \
		-b "$b" -ub "$ub" -t "$t" --temp 0 ${LLAMA_SERVER_ARGS:-}
}
# clients JSON K FIRST: K clients, prompts FIRST.. of prompts.txt, -n tokens,
# after one warm-up request.
clients() {
	tail -n +"$3" "$out/prompts.txt" | head -n "$2" >"$out/p.txt"
	curl -s -o /dev/null "$url/completion" -d "{\"prompt\":\"Hello\",\"n_predict\":4,\"cache_prompt\":false}"
	if ! "$pipe" bench --clients "$2" --url "$url" --client-prompts "$out/p.txt" -n "$n" --format json >"$1" 2>"$1.err"; then
		echo "slots-bench: clients on $url failed: $(tail -c 300 "$1.err")" >&2
		echo '{"Clients":[]}' >"$1"
	fi
}
# decode_rate JSON: Σ(tokens−1) ÷ (last token − earliest first token), tok/s.
decode_rate() {
	jq -r 'if (.Clients | length) == 0 then "error" else . end | if . == "error" then . else
		[.Clients[] | {n: (.Tokens - 1), a: .TTFT, e: (.TTFT + .Decode)}] as $c
		| (($c | map(.n) | add) / ((($c | map(.e) | max) - ($c | map(.a) | min)) / 1e9))
		| . * 100 | round / 100 end' "$1"
}
texts() { jq -r '.Clients[].Text | @json' "$1"; }
load() { cut -d' ' -f1 /proc/loadavg; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }

cpu_name=$(grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//' || true)
cpu_fam=$(grep -m1 '^cpu family' /proc/cpuinfo | cut -d: -f2 | tr -d ' ' || true)
cpu_model=$(grep -m1 '^model[[:space:]]*:' /proc/cpuinfo | cut -d: -f2 | tr -d ' ' || true)
pipe_rev=$(go version -m "$pipe" 2>/dev/null | awk -F'[\t=]' '/vcs.revision/ { print substr($NF, 1, 12) }' || true)
pipe_rev=${pipe_rev:-${PIPE_COMMIT:-}} # a binary built without VCS stamping: say it in PIPE_COMMIT
pipe_dirty=$(go version -m "$pipe" 2>/dev/null | awk -F'[\t=]' '/vcs.modified/ { print $NF }' || true)
llama_ver=$("$llama" --version 2>&1 | grep -m1 -i 'version' || true)
echo "# slots-bench: $(basename "$model") ($(du -h "$model" | cut -f1)), $(date -u +%Y-%m-%dT%H:%MZ)"
echo "CPU: ${cpu_name:-?} (CPUID family ${cpu_fam:-?} model ${cpu_model:-?}), $(nproc) CPUs, $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
echo "pipe: ${pipe_rev:-?}${pipe_dirty:+ (modified: $pipe_dirty)}; llama-server: ${llama_ver:-?}"
echo "both engines: -c ${ctx}×slots (${ctx} per slot), -b $b, -ub $ub, -t $t, --temp 0, KV f16, no unified KV${LLAMA_SERVER_ARGS:+; llama-server also $LLAMA_SERVER_ARGS}; clients: /completion, -n $n, stream, cache_prompt false"
echo

# the solo greedy texts: each prompt alone on pipe --parallel 1
pipe_serve "$out/solo.log" 1
for i in 1 2 3 4; do
	clients "$out/solo-$i.json" 1 "$i"
	texts "$out/solo-$i.json" >"$out/solo-$i.txt"
done
stop_server
cat "$out"/solo-{1,2,3,4}.txt >"$out/solo-1234.txt"

# same JSON SOLO: the clients' texts equal the solo ones
same() { [ "$(texts "$1")" = "$(cat "$2")" ] && echo yes || echo NO; }
# A configuration whose clients failed shows "error" and makes the exit status 1.

status=0
echo '| round | load A / B / C | A: pipe -np 1, 1 client | B: pipe -np 4, 4 clients | C: llama-server -np 4, 4 clients | **B ÷ A** | **B ÷ C** | pipe texts = solo (A, B) | llama texts = pipe solo |'
echo '| ---: | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |'
for r in $(seq "$rounds"); do
	la=$(load); pipe_serve "$out/a-$r.log" 1; clients "$out/a-$r.json" 1 1; stop_server
	lb=$(load); pipe_serve "$out/b-$r.log" 4; clients "$out/b-$r.json" 4 1; stop_server
	lc=$(load); llama_serve "$out/c-$r.log" 4; clients "$out/c-$r.json" 4 1; stop_server
	a=$(decode_rate "$out/a-$r.json") bb=$(decode_rate "$out/b-$r.json") c=$(decode_rate "$out/c-$r.json")
	sa=$(same "$out/a-$r.json" "$out/solo-1.txt") sb=$(same "$out/b-$r.json" "$out/solo-1234.txt")
	sc=$(same "$out/c-$r.json" "$out/solo-1234.txt")
	[ "$sa$sb" = yesyes ] && [ "$a$bb$c" = "${a//error/}${bb//error/}${c//error/}" ] || status=1
	echo "| $r | $la / $lb / $lc | $a | $bb | $c | $(ratio "$bb" "$a") | $(ratio "$bb" "$c") | $sa, $sb | $sc |"
done
echo
echo "tok/s: aggregate decode, Σ(tokens−1) ÷ (last token − earliest first token); raw JSON and logs: $out"
[ "$status" -eq 0 ] || echo "slots-bench: a configuration failed or a pipe client's text differs from its solo run (see $out)" >&2
exit "$status"
