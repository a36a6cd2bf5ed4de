#!/usr/bin/env bash
# soldout_ratio.sh measures the sold-out purchase path of built flashsale
# binaries against ../shared/bench/ceiling, each server in its own process,
# the same load generator (wrk) for all, in interleaved rounds, and prints
# each binary's throughput as a ratio to the ceiling's (per round, then the
# median). A sold-out purchase is the request a flash sale answers most.
#
#   go build -o /tmp/fs-new ./cmd/flashsale
#   go build -o /tmp/ceiling ../shared/bench/ceiling
#   scripts/soldout_ratio.sh /tmp/ceiling /tmp/fs-old /tmp/fs-new   # rounds=7 duration=3s conns=32
set -euo pipefail
ceiling=$1
shift
rounds=${ROUNDS:-7} duration=${DURATION:-3s} conns=${CONNS:-32}
secret=bench-jwt-secret admin=bench-admin-token
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT

wait_port() { for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.1; done; echo "port $1 not up" >&2; exit 1; }

"$ceiling" -addr 127.0.0.1:18080 2>/dev/null & pids+=($!)
wait_port 18080
targets=(ceiling) ports=(18080) paths=(/api/sales/x/purchase)
port=18081
for bin in "$@"; do
	dir=$work/$port
	FLASHSALE_ADDR=127.0.0.1:$port FLASHSALE_DATA_DIR=$dir FLASHSALE_ADMIN_TOKEN=$admin FLASHSALE_JWT_SECRET=$secret \
		FLASHSALE_LOG_LEVEL=error "$bin" serve >/dev/null 2>&1 & pids+=($!)
	wait_port $port
	start=$(date -u -d '-1 min' +%Y-%m-%dT%H:%M:%SZ) end=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
	id=$(curl -s -X POST -H "Authorization: Bearer $admin" "http://127.0.0.1:$port/api/admin/sales" -d '{"title":"Bench","hotel":"H","room_type":"R",
		"nights":[{"date":"2026-12-24","stock":0}],"price":100,"original_price":200,"currency":"CNY",
		"starts_at":"'"$start"'","ends_at":"'"$end"'","per_user_limit":1,"hold_seconds":60,"purchase_token":true}' |
		sed 's/.*"id":"\([^"]*\)".*/\1/')
	targets+=("$bin") ports+=($port) paths+=("/api/sales/$id/purchase")
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
for i in "${!targets[@]}"; do # every target must answer 409 sold_out
	code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $jwt" -d '{"token":"t"}' "http://127.0.0.1:${ports[$i]}${paths[$i]}")
	[ "$code" = 409 ] || { echo "${targets[$i]} answered $code, not 409" >&2; exit 1; }
done

declare -A ratios
for r in $(seq "$rounds"); do
	line="round $r:"
	for i in "${!targets[@]}"; do
		rps=$(wrk -t1 -c"$conns" -d"$duration" -s "$work/post.lua" "http://127.0.0.1:${ports[$i]}${paths[$i]}" | awk '/Requests\/sec/ {print $2}')
		if [ "$i" = 0 ]; then base=$rps; line+=" ceiling $rps/s"; continue; fi
		ratio=$(python3 -c "print(f'{$rps/$base:.3f}')")
		ratios[$i]+="$ratio "
		line+=" $(basename "${targets[$i]}") $rps/s ($ratio)"
	done
	echo "$line"
done
for i in "${!targets[@]}"; do
	[ "$i" = 0 ] && continue
	echo "$(basename "${targets[$i]}"): median ratio to the ceiling $(python3 -c "import statistics,sys; print(f'{statistics.median(map(float, sys.argv[1:])):.3f}')" ${ratios[$i]})"
done
