# soldout_servers.sh, sourced by the sold-out measurements: starts
# $ceiling and each flashsale binary of "$@" in a process of its own (each
# with a sale already sold out), checks every one answers 409, and leaves
#   names[i] urls[i] pids[i]   the ceiling at 0, then the binaries in order
#   $work/post.lua             the wrk script: a guest's sold-out purchase
# All of it is stopped and removed when the calling script exits.
secret=bench-jwt-secret-0123456789abcdefg admin=bench-admin-token-0123456789abcdef
work=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; rm -rf "$work"' EXIT

wait_port() { for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.1; done; echo "port $1 not up" >&2; exit 1; }

"$ceiling" -addr 127.0.0.1:18080 >/dev/null 2>&1 & pids+=($!)
wait_port 18080
names=(ceiling) urls=(http://127.0.0.1:18080/api/sales/x/purchase)
port=18081
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
for i in "${!urls[@]}"; do # every target must answer 409 sold_out
	code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $jwt" -d '{"token":"t"}' "${urls[$i]}")
	[ "$code" = 409 ] || { echo "${names[$i]} answered $code, not 409" >&2; exit 1; }
done
