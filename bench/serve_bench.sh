#!/usr/bin/env bash
# Serving benchmark: emberd beside llama-server, same model file, same
# minutes, at 1, 4, 8 and 32 concurrent streaming clients.
#
# Synthesizes the TinyLlama-1.1B-shaped Q4_0 model (random weights, ~620
# MB; deleted afterwards) unless MODEL names a file. For each stream count
# it runs emberd, then llama-server, one after the other (each alone on the
# machine): a fresh server (8 slots, 2 threads, 4096 positions per slot) on
# a free loopback port, /health 200, one short warm-up request, then
# build/loadgen REPEAT times: N clients started together, one request each,
# a ~100-token prompt (calibrated with /tokenize; each prompt starts with
# its own number, so no prefix cache skips a prefill), 64 generated tokens,
# greedy, streamed. 32 clients on 8 slots exercise the queue: every request
# must finish (lost = sent - ok) and first tokens should come in arrival
# order ("inv": the share of request pairs whose first tokens came against
# their start order; FIFO gives ~0). Peak RSS is the server's VmHWM.
#
# One table on stdout (median run by aggregate tok/s per row) and, per
# stream count, Ember / llama.cpp ratios. Not part of `make test` (slow).
#
# Usage: bench/serve_bench.sh
# Environment: STREAMS="1 4 8 32" REPEAT=1 THREADS=2 SLOTS=8 CONTEXT=4096
#   PROMPT=100 MAX_TOKENS=64 ENDPOINT=completions|chat MODEL=path
#   LLAMA_SERVER=path (default: /work/peers/llama.cpp/build/bin/llama-server,
#   /tmp/peers/llama.cpp/build/bin/llama-server, as ../shared/tools/
#   build-llamacpp.sh builds it; none found: Ember alone, said so)
#   SERVERS="ember llama" JSONL=path (append each run's loadgen JSON line).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
STREAMS=${STREAMS:-"1 4 8 32"}
REPEAT=${REPEAT:-1}
THREADS=${THREADS:-2}
SLOTS=${SLOTS:-8}
CONTEXT=${CONTEXT:-4096}
PROMPT=${PROMPT:-100}
MAX_TOKENS=${MAX_TOKENS:-64}
ENDPOINT=${ENDPOINT:-completions}
SERVERS=${SERVERS:-"ember llama"}
PY=/usr/bin/python3

for b in ember emberd loadgen; do
	[ -x "$build/$b" ] || { echo "serve_bench: $build/$b missing (make all)" >&2; exit 1; }
done
llama=${LLAMA_SERVER:-}
if [ -z "$llama" ]; then
	for c in /work/peers/llama.cpp/build/bin/llama-server /tmp/peers/llama.cpp/build/bin/llama-server; do
		[ -x "$c" ] && { llama=$c; break; }
	done
fi
if [ -z "$llama" ] || [ ! -x "$llama" ]; then
	echo "serve_bench: no llama-server (set LLAMA_SERVER or run ../shared/tools/build-llamacpp.sh): Ember alone" >&2
	SERVERS=ember
fi
work=$(mktemp -d "${TMP:-/tmp}/ember-serve-XXXXXX")
pid=
cleanup() {
	if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	rm -rf "$work"
}
trap cleanup EXIT

model=${MODEL:-}
if [ -z "$model" ]; then
	model=$work/tinyllama-q4_0.gguf
	echo "synthesizing $model" >&2
	"$build/ember" synth --preset tinyllama-1.1b --type q4_0 -o "$model" >&2
fi

free_port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
vm() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; } # kB

start_server() { # ember|llama
	port=$(free_port)
	case $1 in
	ember)
		"$build/emberd" --model="$model" --port="$port" --threads="$THREADS" \
			--slots="$SLOTS" --context="$CONTEXT" --queue=64 --log_level=warn \
			2>>"$work/server.log" & ;;
	llama)
		# -c is the total context, shared by the -np slots
		"$llama" -m "$model" --host 127.0.0.1 --port "$port" -t "$THREADS" \
			-np "$SLOTS" -c $((CONTEXT * SLOTS)) >>"$work/server.log" 2>&1 & ;;
	esac
	pid=$!
	for _ in $(seq 1 1200); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] && return 0
		kill -0 "$pid" 2>/dev/null || { tail -20 "$work/server.log" >&2; exit 1; }
		sleep 0.1
	done
	echo "serve_bench: $1 not ready in 120 s" >&2
	exit 1
}

stop_server() {
	kill -TERM "$pid"
	wait "$pid" || true
	pid=
}

echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "# servers: $SERVERS; --threads=$THREADS, $SLOTS slots, $CONTEXT positions per slot; loadgen -p $PROMPT -m $MAX_TOKENS --endpoint $ENDPOINT; median of $REPEAT" >&2
rows=$work/rows.jsonl
: >"$rows"
for n in $STREAMS; do
	for srv in $SERVERS; do
		start_server "$srv"
		"$build/loadgen" --port "$port" -c 1 -n 1 -p 16 -m 4 --endpoint "$ENDPOINT" --json >/dev/null || true
		runs=$work/runs.$srv.$n
		: >"$runs"
		for r in $(seq 1 "$REPEAT"); do
			"$build/loadgen" --port "$port" -c "$n" -n 1 -p "$PROMPT" -m "$MAX_TOKENS" \
				--endpoint "$ENDPOINT" -t 900 --json >>"$runs" || true
			echo "  $srv streams $n run $r: $(tail -n 1 "$runs" | $PY -c 'import json,sys; j=json.load(sys.stdin); print("%.2f tok/s, TTFT mean %.2f s, %d tokens, %d ok, %d errors" % (j["aggregate_tps"], j["ttft_mean_s"], j["completion_tokens"], j["ok"], j["errors"]))')" >&2
		done
		hwm=$(vm VmHWM)
		stop_server
		$PY - "$runs" "$n" "$hwm" "$srv" "${JSONL:-}" >>"$rows" <<'PYEOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
n, hwm, srv, jsonl = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
for j in runs:
    j.update(streams=n, peak_rss_kb=hwm, server=srv)
if jsonl:
    with open(jsonl, "a") as f:
        for j in runs:
            f.write(json.dumps(j) + "\n")
runs.sort(key=lambda j: j["aggregate_tps"])
m = runs[len(runs) // 2]
m["all_tps"] = [j["aggregate_tps"] for j in runs]
print(json.dumps(m))
PYEOF
	done
done
$PY - "$rows" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
name = {"ember": "emberd", "llama": "llama-server"}
print("| streams | server | aggregate tok/s | mean TTFT | max TTFT | per-stream tok/s | "
      "ok/sent | errors | lost | inv | peak RSS |")
print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in rows:
    sent = r["clients"] * r["requests_per_client"]
    print("| %d | %s | %.1f | %.2f s | %.2f s | %.1f | %d/%d | %d | %d | %.2f | %.2f GB |" % (
        r["streams"], name[r["server"]], r["aggregate_tps"], r["ttft_mean_s"],
        r["ttft_max_s"], r["stream_tps_p50"], r["ok"], sent, r["errors"], sent - r["ok"],
        r["order_inversions"], r["peak_rss_kb"] * 1024 / 1e9))
by = {(r["server"], r["streams"]): r for r in rows}
one = by.get(("ember", 1))
print()
print("| streams | Ember / llama.cpp tok/s | Ember / llama.cpp mean TTFT | "
      "Ember / llama.cpp peak RSS | Ember / its 1 stream tok/s |")
print("|---:|---:|---:|---:|---:|")
def ratio(a, b):
    return "%.2fx" % (a / b) if a is not None and b else "-"
for n in sorted({r["streams"] for r in rows}):
    e, l = by.get(("ember", n)), by.get(("llama", n))
    if e is None:
        continue
    print("| %d | %s | %s | %s | %s |" % (
        n, ratio(e["aggregate_tps"], l and l["aggregate_tps"]),
        ratio(e["ttft_mean_s"], l and l["ttft_mean_s"]),
        ratio(e["peak_rss_kb"], l and l["peak_rss_kb"]),
        ratio(e["aggregate_tps"], one and one["aggregate_tps"])))
PYEOF
