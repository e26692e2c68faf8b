#!/bin/bash
# Cold-read throughput of the reader lanes against fio on the same file, in
# alternating short runs so a shared disk's background load hits both alike.
#
#   reader/fio_compare.sh FILE [ROUNDS] [LANES...]
#
# FILE: a multi-GiB file on the disk under test (e.g. made with
#   dd if=/dev/urandom of=FILE bs=16M count=256 oflag=direct).
# Prints one line per run (round lanes fio_MB/s go_MB/s) and the medians.
# Needs fio (apt-get install -y fio) and Go. fio reads one 2992 KiB block per
# job (the 4 KiB-rounded size of one Qwen3-30B Q4_K_M expert); the lanes read
# the expert's three ranges (gate, up, down) at their unaligned file offsets.
set -euo pipefail
F=${1:?usage: $0 FILE [ROUNDS] [LANES...]}
ROUNDS=${2:-10}
shift $(( $# >= 2 ? 2 : 1 ))
LANES=${*:-1 2 4 8}
SZ=$(stat -c %s "$F")
BIN=$(mktemp -d)/reader.test
trap 'rm -rf "$(dirname "$BIN")"' EXIT
(cd "$(dirname "$0")" && go test -c -o "$BIN" .)
runfio() { fio --name=r --filename="$F" --direct=1 --rw=randread --bs=2992k --numjobs="$1" --size="$SZ" \
	--runtime=2 --time_based --group_reporting | sed -nE 's/.*READ: .*\(([0-9.]+)MB\/s\).*/\1/p'; }
rungo() { PIPE_BENCH_FILE="$F" "$BIN" -test.run '^$' -test.bench "ColdExpertReads/lanes=$1\$" -test.benchtime=400x |
	awk '/lanes=/{for(i=1;i<=NF;i++) if ($(i+1)=="GB/s") print $i*1000}'; }
out=$(for r in $(seq 1 "$ROUNDS"); do for n in $LANES; do
	if (( r % 2 )); then a=$(runfio "$n"); b=$(rungo "$n"); else b=$(rungo "$n"); a=$(runfio "$n"); fi
	echo "$r $n $a $b" | tee /dev/stderr
done; done)
echo "$out" | awk '{k=$2; f[k]=f[k]" "$3; g[k]=g[k]" "$4; sf[k]+=$3; sg[k]+=$4}
	END {for (k in f) printf "lanes %s: sum of fio MB/s %.0f, sum of go MB/s %.0f, go/fio %.2f\n", k, sf[k], sg[k], sg[k]/sf[k]}' | sort -n -k2
