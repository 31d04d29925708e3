#!/usr/bin/env bash
# bench.sh: an independent check of cpusched's default mode, outside the
# demo server and `cpusched bench`. It builds and starts examples/httpserver
# on loopback, probes a fast route idle, then again while HASH_CONNS
# connections keep its CPU-heavy route (/hash, run through cpusched) busy,
# and prints the probe's p50/p99/p99.9/max and req/s, loaded against idle,
# and the /hash throughput. See docs/measurements/httpserver-check.md.
#
# usage: [FLOOR=1] [NEIGHBOR=1] [UNPRIV=1] [CPUSET=1] [GARBAGE=BYTES] [PROBE_CONNS=N] [PROBE=wrk|load] examples/httpserver/bench.sh [SECONDS [HASH_CONNS [HASH_ROUNDS]]]
#   SECONDS     length of each measured step (default 10)
#   HASH_CONNS  connections of the /hash load (default: the number of CPUs,
#               cpusched's worker count; the example sheds /hash beyond an
#               adaptive limit that starts there, and a load that spins on
#               instant 503s loads the client and the network path, not
#               the scheduler)
#   HASH_ROUNDS /hash?n= (default 100000: tens of ms of SHA-256 per request)
#   FLOOR=1     also measure the floor, between idle and cpusched: a second
#               instance of the server started under `chrt -i 0`, so that
#               all its threads are SCHED_IDLE, takes the same /hash load
#               while the probe measures the first. The same CPU work in a
#               separate SCHED_IDLE process is the best the kernel gives
#               the probed server; the cpusched step is reported as a ratio
#               to it. Skipped, with a message, where chrt -i 0 fails.
#   NEIGHBOR=1  a neighbour keeps the CPUs busy through every step: another
#               process at normal priority, `cpusched neighbor -c NCPU`
#               (one CPU-bound thread per CPU); the idle step is then the
#               neighbour alone
#   UNPRIV=1    run the servers and the neighbour as a container runs a
#               service: uid 65534, no capabilities (so no CAP_SYS_NICE)
#               and RLIMIT_NICE 0, through setpriv and prlimit; needs root
#   CPUSET=1    the servers on CPU 0, the clients and the neighbour on the
#               other CPUs (taskset): the server's CPUs are its own, and
#               a neighbour busy on the others must not disturb it; needs
#               2 CPUs or more
#   GARBAGE     bytes of response buffer each fast request builds, with
#               /hash allocating 8 KiB every 4096 rounds (the server's
#               -garbage; default 32768: a server that allocates; 0: none)
#   PROBE_CONNS N > 0: the probe is closed loop, N connections sending
#               /sleep?d=500us back to back (default 8 with FLOOR=1);
#               0: one connection paced at one /hello every 5 ms (the
#               default without FLOOR)
#   PROBE       wrk (the default when wrk is on PATH) or load (`cpusched
#               load`, the default otherwise). The /hash load uses the same
#               tool. The paced probe with load is open loop at 200/s with
#               latency from each due time.
#
# Take timing figures only under the machine's measurement lock when the
# machine is shared, e.g.:
#   FLOOR=1 flock -x /tmp/measure.lock examples/httpserver/bench.sh
set -euo pipefail

secs=${1:-10}
conns=${2:-$(nproc)}
rounds=${3:-100000}
floor=${FLOOR:-0}
case "$floor" in 0 | 1) ;; *) echo "bench.sh: FLOOR must be 0 or 1, got \"$floor\"" >&2; exit 2 ;; esac
neighbor=${NEIGHBOR:-0}
case "$neighbor" in 0 | 1) ;; *) echo "bench.sh: NEIGHBOR must be 0 or 1, got \"$neighbor\"" >&2; exit 2 ;; esac
unpriv=${UNPRIV:-0}
case "$unpriv" in 0 | 1) ;; *) echo "bench.sh: UNPRIV must be 0 or 1, got \"$unpriv\"" >&2; exit 2 ;; esac
cpuset=${CPUSET:-0}
case "$cpuset" in 0 | 1) ;; *) echo "bench.sh: CPUSET must be 0 or 1, got \"$cpuset\"" >&2; exit 2 ;; esac
# as: the prefix that runs the servers and the neighbour (UNPRIV); srv and
# cli: the CPUs of the servers and of the clients and the neighbour (CPUSET).
as=()
if [ "$unpriv" = 1 ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "bench.sh: UNPRIV=1 drops root's privileges for the servers (uid 65534, no capabilities, RLIMIT_NICE 0), so it needs root; run it as root, or without UNPRIV (the servers then run as you)" >&2
		exit 2
	fi
	for tool in setpriv prlimit; do
		command -v "$tool" >/dev/null || { echo "bench.sh: UNPRIV=1 needs $tool (util-linux), which is not on PATH" >&2; exit 2; }
	done
	as=(prlimit --nice=0:0 -- setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --)
fi
srv=()
cli=()
others=$(nproc)
if [ "$cpuset" = 1 ]; then
	if [ "$(nproc)" -lt 2 ]; then
		echo "bench.sh: CPUSET=1 puts the servers on CPU 0 and the rest on the others, so it needs 2 CPUs or more; this process may use $(nproc)" >&2
		exit 2
	fi
	command -v taskset >/dev/null || { echo "bench.sh: CPUSET=1 needs taskset (util-linux), which is not on PATH" >&2; exit 2; }
	others=$(($(nproc) - 1))
	srv=(taskset -c 0)
	cli=(taskset -c "1-$others")
fi
garbage=${GARBAGE:-32768}
case "$garbage" in *[!0-9]* | "") echo "bench.sh: GARBAGE must be a number of bytes in 0..4194304, got \"$garbage\"" >&2; exit 2 ;; esac
if [ "$floor" = 1 ]; then probe_conns=${PROBE_CONNS:-8}; else probe_conns=${PROBE_CONNS:-0}; fi
case "$secs$conns$rounds$probe_conns" in
*[!0-9]* | "") echo "bench.sh: SECONDS, HASH_CONNS, HASH_ROUNDS and PROBE_CONNS must be integers" >&2; exit 2 ;;
esac
if [ "$secs" -lt 1 ] || [ "$conns" -lt 1 ] || [ "$conns" -gt 1000 ] || [ "$rounds" -lt 1 ] || [ "$rounds" -gt 10000000 ] || [ "$probe_conns" -gt 1000 ]; then
	echo "bench.sh: need SECONDS >= 1, HASH_CONNS in 1..1000, HASH_ROUNDS in 1..10000000, PROBE_CONNS in 0..1000" >&2
	exit 2
fi
probe=${PROBE:-}
if [ -z "$probe" ]; then
	if command -v wrk >/dev/null; then probe=wrk; else probe=load; fi
fi
case "$probe" in wrk | load) ;; *) echo "bench.sh: PROBE must be wrk or load, got \"$probe\"" >&2; exit 2 ;; esac
if [ "$probe" = wrk ] && ! command -v wrk >/dev/null; then
	echo "bench.sh: PROBE=wrk, but wrk is not on PATH (apt-get install -y wrk, or PROBE=load)" >&2
	exit 2
fi
if [ "$probe" = load ] && [ -z "${PROBE:-}" ]; then
	echo "bench.sh: wrk is not on PATH (apt-get install -y wrk); using cpusched load" >&2
fi
if [ "$floor" = 1 ]; then
	why=
	if ! command -v chrt >/dev/null; then
		why="chrt is not on PATH (util-linux)"
	elif ! out=$(chrt -i 0 true 2>&1); then
		why="chrt -i 0 failed: ${out:-no message}"
	fi
	if [ -n "$why" ]; then
		echo "bench.sh: FLOOR=1 needs SCHED_IDLE, but $why; skipping the floor step" >&2
		floor=0
	fi
fi

cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
chmod 755 "$tmp" # UNPRIV's uid 65534 runs the binaries built here
pids=()
cleanup() {
	local pid
	exec 3>&- # the neighbour's stdin, if it runs: it ends with it
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

go build -o "$tmp/httpserver" ./examples/httpserver
go build -o "$tmp/cpusched" ./cmd/cpusched

# start_server NAME [PREFIX...] starts the server (under PREFIX, e.g. chrt
# -i 0) and sets server_pid and server_base.
start_server() {
	local name=$1
	shift
	"$@" "$tmp/httpserver" -addr 127.0.0.1:0 -garbage "$garbage" >"$tmp/$name.out" 2>"$tmp/$name.err" &
	server_pid=$!
	pids+=("$server_pid")
	server_base=
	for _ in $(seq 100); do
		server_base=$(sed -n 's/^listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$tmp/$name.out")
		[ -n "$server_base" ] && return
		sleep 0.1
	done
	echo "bench.sh: the $name server did not print its address; its stderr:" >&2
	cat "$tmp/$name.err" >&2
	exit 1
}

start_server probed "${srv[@]}" "${as[@]}"
base=$server_base
floor_base=
if [ "$floor" = 1 ]; then
	start_server floor "${srv[@]}" "${as[@]}" chrt -i 0
	floor_pid=$server_pid
	floor_base=$server_base
fi

# not_idle PID prints the threads of PID whose policy is not SCHED_IDLE (5,
# the 41st field of /proc/PID/task/TID/stat).
not_idle() {
	local t
	for t in /proc/"$1"/task/*; do
		[ -e "$t/stat" ] || continue # a thread that just exited
		[ "$(sed 's/.*) //' "$t/stat" | cut -d' ' -f39)" = 5 ] || echo -n " ${t##*/}"
	done
}

# The wrk probe's done() prints "PROBE p50 p99 p99.9 max requests errors
# req/s" (ms); paced, it also waits 5 ms between requests.
{
	[ "$probe_conns" -gt 0 ] || echo 'function delay() return 5 end'
	cat <<'EOF'
function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format("PROBE %.3f %.3f %.3f %.3f %d %d %.1f\n",
		latency:percentile(50) / 1000, latency:percentile(99) / 1000,
		latency:percentile(99.9) / 1000, latency.max / 1000,
		summary.requests, e.connect + e.read + e.write + e.status + e.timeout,
		summary.requests / (summary.duration / 1e6)))
end
EOF
} >"$tmp/probe.lua"

if [ "$probe_conns" -gt 0 ]; then
	probe_desc="closed loop, $probe_conns connections on /sleep?d=500us"
	probe_path="/sleep?d=500us"
else
	probe_desc="paced, /hello every 5 ms"
	probe_path="/hello"
fi

# run_probe SECONDS prints "p50 p99 p99.9 max requests errors req/s" (ms)
# of the probe on the probed server.
run_probe() {
	if [ "$probe" = wrk ]; then
		"${cli[@]}" wrk -t1 -c"$((probe_conns > 0 ? probe_conns : 1))" -d"${1}s" -s "$tmp/probe.lua" "$base$probe_path" | sed -n 's/^PROBE //p'
	else
		local shape=(-rate 200 -c 8)
		[ "$probe_conns" -gt 0 ] && shape=(-c "$probe_conns")
		"${cli[@]}" "$tmp/cpusched" load "${shape[@]}" -d "${1}s" -json "$base$probe_path" |
			python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.3f %.3f %.3f %.3f %d %d %.1f" % (r["p50_ms"], r["p99_ms"], r["p999_ms"], r["max_ms"], r["completed"], r["failed"]+r["non_2xx"], r["rps"]))'
	fi
}

# start_hash URL runs the /hash load on URL for $secs + 2 seconds in the
# background, its summary in $tmp/hash.out and its pid in hash_pid.
start_hash() {
	if [ "$probe" = wrk ]; then
		"${cli[@]}" wrk -t1 -c"$conns" -d"$((secs + 2))s" --timeout 10s "$1/hash?n=$rounds" >"$tmp/hash.out" &
	else
		"${cli[@]}" "$tmp/cpusched" load -c "$conns" -d "$((secs + 2))s" -timeout 10s -json "$1/hash?n=$rounds" >"$tmp/hash.out" &
	fi
	hash_pid=$!
	pids+=("$hash_pid")
}

# hash_result prints "requests/s not-ok" of the /hash load that ran (not-ok:
# 503s and other failures).
hash_result() {
	if [ "$probe" = wrk ]; then
		rps=$(sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$tmp/hash.out")
		bad=$(sed -n 's/^ *Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' "$tmp/hash.out")
		echo "${rps:-nan} ${bad:-0}"
	else
		python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("%.1f %d" % (r["rps"], r["non_2xx"] + r["failed"]))' "$tmp/hash.out"
	fi
}

# loaded_step URL sets step to the probe's figures and then the /hash
# load's, the load on URL starting a second before the probe.
loaded_step() {
	local figures
	start_hash "$1"
	sleep 1 # let the load reach every worker slot
	figures=$(run_probe "$secs")
	wait "$hash_pid"
	step="$figures $(hash_result)"
}

idle=idle
nbdesc=
if [ "$neighbor" = 1 ]; then
	nbdesc="a neighbour of $others busy thread(s); "
	# The neighbour runs until the script ends: cleanup kills it, and it
	# exits when its stdin, a FIFO only this shell holds open, closes.
	mkfifo "$tmp/neighbor.in"
	"${cli[@]}" "${as[@]}" "$tmp/cpusched" neighbor -c "$others" <"$tmp/neighbor.in" >/dev/null &
	pids+=("$!")
	exec 3>"$tmp/neighbor.in"
	echo run >&3
	idle=neighbor
fi
shape=
[ "$unpriv" = 1 ] && shape="servers as uid 65534 without capabilities, RLIMIT_NICE 0; "
if [ "$cpuset" = 1 ]; then
	clients=clients
	[ "$neighbor" = 1 ] && clients="clients and the neighbour"
	shape="${shape}servers on CPU 0, $clients on 1-$others; "
fi
echo "examples/httpserver at $base${floor_base:+, floor server (SCHED_IDLE) at $floor_base}; probe: $probe, $probe_desc; garbage $garbage bytes per fast request; $nbdesc$shape$(nproc) CPUs; $(uptime | sed 's/.*load average/load average/')"
run_probe 2 >/dev/null 2>&1 || true # warm-up: connections, page faults
steps=("$idle $(run_probe "$secs") nan 0")
if [ "$floor" = 1 ]; then
	loaded_step "$floor_base"
	steps+=("floor $step")
	if stray=$(not_idle "$floor_pid") && [ -n "$stray" ]; then
		echo "bench.sh: the floor server's threads$stray are not SCHED_IDLE: its figures are not the floor" >&2
		steps[-1]="floor-not-idle ${steps[-1]#floor }"
	fi
fi
loaded_step "$base"
steps+=("cpusched $step")

python3 - "$conns" "$rounds" "${steps[@]}" <<'EOF'
import math, sys
conns, rounds = sys.argv[1:3]
rows = {}
print("%-15s %8s %8s %8s %8s %9s %7s %9s %8s" % ("probe (ms)", "p50", "p99", "p99.9", "max", "req/s", "errors", "/hash/s", "not 200"))
for line in sys.argv[3:]:
    name, *f = line.split()
    p50, p99, p999, mx, n, err, rps, hrps, bad = map(float, f)
    rows[name] = dict(p50=p50, p99=p99, p999=p999, max=mx, rps=rps, hrps=hrps)
    print("%-15s %8.3f %8.3f %8.3f %8.3f %9.1f %7d %9s %8s" % (name, p50, p99, p999, mx, rps, err,
          "-" if math.isnan(hrps) else "%.1f" % hrps, "-" if math.isnan(hrps) else "%d" % bad))

def ratio(a, b):
    return a / b if b > 0 else float("nan")

i, c = rows.get("idle") or rows["neighbor"], rows["cpusched"]
print("cpusched / %s: p50 %%.2fx, p99 %%.2fx, p99.9 %%.2fx, max %%.2fx, req/s %%.1f%%%%" % ("idle" if "idle" in rows else "the neighbour alone") % (
    ratio(c["p50"], i["p50"]), ratio(c["p99"], i["p99"]), ratio(c["p999"], i["p999"]),
    ratio(c["max"], i["max"]), 100 * ratio(c["rps"], i["rps"])))
if "floor" in rows:
    f = rows["floor"]
    p99x, rpsp, hashp = ratio(c["p99"], f["p99"]), 100 * ratio(c["rps"], f["rps"]), 100 * ratio(c["hrps"], f["hrps"])
    # Beside a neighbour the floor's SCHED_IDLE server may do no /hash at
    # all: a percentage of nothing says nothing, so give both rates.
    if f["hrps"] >= 1:
        hashs = "/hash %.1f%% of the floor's" % hashp
    else:
        hashs = "/hash %.1f a second, the floor's %.1f (its SCHED_IDLE server starved)" % (c["hrps"], f["hrps"])
    print("cpusched / floor: p99 %.2fx the floor's (target <= 1.25x: %s), req/s %.1f%% of the floor's (target >= 95%%: %s), %s" % (
        p99x, "met" if p99x <= 1.25 else "missed", rpsp, "met" if rpsp >= 95 else "missed", hashs))
print("/hash load: %s connections, n=%s" % (conns, rounds))
EOF
