#!/bin/sh
# Writes testdata/golden/embeddings/NAME.json: llama-server's /embedding
# answers for one token list on a tiny model, per pooling (none, mean, cls,
# last), raw (embd_normalize -1) and normalised (the default, 2), F32 KV and
# flash attention off (as golden-dump's ref config).
#
# usage: testdata/golden/tools/embeddings.sh LLAMA_SERVER MODEL.gguf OUT.json [PORT]
set -eu
SRV=$1 M=$2 OUT=$3 PORT=${4:-18937}
TOKENS='[7,81,3,120,45,9]'
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for P in none mean cls last; do
	"$SRV" -m "$M" --embedding --pooling $P --port "$PORT" -c 64 -t 2 -np 1 -ctk f32 -ctv f32 -fa off >"$TMP/srv-$P.log" 2>&1 &
	pid=$!
	i=0
	until curl -sf "localhost:$PORT/health" >/dev/null; do
		i=$((i + 1))
		[ $i -lt 240 ] || { echo "embeddings.sh: llama-server did not start (see $TMP/srv-$P.log)" >&2; kill $pid; exit 1; }
		sleep 0.5
	done
	curl -sf "localhost:$PORT/embedding" -d "{\"content\":[$TOKENS],\"embd_normalize\":-1}" >"$TMP/$P-raw.json"
	curl -sf "localhost:$PORT/embedding" -d "{\"content\":[$TOKENS]}" >"$TMP/$P-norm.json"
	kill $pid
	wait $pid || true
done
python3 - "$TMP" "$M" "$OUT" "$TOKENS" <<'PY'
import json, sys
tmp, model, out, tokens = sys.argv[1:]
g = {"model": model, "llama_cpp": "3f545becc", "kv": "f32, flash attention off", "tokens": json.loads(tokens)}
for p in ["none", "mean", "cls", "last"]:
    g[p] = json.load(open(f"{tmp}/{p}-raw.json"))[0]["embedding"]
    if p != "none":  # pooling none is never normalised
        g[p + "_norm2"] = json.load(open(f"{tmp}/{p}-norm.json"))[0]["embedding"]
json.dump(g, open(out, "w"), separators=(",", ":"))
PY
