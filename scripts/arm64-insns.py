#!/usr/bin/env python3
"""Executed AArch64 instructions per call of a kernels benchmark, under qemu.

Emulated time says little about a phone (qemu runs vector float operations
through software helpers), so this counts what the CPU would execute: qemu
logs every translated block inside the kernel functions (-d in_asm,exec,
nochain -dfilter <their address ranges>), and the count is the sum over
executed blocks of their instruction counts, divided by the calls.

  GOARCH=arm64 go test -c -o /tmp/k.test ./kernels/
  scripts/arm64-insns.py /tmp/k.test DotHot Q4_K purego,sdot,neon
  scripts/arm64-insns.py /tmp/k.test QuantizeActivation Q8_0 purego,sdot
  scripts/arm64-insns.py /tmp/k.test AttnHelpers DotsF16 kernel,scalar
  scripts/arm64-insns.py /tmp/k.test GEMM expert-gate-2048x768/Q4_K/n8 vec/t1,sdot/t1,neon/t1
  scripts/arm64-insns.py /tmp/k.test Conv4 step kernel,scalar
  scripts/arm64-insns.py /tmp/k.test AttendGroup F16 group,heads

DotHot dots a 2048-element row (8 super-blocks of 256, 64 blocks of 32);
QuantizeActivation quantizes 2048 floats. AttnHelpers runs one query head's
score dots (DotsF16) or weighted value sums (AxpysF16) over 1024 F16 rows of
128, a softmax's exponentials over 1024 scores (Softmax), or one layer's
routed SwiGLU over 8×768 values (SwiGLU). Conv4 is one token of a four-tap
convolution over 8192 channels (Qwen3.6's delta-net), its prompt form or
its decode step. AttendGroup is one KV head's 8 query heads (dim 128) over
1024 F16 rows, grouped or head by head; it counts every function of
package kernels and math's. GEMM is one BenchmarkGEMM product
(its shape and token count as the second argument, its kernel kind and
threads as the third), counted per 256 values of each token. The counted functions are the dot,
quantizer or helper and what it calls in package kernels (wrappers
included; for AttnHelpers math.Exp's too, and the closures the benchmark
runs, in which Go may inline the helper), not the benchmark loop.
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

CALLS = 20  # -test.benchtime=20x runs the body once with b.N=1, then 20 times


def ranges(binary, bench, typ):
    nm = subprocess.run(["go", "tool", "nm", "-size", "-sort", "address", binary],
                        capture_output=True, text=True, check=True).stdout
    if bench == "DotHot":
        pat = r"(ref|dot|blockKernel|blockFormat|floatDot|unpackScale|minLanes|lanes|accLanes|hsum|f16at|fp16ToFP32|e8m0Half|combine4x8|bf16ToFP32|actF)"
    elif bench == "GEMM":
        pat = r"(gemm|dot|blockKernel|blockFormat|neonGEMMRun|rows|fillNaN|\(\*job\)|\(\*gemmJob\)|\(\*Pool\)\.MatMul)"
    elif bench == "AttendGroup":
        pat = r".*"  # every function of package kernels (and math.Exp's, below)
    elif bench == "Conv4":
        pat = r"(conv4|convStep4|refConv4|refConvStep4|Conv4|ConvStep4|BenchmarkConv4\.func)"
    elif bench == "AttnHelpers":
        pat = r"(dots|axpys|refDots|refAxpys|expShift|refExpShift|swiGLU|refSwiGLU|f16Table|BenchmarkAttnHelpers\.func|Exp$|archExp|exp$|expmulti$)"
    else:
        pat = r"(refQuant|neonQuant|quantQ8|nearestInt|roundf|fp32ToFP16|fp16ToFP32|max32|abs32)"
    out = []
    for line in nm.splitlines():
        f = line.split()
        if len(f) < 4 or f[2] not in "Tt":
            continue
        if bench in ("AttnHelpers", "AttendGroup") and f[3].startswith("math."):
            short = f[3][len("math."):]
        elif "pipe/kernels." in f[3]:
            short = f[3].split("kernels.", 1)[1]
        else:
            continue
        if bench == "GEMM" and "uant" in short:
            continue  # the activations' quantization, the same for every kind
        if bench == "DotHot" and ("uant" in short or (typ == "F16" and short == "fp16ToFP32")):
            continue  # the quantizers; F16's first call builds its table with fp16ToFP32
        if re.match(pat, short):
            a = int(f[0], 16)
            out.append("0x%x..0x%x" % (a, a + int(f[1]) - 1))
    return ",".join(out)


def count(binary, bench, typ, impl, flt):
    with tempfile.NamedTemporaryFile(suffix=".log") as log:
        subprocess.run(["qemu-aarch64-static", "-d", "in_asm,exec,nochain", "-dfilter", flt, "-D", log.name,
                        binary, "-test.run", "^$", "-test.bench", "%s/%s/%s$" % (bench, typ, impl),
                        "-test.benchtime", "%dx" % CALLS],
                        cwd=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "kernels"),
                        capture_output=True, check=True)
        size, execs, cur, n = {}, collections.Counter(), None, 0
        with open(log.name, errors="replace") as fh:
            for line in fh:
                if line.startswith("IN:"):
                    if cur is not None:
                        size[cur] = n
                    cur, n = None, 0
                elif m := re.match(r"^0x([0-9a-f]+):\s+[0-9a-f]{8}\s", line):
                    cur = int(m.group(1), 16) if cur is None else cur
                    n += 1
                elif m := re.match(r"^Trace \d+: 0x[0-9a-f]+ \[[0-9a-f]+/([0-9a-f]+)/", line):
                    execs[int(m.group(1), 16)] += 1
        if cur is not None:
            size[cur] = n
    if any(pc not in size for pc in execs):
        sys.exit("a logged block has no listing")
    return sum(size[pc] * c for pc, c in execs.items()) / (CALLS + 1)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    binary, bench, typ, impls = sys.argv[1:]
    flt = ranges(binary, bench, typ)
    if bench == "GEMM":
        m = re.search(r"(\d+)x(\d+)/.*/n(\d+)$", typ)
        per = int(m.group(1)) * int(m.group(2)) * int(m.group(3)) / 256
    else:
        per = {"DotHot": 2048 / 256, "QuantizeActivation": 2048 / 256, "Conv4": 8192 / 256, "AttendGroup": 8 * 1024 * 128 / 256,
               "AttnHelpers": {"DotsF16": 1024 * 128, "AxpysF16": 1024 * 128, "Softmax": 1024, "SwiGLU": 8 * 768}.get(typ, 0) / 256}[bench]
    for impl in impls.split(","):
        c = count(binary, bench, typ, impl, flt)
        print("%s %s %s: %.0f instructions per call, %.0f per 256 values" % (bench, typ, impl, c, c / per))


main()
