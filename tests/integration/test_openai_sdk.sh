#!/usr/bin/env bash
# emberd against the official OpenAI JavaScript SDK, the Vercel AI SDK
# (`ai` + `@ai-sdk/openai-compatible`) and LangChain JS (`@langchain/openai`)
# (tests/clients): npm installs them from the registry (versions pinned in
# package.json; npm's cache keeps later installs offline-fast), then
# openai_sdk.mjs, vercel_ai.mjs and langchain.mjs drive a real emberd on a
# synthesized model. No node/npm, or a failed install, is a
# FAILURE, not a skip: the SDK is the compatibility claim.
set -eu
: "${BUILD:?}" "${ROOT:?}" "${TMPDIR:?}"
. "$ROOT/tests/integration/emberd_lib.sh"
command -v node >/dev/null || { echo "FAIL: node not on PATH (make deps installs it)"; exit 1; }
command -v npm >/dev/null || { echo "FAIL: npm not on PATH (make deps installs it)"; exit 1; }
echo "node $(node --version), npm $(npm --version 2>/dev/null)"

clients=$TMPDIR/clients
mkdir -p "$clients"
cp "$ROOT/tests/clients/package.json" "$ROOT/tests/clients/openai_sdk.mjs" \
	"$ROOT/tests/clients/vercel_ai.mjs" "$ROOT/tests/clients/langchain.mjs" "$clients/"
(cd "$clients" && timeout 240 npm install --no-audit --no-fund --loglevel=error) ||
	{ echo "FAIL: npm install of the client libraries failed"; exit 1; }

"$BUILD/ember" synth --preset tiny --type q8_0 -o "$TMPDIR/m.gguf" >/dev/null
port=$(free_port)
"$BUILD/emberd" --model="$TMPDIR/m.gguf" --port="$port" --threads=1 2>"$TMPDIR/emberd.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
wait_health "$port" $pid "$TMPDIR/emberd.log"

for script in openai_sdk vercel_ai langchain; do
	(cd "$clients" && timeout 120 node $script.mjs "http://127.0.0.1:$port/v1")
done

kill -TERM $pid
wait $pid
trap - EXIT
echo "emberd exited 0"

# Tool calls need a template that shows tools: Qwen2.5's, on a larger context.
cp "$ROOT/tests/clients/openai_sdk_tools.mjs" "$clients/"
"$BUILD/ember" synth --preset tiny --ctx 2048 --type q8_0 -o "$TMPDIR/t.gguf" >/dev/null
"$BUILD/emberd" --model="$TMPDIR/t.gguf" --port="$port" --threads=1 \
	--chat-template-file="$ROOT/../shared/chat-templates/Qwen-Qwen2.5-7B-Instruct.jinja" 2>"$TMPDIR/emberd2.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
wait_health "$port" $pid "$TMPDIR/emberd2.log"
(cd "$clients" && timeout 120 node openai_sdk_tools.mjs "http://127.0.0.1:$port/v1")
kill -TERM $pid
wait $pid
trap - EXIT
