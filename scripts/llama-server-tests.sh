#!/usr/bin/env bash
# Runs llama.cpp's server tests (tools/server/tests/unit) against `pipe serve`.
#
#   scripts/llama-server-tests.sh LLAMA_CPP_CHECKOUT [pytest args…]
#
# The checkout is only read: its tools/server/tests are copied to a temporary tree
# (beside a link to its models/, which test_template and test_chat_completion read
# templates from), and utils.py's ServerProcess starts
# scripts/llama-server-tests/pipe_server.py through LLAMA_SERVER_BIN_PATH, which maps
# llama-server's flags onto `pipe serve` and serves a model made by `pipe gen` in place
# of every downloaded one. Without pytest args, the eight core files run (see
# docs/server-tests.md). Needs Debian's python3-pytest python3-requests python3-wget
# python3-aiohttp python3-prometheus-client python3-pytest-timeout; where the `openai`
# package is missing, scripts/llama-server-tests/shim/openai stands in for it.
#
# Environment: PIPE_SERVER_TESTS_CACHE (generated models; default ~/.cache/pipe-server-tests),
# PIPE_SERVER_TESTS_PRESET (pipe gen preset; default qwen3-tiny),
# PIPE_SERVER_TESTS_OUT (where report.xml and pytest.log go; default the temporary tree),
# PYTHON (default /usr/bin/python3: pyenv shims may lack the Debian packages).
set -euo pipefail

if [[ $# -lt 1 || ! -d "$1/tools/server/tests/unit" ]]; then
	echo "usage: $0 LLAMA_CPP_CHECKOUT [pytest args…] (no tools/server/tests/unit under '${1:-}')" >&2
	exit 2
fi
llama=$(cd "$1" && pwd)
shift
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
python=${PYTHON:-/usr/bin/python3}
preset=${PIPE_SERVER_TESTS_PRESET:-qwen3-tiny}
cache=${PIPE_SERVER_TESTS_CACHE:-$HOME/.cache/pipe-server-tests}

work=$(mktemp -d "${TMPDIR:-/tmp}/pipe-server-tests.XXXXXX")
out=${PIPE_SERVER_TESTS_OUT:-$work}
mkdir -p "$cache" "$out" "$work/tools/server"
trap 'rm -rf "$work/tools" "$work/bin"' EXIT

# pipe and the generated model
(cd "$repo" && CGO_ENABLED=0 go build -o "$work/bin/pipe" ./cmd/pipe)
model="$cache/$preset.gguf"
if [[ ! -f "$model" ]]; then
	"$work/bin/pipe" gen --preset "$preset" --out "$model" --no-progress
fi

cp -r "$llama/tools/server/tests" "$work/tools/server/tests"
# ./tmp: llama.cpp's CI has it from the model downloads (LLAMA_CACHE=tmp); the slot
# tests pass it as --slot-save-path, which must be an existing directory
mkdir -p "$work/tools/server/tests/tmp"
ln -s "$llama/models" "$work/models"
# test_local_media_file serves ../../../tools (from the tests' directory: $work/tools) as
# --media-path and asks for mtmd/test-1.jpeg in it: a copy, since pipe refuses a
# symbolic link that leads out of --media-path
mkdir -p "$work/tools/mtmd"
cp "$llama/tools/mtmd/test-1.jpeg" "$work/tools/mtmd/"

pypath="$work/tools/server/tests:$here/llama-server-tests/plugin"
if ! "$python" -c 'import openai' 2>/dev/null; then
	pypath="$pypath:$here/llama-server-tests/shim"
fi

# a free port, so that a llama-server or pipe serve already on 8080 is not hit
port=$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

if [[ $# -eq 0 ]]; then
	set -- unit/test_completion.py unit/test_chat_completion.py unit/test_tokenize.py \
		unit/test_basic.py unit/test_security.py unit/test_metrics.py \
		unit/test_template.py unit/test_ctx_shift.py
fi

cd "$work/tools/server/tests"
rc=0
PIPE_BIN="$work/bin/pipe" PIPE_TEST_MODEL="$model" \
	LLAMA_SERVER_BIN_PATH="$here/llama-server-tests/pipe_server.py" \
	PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$pypath" PORT="$port" LLAMA_CACHE="$work/llama-cache" \
	"$python" -m pytest -p no:cacheprovider -p pipe_plugin -o timeout=120 -rA \
	--junitxml="$out/report.xml" "$@" >"$out/pytest.log" 2>&1 || rc=$?
tail -n 1 "$out/pytest.log"
"$python" "$here/llama-server-tests/summary.py" "$out/report.xml"
echo "log: $out/pytest.log"
exit "$rc"
