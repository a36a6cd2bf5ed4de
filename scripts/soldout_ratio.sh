#!/usr/bin/env bash
# soldout_ratio.sh measures the sold-out purchase path of built flashsale
# binaries against ../shared/bench/ceiling, each server in its own process,
# the same load generator (wrk) for all, in interleaved rounds, and prints
# each binary's throughput as a ratio to the ceiling's (per round, then the
# median). A sold-out purchase is the request a flash sale answers most.
#
#   go build -o /tmp/fs-new ./cmd/flashsale
#   go build -o /tmp/ceiling ../shared/bench/ceiling
#   scripts/soldout_ratio.sh /tmp/ceiling /tmp/fs-old /tmp/fs-new   # ROUNDS=7 DURATION=3s CONNS=32 THREADS=1
set -euo pipefail
ceiling=$1
shift
rounds=${ROUNDS:-7} duration=${DURATION:-3s} conns=${CONNS:-32} threads=${THREADS:-1}
. "$(dirname "$0")/soldout_servers.sh"

# Each round measures every server once; odd rounds go ceiling first, even
# rounds ceiling last, so a machine that speeds up or slows down within a
# round favours neither.
declare -A ratios rpss
order=("${!urls[@]}")
for r in $(seq "$rounds"); do
	line="round $r:"
	if [ $((r % 2)) = 0 ]; then order=($(printf '%s\n' "${!urls[@]}" | sort -rn)); else order=("${!urls[@]}"); fi
	for i in "${order[@]}"; do
		rpss[$i]=$(wrk -t"$threads" -c"$conns" -d"$duration" -s "$work/post.lua" "${urls[$i]}" | awk '/Requests\/sec/ {print $2}')
	done
	base=${rpss[0]}
	line+=" ceiling $base/s"
	for i in "${!urls[@]}"; do
		[ "$i" = 0 ] && continue
		ratio=$(python3 -c "print(f'{${rpss[$i]}/$base:.3f}')")
		ratios[$i]+="$ratio "
		line+=" ${names[$i]} ${rpss[$i]}/s ($ratio)"
	done
	echo "$line"
done
for i in "${!urls[@]}"; do
	[ "$i" = 0 ] && continue
	echo "${names[$i]}: median ratio to the ceiling $(python3 -c "import statistics,sys; print(f'{statistics.median(map(float, sys.argv[1:])):.3f}')" ${ratios[$i]})"
done
