#!/usr/bin/env bash
# Starts `pipe serve` on the tiny test model and checks its wire format with
# curl, a client that shares no code with it: a streamed chat completion must
# be server-sent events ending in `data: [DONE]`, a plain one must carry
# usage, llama-server's /completion and /tokenize answer, the chat page is at /,
# and SIGTERM must end the server with status 0. Requests that count tokens
# ask for greedy decoding (temperature 0): sampled at the API's default
# temperature with a fresh seed, the tiny random model emits its end token
# within 8 tokens about once in 60 requests, which ends the stream with
# finish_reason "stop" and fails the check for a reason outside the server.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v curl >/dev/null || { echo "serve-check: curl is required" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/pipe" ./cmd/pipe
# The log file exists before the server starts (its redirection is opened
# by the background process, which may run after the loop first reads it).
: >"$tmp/stderr"
"$tmp/pipe" serve -m testdata/golden/models/tiny-qwen3moe-Q8_0.gguf --port 0 -c 256 --cache-mb 4 -t 2 \
  2>"$tmp/stderr" &
pid=$!
addr=""
for _ in $(seq 1 300); do
  addr=$(sed -n 's/.*"event":"listening".*"addr":"\([^"]*\)".*/\1/p' "$tmp/stderr")
  [ -n "$addr" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$tmp/stderr" >&2; echo "serve-check: server exited" >&2; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { cat "$tmp/stderr" >&2; echo "serve-check: no listening event" >&2; exit 1; }
curl -sSfN "http://$addr/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":8,"stream":true,"temperature":0}' >"$tmp/stream"
tail -n 2 "$tmp/stream" | grep -qx 'data: \[DONE\]' || { cat "$tmp/stream" >&2; echo "serve-check: stream does not end in data: [DONE]" >&2; exit 1; }
grep -q '"finish_reason":"length"' "$tmp/stream" || { cat "$tmp/stream" >&2; echo "serve-check: no finish_reason in the stream" >&2; exit 1; }
curl -sSf "http://$addr/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt":"Once upon a time","max_tokens":4,"temperature":0}' | grep -q '"completion_tokens":4' \
  || { echo "serve-check: completion without usage" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/v1/chat/completions" -H 'Content-Type: application/json' -d '{bad json')
[ "$code" = 400 ] || { echo "serve-check: bad JSON answered $code, want 400" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/v1/chat/completions" -d '{"messages":[{"role":"user","content":"hi"}]}')
[ "$code" = 415 ] || { echo "serve-check: a form-encoded body answered $code, want 415" >&2; exit 1; }
code=$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/v1/models" -H 'Host: rebound.example')
[ "$code" = 403 ] || { echo "serve-check: an unknown Host answered $code, want 403" >&2; exit 1; }
# llama-server's native API: /completion with n_predict, /tokenize
curl -sSf "http://$addr/completion" -H 'Content-Type: application/json' \
  -d '{"prompt":"Once upon a time","n_predict":3,"temperature":0}' | grep -q '"tokens_predicted":3' \
  || { echo "serve-check: /completion did not honour n_predict" >&2; exit 1; }
curl -sSf "http://$addr/tokenize" -H 'Content-Type: application/json' -d '{"content":"Hello"}' | grep -q '"tokens":\[[0-9]' \
  || { echo "serve-check: /tokenize gave no tokens" >&2; exit 1; }
curl -sSf "http://$addr/" | grep -q '<title>pipe' || { echo "serve-check: no chat page at /" >&2; exit 1; }
kill -TERM "$pid"
status=0
wait "$pid" || status=$?
[ "$status" = 0 ] || { cat "$tmp/stderr" >&2; echo "serve-check: exit status $status after SIGTERM" >&2; exit 1; }
echo "serve-check: 1 passed, 0 failed"
