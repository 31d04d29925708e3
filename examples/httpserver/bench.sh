#!/usr/bin/env bash
# bench.sh: an independent check of cpusched's default mode, outside the
# demo server and `cpusched bench`. It builds and starts examples/httpserver
# on loopback, measures its fast route (/hello) idle, then again while
# HASH_CONNS connections keep its CPU-heavy route (/hash, run through
# cpusched) busy, and prints the probe's p50/p99/p99.9 under load against
# idle and the /hash throughput. See docs/httpserver-check.md.
#
# usage: examples/httpserver/bench.sh [SECONDS [HASH_CONNS [HASH_ROUNDS]]]
#   SECONDS     length of each measured step (default 10)
#   HASH_CONNS  connections of the /hash load (default: the number of CPUs,
#               cpusched's worker count; the example sheds /hash beyond an
#               adaptive limit that starts there, and a load that spins on
#               instant 503s loads the client and the network path, not
#               the scheduler)
#   HASH_ROUNDS /hash?n= (default 100000: tens of ms of SHA-256 per request)
#
# The probe is wrk (one connection, a request every 5 ms, latency from
# each send; p99.9 from wrk's own histogram) when wrk is on PATH, else
# `cpusched load` (open loop at 200/s, latency from each due time). The
# /hash load uses the same tool. Set PROBE=load to use `cpusched load` even
# when wrk is installed. Take timing figures only under the machine's
# measurement lock when the machine is shared:
#   flock -x /tmp/cpusched-measure.lock examples/httpserver/bench.sh
set -euo pipefail

secs=${1:-10}
conns=${2:-$(nproc)}
rounds=${3:-100000}
case "$secs$conns$rounds" in
*[!0-9]*) echo "bench.sh: SECONDS, HASH_CONNS and HASH_ROUNDS must be positive integers" >&2; exit 2 ;;
esac
if [ "$secs" -lt 1 ] || [ "$conns" -lt 1 ] || [ "$conns" -gt 1000 ] || [ "$rounds" -lt 1 ] || [ "$rounds" -gt 10000000 ]; then
	echo "bench.sh: need SECONDS >= 1, HASH_CONNS in 1..1000, HASH_ROUNDS in 1..10000000" >&2
	exit 2
fi
probe=${PROBE:-}
if [ -z "$probe" ]; then
	if command -v wrk >/dev/null; then probe=wrk; else probe=load; fi
fi
case "$probe" in wrk | load) ;; *) echo "bench.sh: PROBE must be wrk or load, got \"$probe\"" >&2; exit 2 ;; esac

cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
server_pid=
load_pid=
cleanup() {
	[ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null && wait "$load_pid" 2>/dev/null || true
	[ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/httpserver" ./examples/httpserver
go build -o "$tmp/cpusched" ./cmd/cpusched

"$tmp/httpserver" -addr 127.0.0.1:0 >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!
base=
for _ in $(seq 100); do
	base=$(sed -n 's/^listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$tmp/server.out")
	[ -n "$base" ] && break
	sleep 0.1
done
if [ -z "$base" ]; then
	echo "bench.sh: the server did not print its address; its stderr:" >&2
	cat "$tmp/server.err" >&2
	exit 1
fi

# The wrk probe: one request every 5 ms on one connection; done() prints
# "PROBE p50 p99 p99.9 max requests errors" in ms.
cat >"$tmp/probe.lua" <<'EOF'
function delay() return 5 end
function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format("PROBE %.3f %.3f %.3f %.3f %d %d\n",
		latency:percentile(50) / 1000, latency:percentile(99) / 1000,
		latency:percentile(99.9) / 1000, latency.max / 1000,
		summary.requests, e.connect + e.read + e.write + e.status + e.timeout))
end
EOF

# probe prints "p50 p99 p99.9 max requests errors" (ms) for $secs seconds of /hello.
run_probe() {
	if [ "$probe" = wrk ]; then
		wrk -t1 -c1 -d"${secs}s" -s "$tmp/probe.lua" "$base/hello" | sed -n 's/^PROBE //p'
	else
		"$tmp/cpusched" load -rate 200 -c 8 -d "${secs}s" -json "$base/hello" |
			python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.3f %.3f %.3f %.3f %d %d" % (r["p50_ms"], r["p99_ms"], r["p999_ms"], r["max_ms"], r["completed"], r["failed"]+r["non_2xx"]))'
	fi
}

# start_hash runs the /hash load for $1 seconds in the background, its
# summary in $tmp/hash.out.
start_hash() {
	if [ "$probe" = wrk ]; then
		wrk -t1 -c"$conns" -d"${1}s" --timeout 10s "$base/hash?n=$rounds" >"$tmp/hash.out" &
	else
		"$tmp/cpusched" load -c "$conns" -d "${1}s" -timeout 10s -json "$base/hash?n=$rounds" >"$tmp/hash.out" &
	fi
	load_pid=$!
}

# hash_result prints "requests/s not-ok" of the /hash load (not-ok: 503s
# and other failures).
hash_result() {
	if [ "$probe" = wrk ]; then
		rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$tmp/hash.out")
		bad=$(sed -n 's/^ *Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' "$tmp/hash.out")
		echo "${rps:-?} ${bad:-0}"
	else
		python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.1f %d" % (r["rps"], r["non_2xx"] + r["failed"]))' "$tmp/hash.out"
	fi
}

echo "examples/httpserver at $base; probe: $probe; $(nproc) CPUs; $(uptime | sed 's/.*load average/load average/')"
run_probe >/dev/null 2>&1 || true # warm-up: connections, page faults
idle=$(run_probe)
start_hash $((secs + 2))
sleep 1 # let the load reach every worker slot
loaded=$(run_probe)
wait "$load_pid"
load_pid=
hash=$(hash_result)

python3 - "$idle" "$loaded" "$hash" "$conns" "$rounds" <<'EOF'
import sys
idle = [float(x) for x in sys.argv[1].split()]
loaded = [float(x) for x in sys.argv[2].split()]
(rps, bad), conns, rounds = sys.argv[3].split(), sys.argv[4], sys.argv[5]
print("%-24s %8s %8s %8s %8s %9s %7s" % ("/hello probe (ms)", "p50", "p99", "p99.9", "max", "requests", "errors"))
print("%-24s %8.3f %8.3f %8.3f %8.3f %9d %7d" % tuple(["idle"] + idle))
print("%-24s %8.3f %8.3f %8.3f %8.3f %9d %7d" % tuple(["under /hash load"] + loaded))
print("%-24s %8.2fx %7.2fx %7.2fx %7.2fx" % ("ratio", *(l / i if i > 0 else float("nan") for l, i in zip(loaded[:4], idle[:4]))))
print("/hash load: %s connections, n=%s, %s responses/s, %s of them not 200 (shed or failed)" % (conns, rounds, rps, bad))
EOF
