#!/usr/bin/env bash
# Serving benchmark: emberd under 1, 4 and 8 concurrent streaming clients.
#
# Synthesizes the TinyLlama-1.1B-shaped Q4_0 model (random weights, ~620
# MB; deleted afterwards), then for each stream count starts a fresh emberd
# (slots 8, threads 2, context 4096) on a free loopback port, waits for
# /health 200, warms it with one short request, and runs build/loadgen
# REPEAT times: N clients started together, one request each, a ~100-token
# prompt (calibrated with /tokenize), 64 generated tokens, greedy. Reports
# the median run (by aggregate tok/s) and the daemon's peak RSS (VmHWM) for
# that stream count, then stops the daemon. Not part of `make test` (slow).
#
# Usage: bench/serve_bench.sh            (the table on stdout)
# Environment: STREAMS="1 4 8" REPEAT=3 THREADS=2 SLOTS=8 CONTEXT=4096
#   PROMPT=100 MAX_TOKENS=64 ENDPOINT=completions|chat MODEL=path (use a
#   model file instead of synthesizing one) JSONL=path (append each run's
#   loadgen JSON line, tagged with the stream count and the RSS).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
STREAMS=${STREAMS:-"1 4 8"}
REPEAT=${REPEAT:-3}
THREADS=${THREADS:-2}
SLOTS=${SLOTS:-8}
CONTEXT=${CONTEXT:-4096}
PROMPT=${PROMPT:-100}
MAX_TOKENS=${MAX_TOKENS:-64}
ENDPOINT=${ENDPOINT:-completions}
PY=/usr/bin/python3

for b in ember emberd loadgen; do
	[ -x "$build/$b" ] || { echo "serve_bench: $build/$b missing (make all)" >&2; exit 1; }
done
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

start_daemon() {
	port=$(free_port)
	"$build/emberd" --model="$model" --port="$port" --threads="$THREADS" \
		--slots="$SLOTS" --context="$CONTEXT" --log_level=warn \
		2>>"$work/emberd.log" &
	pid=$!
	for _ in $(seq 1 1200); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health")" = 200 ] && return 0
		kill -0 "$pid" 2>/dev/null || { cat "$work/emberd.log" >&2; exit 1; }
		sleep 0.1
	done
	echo "serve_bench: emberd not ready in 120 s" >&2
	exit 1
}

stop_daemon() {
	kill -TERM "$pid"
	wait "$pid" || echo "serve_bench: emberd exited $?" >&2
	pid=
}

echo "# $(date -u +%FT%TZ) $(uname -m), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "# emberd --threads=$THREADS --slots=$SLOTS --context=$CONTEXT; loadgen -p $PROMPT -m $MAX_TOKENS --endpoint $ENDPOINT; median of $REPEAT" >&2
rows=$work/rows
: >"$rows"
for n in $STREAMS; do
	start_daemon
	"$build/loadgen" --port "$port" -c 1 -n 1 -p 16 -m 4 --endpoint "$ENDPOINT" --json >/dev/null || true
	runs=$work/runs.$n
	: >"$runs"
	for r in $(seq 1 "$REPEAT"); do
		"$build/loadgen" --port "$port" -c "$n" -n 1 -p "$PROMPT" -m "$MAX_TOKENS" \
			--endpoint "$ENDPOINT" -t 600 --json >>"$runs" || true
		echo "  streams $n run $r: $(tail -n 1 "$runs" | $PY -c 'import json,sys; j=json.load(sys.stdin); print("%.2f tok/s, TTFT mean %.2f s, %d tokens, %d errors" % (j["aggregate_tps"], j["ttft_mean_s"], j["completion_tokens"], j["errors"]))')" >&2
	done
	hwm=$(vm VmHWM)
	stop_daemon
	$PY - "$runs" "$n" "$hwm" "${JSONL:-}" >>"$rows" <<'PYEOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
n, hwm, jsonl = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
runs.sort(key=lambda j: j["aggregate_tps"])
m = runs[len(runs) // 2]
if jsonl:
    with open(jsonl, "a") as f:
        for j in runs:
            j.update(streams=n, peak_rss_kb=hwm)
            f.write(json.dumps(j) + "\n")
print("| %d | %.1f | %.2f s | %.2f s | %.1f | %.2f GB | %d | %s |" % (
    n, m["aggregate_tps"], m["ttft_mean_s"], m["ttft_p99_s"],
    m["stream_tps_p50"], hwm * 1024 / 1e9, m["completion_tokens"],
    " ".join("%.1f" % j["aggregate_tps"] for j in runs)))
PYEOF
done
echo "| streams | aggregate tok/s | mean TTFT | p99 TTFT | per-stream tok/s | peak RSS | tokens | all runs tok/s |"
echo "|---|---|---|---|---|---|---|---|"
cat "$rows"
