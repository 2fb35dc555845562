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
#   SERVERS="ember llama" JSONL=path (append each run's loadgen JSON line)
#   FWD=0 (skip the bare-forward comparison below).
#
# After each Ember stream count, with the server stopped, build/forward_step
# times the bare forward pass of min(N, SLOTS) sequences at the run's mean
# decode context (PROMPT + MAX_TOKENS / 2) in the same minutes, printed
# beside the run's decode steps of that batch: what serving adds to a step
# (sampling, streaming, other threads) over the pass itself. Figures from
# different minutes do not compare on this host (see the account below).
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

# The scheduler's per-phase account of the last run (the /metrics
# deltas around it): where the wall time went, beside the ideal
# n*p + MAX_TOKENS*d_n (p: one prompt's prefill, from the 1-stream run's
# account; d_n: a decode step of n sequences, from this run's). Appended
# to the run's JSON line as "account".
account() { # streams runs-file server-pid
	$PY - "$work/m0" "$work/m1" "$1" "$2" "$work/p1" "$MAX_TOKENS" "$work/t0" "$work/t1" "$3" <<'PYEOF'
import json, os, re, sys
def cpu(path):
    """{tid: CPU seconds} from /proc/PID/task/*/stat lines."""
    out, hz = {}, os.sysconf("SC_CLK_TCK")
    try:
        for line in open(path):
            f = line[line.rindex(")") + 2:].split()
            out[int(line.split()[0])] = (int(f[11]) + int(f[12])) / hz
    except (OSError, ValueError):
        pass
    return out
def scrape(path):
    m = {}
    for line in open(path):
        r = re.match(r'^(\w+)(\{[^}]*\})? (\S+)$', line.strip())
        if r:
            m[r.group(1) + (r.group(2) or "")] = float(r.group(3))
    return m
a, b = scrape(sys.argv[1]), scrape(sys.argv[2])
n, runs, p1, gen = int(sys.argv[3]), sys.argv[4], sys.argv[5], int(sys.argv[6])
d = {k: b[k] - a.get(k, 0) for k in b}
st = lambda ph: d.get('ember_engine_step_seconds_total{phase="%s"}' % ph, 0)
lines = open(runs).read().splitlines()
j = json.loads(lines[-1])
busy = sum(st(ph) for ph in ("prefill", "mixed", "decode", "emit", "between"))
ks = {k: (d.get('ember_engine_decode_steps_total{batch="%d"}' % k, 0),
          d.get('ember_engine_decode_step_seconds_total{batch="%d"}' % k, 0)) for k in range(1, 17)}
kc = {k: d.get('ember_engine_decode_step_cpu_seconds_total{batch="%d"}' % k, 0) for k in range(1, 17)}
acc = {"wall_s": j["wall_s"], "steps": d.get("ember_engine_steps_total", 0),
       "prefill_steps": d.get("ember_engine_prefill_steps_total", 0),
       "prompt_tokens": d.get("ember_engine_prefill_tokens_total", 0),
       "decode_tokens": d.get("ember_engine_decode_tokens_total", 0),
       "partial_steps": d.get("ember_engine_partial_steps_total", 0),
       "left_out": d.get("ember_engine_left_out_total", 0),
       "busy_s": busy, "outside_s": j["wall_s"] - busy}
for ph in ("prefill", "mixed", "decode", "emit", "between"):
    acc[ph + "_s"] = st(ph)
for ph in ("prefill", "mixed", "decode"):
    acc[ph + "_cpu_s"] = d.get('ember_engine_step_cpu_seconds_total{phase="%s"}' % ph, 0)
acc["decode_by_batch"] = {k: [int(c), s, kc[k]] for k, (c, s) in ks.items() if c}
# CPU seconds per server thread during the run: the loop thread (the
# process's first) against the workers and compute threads, whose time
# the loop's (HTTP, SSE) takes on a machine with as many cores as threads.
c0, c1, spid = cpu(sys.argv[7]), cpu(sys.argv[8]), int(sys.argv[9])
dc = {t: c1[t] - c0.get(t, 0) for t in c1}
acc["cpu_loop_s"] = dc.get(spid, 0)
acc["cpu_other_s"] = sorted((v for t, v in dc.items() if t != spid and v > 0.005), reverse=True)
if n == 1 and acc["prompt_tokens"] > 0:
    # p: the prompt's prefill (in prefill-only passes), d1: a 1-sequence step
    c1, s1 = ks[1]
    open(p1, "w").write(json.dumps({"p": acc["prefill_s"] + acc["mixed_s"],
                                    "d1": s1 / c1 if c1 else 0,
                                    "p_cpu": acc["prefill_cpu_s"] + acc["mixed_cpu_s"]}))
try:
    ref = json.load(open(p1))
except (OSError, ValueError):
    ref = None
cn, sn = ks[min(n, 16)]
if ref and cn:
    dn = sn / cn
    acc["ideal_s"] = n * ref["p"] + gen * dn
    t1 = ref["p"] + gen * ref["d1"]
    acc["bound_x"] = n * t1 / acc["ideal_s"]
    # The same in CPU time, steadier on a shared machine: the passes'
    # CPU against n prompts' and G steps' of n sequences.
    acc["ideal_cpu_s"] = n * ref.get("p_cpu", 0) + gen * kc[min(n, 16)] / cn
    acc["cpu_s"] = acc["prefill_cpu_s"] + acc["mixed_cpu_s"] + acc["decode_cpu_s"]
print("    account: wall %.2f s = engine %.2f s (prefill %.2f, mixed %.2f, decode %.2f, emit %.3f,"
      " between %.3f; CPU in passes: prefill %.2f, mixed %.2f, decode %.2f) + outside the steps %.2f s; %d steps (%d with prompt tokens, %d partial,"
      " %d sequence-steps left out); server CPU: loop thread %.2f s, others %s;"
      " decode-only steps by batch: %s%s" % (
      acc["wall_s"], busy, acc["prefill_s"], acc["mixed_s"], acc["decode_s"], acc["emit_s"],
      acc["between_s"], acc["prefill_cpu_s"], acc["mixed_cpu_s"], acc["decode_cpu_s"],
      acc["outside_s"], acc["steps"], acc["prefill_steps"],
      acc["partial_steps"], acc["left_out"], acc["cpu_loop_s"],
      "/".join("%.2f" % v for v in acc["cpu_other_s"]) or "-",
      " ".join("%d:%dx%.1fms(cpu %.1f)" % (k, c, 1000 * s / c, 1000 * kc[k] / c)
               for k, (c, s) in ks.items() if c),
      "; ideal %d*p + %d*d%d = %.2f s (p %.3f s, d%d %.1f ms): ideal ratio to 1 stream %.2fx;"
      " in CPU time the passes took %.2f s, the ideal %.2f s" % (
          n, gen, n, acc["ideal_s"], ref["p"], n, 1000 * dn, acc["bound_x"], acc["cpu_s"],
          acc["ideal_cpu_s"]) if "ideal_s" in acc else ""),
      file=sys.stderr)
j["account"] = acc
lines[-1] = json.dumps(j)
open(runs, "w").write("\n".join(lines) + "\n")
PYEOF
}

# The bare forward pass of k sequences at the run's mean decode context
# beside the run's k-sequence decode steps (from the account).
bare_forward() { # streams runs-file
	[ "${FWD:-1}" != 0 ] && [ -x "$build/forward_step" ] || return 0
	local k=$(( $1 < SLOTS ? $1 : SLOTS )) ctx=$(( PROMPT + MAX_TOKENS / 2 - 8 ))
	[ "$k" -le 16 ] && [ "$ctx" -ge 1 ] || return 0
	"$build/forward_step" "$model" "$THREADS" "$ctx" 16 "$k" >"$work/fwd" 2>&1 || return 0
	$PY - "$work/fwd" "$2" "$k" "$ctx" <<'PYEOF'
import json, sys
k, ctx = int(sys.argv[3]), int(sys.argv[4])
row = None
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 10 and f[0] == str(k):
        row = f  # seqs best median tok/s GB/s cpu x1 best-cpu ...
try:
    acc = json.loads(open(sys.argv[2]).read().splitlines()[-1]).get("account", {})
    c, s, cpu = acc["decode_by_batch"][str(k)]
except (OSError, ValueError, KeyError, IndexError):
    c = 0
if row:
    run = " vs this run's %d-sequence decode steps %.1f ms (cpu %.1f)" % (
        k, 1000 * s / c, 1000 * cpu / c) if c else ""
    print("    bare forward (build/forward_step, %d sequences, contexts %d-%d, same minutes):"
          " median %s ms (cpu %s), best %s ms (cpu %s)%s" % (
          k, ctx, ctx + 16, row[2], row[5], row[1], row[7], run), file=sys.stderr)
PYEOF
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
			if [ "$srv" = ember ]; then
				curl -s "http://127.0.0.1:$port/metrics" >"$work/m0"
				cat /proc/"$pid"/task/*/stat >"$work/t0" 2>/dev/null || true
			fi
			"$build/loadgen" --port "$port" -c "$n" -n 1 -p "$PROMPT" -m "$MAX_TOKENS" \
				--endpoint "$ENDPOINT" -t 900 --json >"$work/one" || true
			# A run that printed no JSON line (loadgen failed or was
			# killed) is left out of the table rather than ending the
			# benchmark with the other rows' results.
			if ! $PY -c 'import json,sys; json.loads(open(sys.argv[1]).read())' "$work/one" 2>/dev/null; then
				echo "  $srv streams $n run $r: no result (loadgen printed no JSON line)" >&2
				continue
			fi
			cat "$work/one" >>"$runs"
			if [ "$srv" = ember ]; then
				cat /proc/"$pid"/task/*/stat >"$work/t1" 2>/dev/null || true
				curl -s "http://127.0.0.1:$port/metrics" >"$work/m1"
				account "$n" "$runs" "$pid"
			fi
			echo "  $srv streams $n run $r: $(tail -n 1 "$runs" | $PY -c 'import json,sys; j=json.load(sys.stdin); print("%.2f tok/s, TTFT mean %.2f s, %d tokens, %d ok, %d errors" % (j["aggregate_tps"], j["ttft_mean_s"], j["completion_tokens"], j["ok"], j["errors"]))')" >&2
		done
		hwm=$(vm VmHWM)
		stop_server
		[ "$srv" = ember ] && bare_forward "$n" "$runs"
		$PY - "$runs" "$n" "$hwm" "$srv" "${JSONL:-}" >>"$rows" <<'PYEOF'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
n, hwm, srv, jsonl = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
if not runs:
    sys.exit(0)
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
