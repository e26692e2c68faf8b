#!/usr/bin/env bash
# Time to first token and decode tok/s of served requests, cold vs warm, as
# the server measures them (its `request` events). Starts `pipe serve`
# (optionally inside a cgroup-v1 memory limit, optionally after dropping the
# page cache; both need root), sends three streamed chat requests — cold; warm
# with a new prompt; warm, the next turn of that conversation (its prefix is
# reused) — stops the server with SIGTERM and prints one JSON line per
# request. Run it under `flock LOCK chrt -f 50` on a shared machine.
#
# Usage: scripts/serve-ttft.sh [-cap BYTES] [-cold] [-n MAX_TOKENS] PIPE [pipe serve flags…]
set -euo pipefail
cap='' cold='' n=32
while :; do
  case "${1:-}" in
    -cap) cap=$2; shift 2 ;;
    -cold) cold=1; shift ;;
    -n) n=$2; shift 2 ;;
    *) break ;;
  esac
done
[ $# -ge 1 ] || { sed -n '2,10p' "$0" >&2; exit 2; }
bin=$1; shift
log=$(mktemp)
cg=''
cleanup() { rm -f "$log"; [ -z "$cg" ] || rmdir "$cg" 2>/dev/null || true; }
trap cleanup EXIT
if [ -n "$cold" ]; then sync; echo 3 >/proc/sys/vm/drop_caches; fi
if [ -n "$cap" ]; then
  cg=/sys/fs/cgroup/memory/pipe-serve-ttft-$$
  mkdir "$cg"
  echo "$cap" >"$cg/memory.limit_in_bytes"
  if [ -e "$cg/memory.memsw.limit_in_bytes" ]; then echo "$cap" >"$cg/memory.memsw.limit_in_bytes"; fi
fi
(
  if [ -n "$cg" ]; then echo "$BASHPID" >"$cg/cgroup.procs"; fi
  exec "$bin" --log-format json serve --port 0 "$@"
) 2>"$log" &
pid=$!
addr=''
for _ in $(seq 1200); do
  addr=$(jq -r 'select(.event=="listening").addr' "$log" 2>/dev/null | head -1)
  [ -n "$addr" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.5
done
[ -n "$addr" ] || { echo "serve-ttft: the server did not listen" >&2; kill "$pid"; exit 1; }
req() {
  curl -sfN "http://$addr/v1/chat/completions" -H 'Content-Type: application/json' \
    -d "{\"messages\":[$1],\"max_tokens\":$n,\"stream\":true}" >/dev/null
}
u1='{"role":"user","content":"Explain in a few sentences why the sky is blue during the day and red at sunset."}'
u2='{"role":"user","content":"Write a short poem about a lighthouse keeper who counts the waves at night."}'
a2='{"role":"assistant","content":"The keeper climbs the stair at dusk and counts the grey waves one by one."}'
u3='{"role":"user","content":"Now make it rhyme and add a verse about the morning."}'
req "$u1"
req "$u2"
req "$u2,$a2,$u3"
kill -TERM "$pid"
wait "$pid"
jq -c 'select(.event=="request") | {prompt_tokens, cached_tokens, completion_tokens, ttft_ms, tok_s, cache_hit_pct, read_MiB}' "$log"
jq -c 'select(.event=="load") | {load_seconds, budget_MiB: (.budget_bytes / 1048576 | floor)}' "$log"
if [ -n "$cg" ]; then echo "{\"cgroup_peak_MiB\": $(($(cat "$cg/memory.max_usage_in_bytes") / 1048576))}"; fi
