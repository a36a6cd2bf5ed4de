#!/usr/bin/env bash
# cpu_per_request.sh measures the CPU one sold-out purchase costs each
# server: its /proc/PID/stat user+system time over a wrk run divided by the
# requests it served, for ../shared/bench/ceiling and each flashsale binary,
# interleaved, three rounds. Less sensitive than throughput to the noise of a
# shared machine: a server slowed by a neighbour serves fewer requests, but
# each costs it the same.
#
#   go build -o /tmp/ceiling ../shared/bench/ceiling/main.go
#   go build -o /tmp/fs ./cmd/flashsale
#   scripts/cpu_per_request.sh /tmp/ceiling /tmp/fs [/tmp/fs-other ...]
set -euo pipefail
ceiling=$1
shift
rounds=${ROUNDS:-3} duration=${DURATION:-4s}
. "$(dirname "$0")/soldout_servers.sh"

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # clock ticks, user + system
tick=$(getconf CLK_TCK)
for r in $(seq "$rounds"); do
	for i in "${!pids[@]}"; do
		c0=$(cpu "${pids[$i]}")
		req=$(wrk -t2 -c32 -d"$duration" -s "$work/post.lua" "${urls[$i]}" | awk '/requests in/ {print $1}')
		c1=$(cpu "${pids[$i]}")
		echo "round $r: ${names[$i]}: $req requests, $(python3 -c "print(round(($c1-$c0)/$tick*1e6/$req, 2))") us of CPU each"
	done
done
