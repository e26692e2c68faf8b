#!/bin/sh
# record-llama.sh LLAMA_BIN GGUF TEMPLATE OUT [PORT]
#
# Writes to OUT what llama.cpp's llama-server (LLAMA_BIN/llama-server, built
# at 3f545becc) answers on /apply-template for tools-request.json with the
# Jinja chat template TEMPLATE. GGUF is any small model llama-server loads
# (the templates read neither bos_token nor eos_token), e.g.
# `pipe gen --preset qwen3-tiny --out tiny.gguf`. Needs curl and python3.
set -e
dir=$(dirname "$0")
port=${5:-18931}
"$1/llama-server" -m "$2" --jinja --chat-template-file "$3" --port "$port" -c 512 -t 1 --no-warmup >"$4.server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null' EXIT
i=0
until curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; do
	i=$((i + 1))
	[ $i -lt 240 ] || { echo "llama-server did not start: $4.server.log" >&2; exit 1; }
	sleep 0.5
done
curl -sf "http://127.0.0.1:$port/apply-template" -H 'Content-Type: application/json' \
	-d @"$dir/tools-request.json" |
	python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["prompt"])' >"$4"
rm -f "$4.server.log"
