#!/bin/bash
# Cold-read throughput of the reader lanes against fio on the same file, in
# alternating short runs so a shared disk's background load hits both alike.
#
#   reader/fio_compare.sh FILE [ROUNDS] [LANES...]
#
# FILE: a multi-GiB file on the disk under test (e.g. made with
#   dd if=/dev/urandom of=FILE bs=16M count=256 oflag=direct).
# Prints one line per run (round lanes fio_MB/s go_MB/s go/fio) and, per lane
# count, the ratio of the sums and the median of the per-round ratios (the
# figure to quote: a virtio disk shared with other tenants swings 1.5-3 GB/s
# from one second to the next, so only paired, alternating samples compare).
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
rungo() { PIPE_BENCH_FILE="$F" "$BIN" -test.run '^$' -test.bench "ColdExpertReads/lanes=$1/pages=huge\$" -test.benchtime=700x |
	awk '/lanes=/{for(i=1;i<=NF;i++) if ($(i+1)=="GB/s") print $i*1000}'; }
out=$(for r in $(seq 1 "$ROUNDS"); do for n in $LANES; do
	if (( r % 2 )); then a=$(runfio "$n"); b=$(rungo "$n"); else b=$(rungo "$n"); a=$(runfio "$n"); fi
	line="$r $n $a $b $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.3f", b/a}')"
	echo "$line" >&2 # progress; (tee /dev/stderr would truncate a redirected log)
	echo "$line"
done; done)
echo "round lanes fio_MB/s go_MB/s go/fio"
echo "$out"
for n in $LANES; do
	echo "$out" | awk -v n="$n" '$2==n {sf+=$3; sg+=$4; c++}
		END {printf "lanes %s: fio %.0f MB/s, go %.0f MB/s (means), go/fio of sums %.2f", n, sf/c, sg/c, sg/sf}'
	echo "$out" | awk -v n="$n" '$2==n {print $5}' | sort -n |
		awk '{v[NR]=$1} END {m = NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf ", median per-round go/fio %.2f\n", m}'
done
