#!/bin/sh
# Builds golden-dump against a llama.cpp build (CPU backend, shared or static
# libraries).
#
# usage: testdata/golden/tools/build.sh LLAMA_CPP_DIR [OUT]
#   LLAMA_CPP_DIR  llama.cpp checkout (or set LLAMA_CPP_DIR); its build tree is
#                  LLAMA_CPP_DIR/build unless LLAMA_CPP_BUILD says otherwise
#   OUT            the binary to write (default: ${TMPDIR:-/tmp}/golden-dump)
set -eu
LLAMA=${1:-${LLAMA_CPP_DIR:-}}
if [ -z "$LLAMA" ] || [ ! -f "$LLAMA/include/llama.h" ]; then
	echo "build.sh: give the llama.cpp checkout (with include/llama.h) as argument or LLAMA_CPP_DIR" >&2
	exit 2
fi
BUILD=${LLAMA_CPP_BUILD:-$LLAMA/build}
OUT=${2:-${TMPDIR:-/tmp}/golden-dump}
SRC=$(dirname "$0")/golden-dump.cpp
CXX=${CXX:-c++}
if [ -f "$BUILD/bin/libllama.so" ]; then
	LIBS="-L$BUILD/bin -Wl,-rpath,$BUILD/bin -lllama -lggml -lggml-base"
elif [ -f "$BUILD/src/libllama.a" ]; then
	LIBS="$BUILD/src/libllama.a $(find "$BUILD/ggml/src" -name 'libggml*.a' | sort -r | tr '\n' ' ') -fopenmp -lpthread -ldl"
else
	echo "build.sh: no libllama.so in $BUILD/bin nor libllama.a in $BUILD/src (build llama.cpp first)" >&2
	exit 1
fi
# shellcheck disable=SC2086
$CXX -std=c++17 -O2 -Wall -I"$LLAMA/include" -I"$LLAMA/ggml/include" "$SRC" $LIBS -o "$OUT"
echo "$OUT"
