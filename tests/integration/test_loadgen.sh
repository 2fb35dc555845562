#!/usr/bin/env bash
# build/loadgen (bench/) against a real emberd on the tiny synthesized
# model: 4 clients x 2 streaming requests on both OpenAI endpoints end
# with zero errors and completion tokens > 0 that agree with usage; an
# API key is sent when given. Against fake_sse_server.py it classifies
# each failure (bad status, malformed SSE or JSON, missing [DONE], error
# object, usage missing or too low, timeout), and it refuses any host
# that is not loopback. Every wait is bounded.
set -eu
: "${BUILD:?}" "${ROOT:?}" "${TMPDIR:?}"
. "$ROOT/tests/integration/emberd_lib.sh"
LG=$BUILD/loadgen
PY=/usr/bin/python3
fails=0
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

ok() { echo "ok - $*"; }
bad() { echo "FAIL - $*"; fails=$((fails + 1)); }

# json FILE EXPR: evaluates a Python expression over the loadgen JSON line j.
json() { $PY -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
expect() { # expect FILE EXPR WHAT
	if [ "$(json "$1" "$2")" = True ]; then ok "$3"; else bad "$3: $(cat "$1")"; fi
}

# ---- refusals: never anything but loopback ----
for h in 192.0.2.1 10.0.0.1 0.0.0.0 example.com ::ffff:127.0.0.1 2001:db8::1; do
	set +e; "$LG" --host "$h" --port 9 -c 1 -n 1 >/dev/null 2>"$TMPDIR/err"; rc=$?; set -e
	if [ $rc = 2 ] && grep -q 'loopback only' "$TMPDIR/err"; then
		ok "refuses host $h (exit 2)"
	else bad "host $h: exit $rc: $(cat "$TMPDIR/err")"; fi
done
set +e; "$LG" --clients 0 >/dev/null 2>&1; rc=$?; set -e
[ $rc = 2 ] && ok "rejects 0 clients (exit 2)" || bad "0 clients: exit $rc"

# ---- the real daemon ----
"$BUILD/ember" synth --preset tiny --type q8_0 -o "$TMPDIR/m.gguf" >/dev/null
port=$(free_port)
"$BUILD/emberd" --model="$TMPDIR/m.gguf" --port="$port" --threads=1 --slots=4 \
	--api_key=sekrit 2>"$TMPDIR/emberd.log" &
pid=$!
pids+=($pid)
wait_health "$port" $pid "$TMPDIR/emberd.log"

for ep in chat completions; do
	out=$TMPDIR/$ep.json
	set +e
	"$LG" --port "$port" -c 4 -n 2 -m 12 -p 40 --endpoint $ep --api-key sekrit \
		-t 120 --json >"$out"
	rc=$?
	set -e
	[ $rc = 0 ] && ok "$ep: exit 0" || bad "$ep: exit $rc"
	expect "$out" "j['started'] == 8 and j['ok'] == 8 and j['errors'] == 0" \
		"$ep: 4 clients x 2 requests, all ok"
	expect "$out" "0 < j['completion_tokens'] <= 8 * 12" "$ep: completion tokens in (0, 96]"
	expect "$out" "0 < j['content_chunks'] <= j['completion_tokens']" \
		"$ep: content chunks consistent with usage"
	expect "$out" "j['errors_by_kind']['usage_mismatch'] == 0" "$ep: no usage mismatch"
	expect "$out" "j['aggregate_tps'] > 0 and 0 < j['ttft_p50_s'] <= j['ttft_p99_s']" \
		"$ep: rates and TTFT reported"
	expect "$out" "j['prompt_tokens_calibrated'] > 0 and j['prompt_tokens_mean'] > 0" \
		"$ep: prompt calibrated with /tokenize"
done
# the calibrated prompt is what the model sees (completions adds no template)
expect "$TMPDIR/completions.json" \
	"abs(j['prompt_tokens_mean'] - j['prompt_tokens_calibrated']) <= 4" \
	"completions: usage.prompt_tokens ~ calibrated length (prompts differ only in their number)"

set +e; "$LG" --port "$port" -c 2 -n 1 -m 4 --json >"$TMPDIR/nokey.json"; rc=$?; set -e
[ $rc = 1 ] && ok "without the API key: exit 1" || bad "without the API key: exit $rc"
expect "$TMPDIR/nokey.json" "j['errors_by_kind']['http_status'] == 2 and j['http_errors']['4xx'] == 2" \
	"without the API key: 2 http_status errors (4xx)"

kill -TERM $pid
wait $pid || bad "emberd exit status $?"

# ---- a scripted server: each failure has its kind ----
fake() { # fake MODE KIND [loadgen args]: 2 requests, both fail as KIND
	local mode=$1 kind=$2
	shift 2
	rm -f "$TMPDIR/fport"
	$PY "$ROOT/tests/integration/fake_sse_server.py" "$mode" "$TMPDIR/fport" &
	local fp=$!
	pids+=($fp)
	for _ in $(seq 1 100); do [ -s "$TMPDIR/fport" ] && break; sleep 0.05; done
	local want=1 rc
	[ "$kind" = ok ] && want=0
	set +e
	"$LG" --port "$(cat "$TMPDIR/fport")" -c 2 -n 1 -m 4 --json "$@" >"$TMPDIR/f.json"
	rc=$?
	set -e
	[ $rc = $want ] && ok "fake $mode: exit $rc" || bad "fake $mode: exit $rc, want $want"
	kill $fp 2>/dev/null || true
	wait $fp 2>/dev/null || true
	if [ "$kind" = ok ]; then
		expect "$TMPDIR/f.json" "j['ok'] == 2 and j['completion_tokens'] == 8 and j['content_chunks'] == 6" \
			"fake $mode: ok, 4 tokens by usage from 3 chunks each"
	else
		expect "$TMPDIR/f.json" "j['ok'] == 0 and j['errors_by_kind']['$kind'] == 2" \
			"fake $mode: counted as $kind"
	fi
}
fake ok ok
fake bad_json malformed_sse
fake bad_line malformed_sse
fake no_done malformed_sse
fake status500 http_status
fake stream_error stream_error
fake no_usage usage_mismatch
fake usage_low usage_mismatch
fake stall timeout -t 1

[ $fails = 0 ] || { echo "$fails failed"; exit 1; }
echo "all ok"
