#!/usr/bin/env python3
"""Stand-in for llama-server in llama.cpp's server tests: maps the command line that
tools/server/tests/utils.py builds onto `pipe serve` and execs it (same pid, so the
tests' terminate() reaches pipe).

Environment (set by scripts/llama-server-tests.sh):
  PIPE_BIN          the pipe binary
  PIPE_TEST_MODEL   the generated GGUF served in place of any downloaded model

Mapping:
  * --hf-repo/--hf-file/--model-url (downloads) -> -m $PIPE_TEST_MODEL; an explicit
    --model is kept.
  * knobs of llama-server's resources that change no answer are dropped: continuous
    batching, GPU layers, flash attention, --offline.
    --parallel/-np, --batch-size/-b, --ubatch-size/-ub and --kv-unified pass through:
    pipe serve has slots, prompt batches (with their return_progress events) and a
    unified KV pool.
  * a replaced model's own default pooling, which llama-server reads from its GGUF when
    the test gives no --pooling, is passed as --pooling (the generated model has none):
    bert-bge-small's bert.pooling_type is CLS.
  * everything else is passed through unchanged: a flag pipe refuses makes the server
    exit, and the test fails on that missing feature rather than being hidden.
"""
import os
import sys

MODEL_FLAGS = {"--hf-repo", "-hf", "-hfr", "--hf-file", "-hff", "--model-url", "-mu"}
DROP_WITH_VALUE = {"--n-gpu-layers", "-ngl", "-fa", "--flash-attn"}
DROP_ALONE = {"--cont-batching", "-cb", "--no-cont-batching", "--offline"}
# the pooling_type of the downloaded models the tests name, by a part of their file name
MODEL_POOLING = {"bert-bge-small": "cls"}


def map_args(argv, model):
    out, dropped, has_model = [], [], False
    pooling = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in MODEL_FLAGS and i + 1 < len(argv):
            pooling = pooling or next((p for k, p in MODEL_POOLING.items() if k in argv[i + 1]), None)
        if a in MODEL_FLAGS or a in DROP_WITH_VALUE:
            dropped += argv[i:i + 2]
            i += 2
            continue
        if a in DROP_ALONE:
            dropped.append(a)
            i += 1
            continue
        if a in ("--model", "-m"):
            has_model = True
        out.append(a)
        i += 1
    if not has_model:
        out = ["-m", model] + out
        if pooling and "--pooling" not in out:
            out += ["--pooling", pooling]
    return out, dropped


def main():
    pipe = os.environ["PIPE_BIN"]
    args, dropped = map_args(sys.argv[1:], os.environ["PIPE_TEST_MODEL"])
    print(f"pipe_server.py: dropped {' '.join(dropped) or 'nothing'}", file=sys.stderr, flush=True)
    print(f"pipe_server.py: exec {pipe} serve {' '.join(args)}", file=sys.stderr, flush=True)
    os.execv(pipe, [pipe, "serve", *args])


if __name__ == "__main__":
    main()
