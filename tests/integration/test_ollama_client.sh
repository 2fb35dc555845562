#!/usr/bin/env bash
# emberd against the official `ollama` JavaScript client (tests/clients,
# pinned in package.json): npm installs it from the registry, then
# ollama_client.mjs drives a real emberd on the golden llama model (a real
# tokenizer and chat template). No node/npm, or a failed install, is a
# FAILURE, not a skip: the client is the compatibility claim. The OpenAI
# SDK's embeddings.create runs here too (openai_embeddings.mjs).
set -eu
: "${BUILD:?}" "${ROOT:?}" "${TMPDIR:?}" "${SHARED:?}"
. "$ROOT/tests/integration/emberd_lib.sh"
command -v node >/dev/null || { echo "FAIL: node not on PATH (make deps installs it)"; exit 1; }
command -v npm >/dev/null || { echo "FAIL: npm not on PATH (make deps installs it)"; exit 1; }

clients=$TMPDIR/clients
mkdir -p "$clients"
cp "$ROOT/tests/clients/package.json" "$ROOT/tests/clients/ollama_client.mjs" \
	"$ROOT/tests/clients/openai_embeddings.mjs" "$clients/"
(cd "$clients" && timeout 240 npm install --no-audit --no-fund --loglevel=error) ||
	{ echo "FAIL: npm install failed"; exit 1; }

cp "$SHARED/golden/llama/model-f32.gguf" "$TMPDIR/golden-llama.gguf"
port=$(free_port)
"$BUILD/emberd" --model="$TMPDIR/golden-llama.gguf" --port="$port" --threads=1 2>"$TMPDIR/emberd.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
wait_health "$port" $pid "$TMPDIR/emberd.log"

(cd "$clients" && timeout 120 node ollama_client.mjs "http://127.0.0.1:$port" golden-llama)
# The same daemon's /v1/embeddings through the OpenAI SDK.
(cd "$clients" && timeout 60 node openai_embeddings.mjs "http://127.0.0.1:$port/v1" golden-llama)

kill -TERM $pid
wait $pid
trap - EXIT
echo "emberd exited 0"
