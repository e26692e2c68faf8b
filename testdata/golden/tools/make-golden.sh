#!/bin/sh
# Writes the golden runs of one model in testdata/golden: config ref, every
# prompt of prompts/ (chat* through the model's chat template), 32 greedy
# tokens, and for p0_fox the intermediate tensors of the prompt pass.
#
# usage: testdata/golden/tools/make-golden.sh MODEL [KEEP]
#   MODEL  the model's name: models/MODEL.gguf must exist
#   KEEP   regular expression over llama.cpp tensor names (e.g. 'attn_out-[0-9]+|result_output'):
#          only these tensor files are written (index.json lists every node);
#          default: none (no tensors/ folder). Use '.*' for all.
# env: GOLDEN_DUMP    the golden-dump binary (tools/build.sh prints it)
#      LLAMA_CPP_DIR  the llama.cpp checkout it was built from (for its commit id)
#      THREADS        llama.cpp threads (default 1)
set -eu
MODEL=${1:?usage: make-golden.sh MODEL [KEEP]}
KEEP=${2:-}
: "${GOLDEN_DUMP:?set GOLDEN_DUMP to the golden-dump binary (tools/build.sh)}"
THREADS=${THREADS:-1}
cd "$(dirname "$0")/.."
[ -f "models/$MODEL.gguf" ] || { echo "make-golden.sh: models/$MODEL.gguf not found" >&2; exit 1; }
COMMIT=
if [ -n "${LLAMA_CPP_DIR:-}" ]; then COMMIT=$(git -C "$LLAMA_CPP_DIR" rev-parse HEAD); fi
SHA=$(sha256sum "models/$MODEL.gguf" | cut -d' ' -f1)
mkdir -p "runs/$MODEL"
for p in prompts/*.txt; do
	id=$(basename "$p" .txt)
	set -- -m "models/$MODEL.gguf" --model-file "models/$MODEL.gguf" --sha256 "$SHA" --prompt-file "$p" \
		--prompt-id "$id" -o "runs/$MODEL/${id}__ref.json" -n 32 -t "$THREADS" --config ref \
		--build "CPU, $THREADS thread(s), no flash-attn, KV f32"
	[ -n "$COMMIT" ] && set -- "$@" --commit "$COMMIT"
	case $id in chat*) set -- "$@" --chat ;; esac
	if [ "$id" = p0_fox ] && [ -n "$KEEP" ]; then
		rm -rf "tensors/$MODEL/p0_fox__ref"
		mkdir -p "tensors/$MODEL/p0_fox__ref"
		set -- "$@" --tensors "tensors/$MODEL/p0_fox__ref" --keep "$KEEP"
	fi
	"$GOLDEN_DUMP" "$@"
	echo "runs/$MODEL/${id}__ref.json"
done
