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
secret=bench-jwt-secret admin=bench-admin-token
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT

wait_port() { for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.1; done; echo "port $1 not up" >&2; exit 1; }

"$ceiling" -addr 127.0.0.1:18090 >/dev/null 2>&1 & pids+=($!)
wait_port 18090
names=(ceiling) urls=(http://127.0.0.1:18090/api/sales/x/purchase)
port=18200
for bin in "$@"; do
	FLASHSALE_ADDR=127.0.0.1:$port FLASHSALE_DATA_DIR=$work/$port FLASHSALE_ADMIN_TOKEN=$admin FLASHSALE_JWT_SECRET=$secret \
		FLASHSALE_LOG_LEVEL=error "$bin" serve >/dev/null 2>&1 & pids+=($!)
	wait_port $port
	start=$(date -u -d '-1 min' +%Y-%m-%dT%H:%M:%SZ) end=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
	id=$(curl -s -X POST -H "Authorization: Bearer $admin" "http://127.0.0.1:$port/api/admin/sales" -d '{"title":"Bench","hotel":"H","room_type":"R",
		"nights":[{"date":"2026-12-24","stock":0}],"price":100,"original_price":200,"currency":"CNY",
		"starts_at":"'"$start"'","ends_at":"'"$end"'","per_user_limit":1,"hold_seconds":60,"purchase_token":true}' |
		sed 's/.*"id":"\([^"]*\)".*/\1/')
	names+=("$(basename "$bin")") urls+=("http://127.0.0.1:$port/api/sales/$id/purchase")
	port=$((port + 1))
done

jwt=$(python3 - "$secret" <<'PY'
import base64, hashlib, hmac, json, sys, time
b = lambda d: base64.urlsafe_b64encode(d).rstrip(b"=").decode()
h = b(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
p = b(json.dumps({"sub": "bench-guest", "tier": "gold", "exp": int(time.time()) + 3600}).encode())
s = b(hmac.new(sys.argv[1].encode(), f"{h}.{p}".encode(), hashlib.sha256).digest())
print(f"{h}.{p}.{s}")
PY
)
cat >"$work/post.lua" <<LUA
wrk.method = "POST"
wrk.body = '{"token":"t"}'
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $jwt"
LUA

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
