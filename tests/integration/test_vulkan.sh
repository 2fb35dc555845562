#!/usr/bin/env bash
# The Vulkan device beyond F32 (lavapipe in `make test`): Q8_0 and Q4_0
# files match their exact dequantized reference (1e-4 x max) and F16/BF16
# files the CPU's logits, greedy identical to the CPU; K-quant, Q4_1, Q5_x
# and IQ4 files match their exact dequantized reference; a bad device name is
# refused; emberd --device=vulkan (and EMBER_DEVICE) answers a greedy
# completion with the CPU's text and embeddings within 1e-4 of the CPU's; ember bench --device=vulkan lists the
# device. Skipped, with the reason, where there is no Vulkan device.
set -eu
. "$ROOT/tests/integration/emberd_lib.sh"
E=$BUILD/ember
if ! "$E" --version | grep -q '^vulkan:[0-9]*: .*: usable'; then
	echo "skip: no usable Vulkan device: $("$E" --version | grep '^vulkan' | head -1)"
	exit 0
fi
cmp_py=$TMPDIR/cmp.py
cat >"$cmp_py" <<'PY'
import array, sys
got, ref = array.array('f'), array.array('f')
got.frombytes(open(sys.argv[1], 'rb').read())
ref.frombytes(open(sys.argv[2], 'rb').read())
assert len(got) == len(ref)
n = 24
V = len(ref) // n
worst = max(max(abs(a - b) for a, b in zip(got[t*V:(t+1)*V], ref[t*V:(t+1)*V])) /
            max(abs(b) for b in ref[t*V:(t+1)*V]) for t in range(n))
print("max|diff|/max|ref| %.3g" % worst)
assert worst <= 1e-4
PY
G=$SHARED/golden/llama
Q=$SHARED/golden/quants/llama
ids=$("$PYTHON" -c "import json; print(','.join(map(str, json.load(open('$G/tokens.json'))['input_ids'])))")
# (file, reference logits): quantized files against their exact dequantized
# reference; half-precision ones against the CPU on the same file.
"$E" quantize "$G/model-f32.gguf" "$TMPDIR/f16.gguf" -q f16 >/dev/null
"$E" quantize "$G/model-f32.gguf" "$TMPDIR/bf16.gguf" -q bf16 >/dev/null
for f in "$Q/Q8_0.gguf" "$Q/Q4_0.gguf" "$TMPDIR/f16.gguf" "$TMPDIR/bf16.gguf"; do
	cpu=$("$E" eval -m "$f" --tokens "$ids" -o "$TMPDIR/cpu.f32" --greedy 8 --device=cpu 2>/dev/null)
	vk=$("$E" eval -m "$f" --tokens "$ids" -o "$TMPDIR/vk.f32" --greedy 8 --device=vulkan 2>/dev/null)
	[ "$cpu" = "$vk" ] || { echo "${f##*/}: cpu $cpu, vulkan $vk"; exit 1; }
	ref=$TMPDIR/cpu.f32
	case $f in "$Q"/*) ref=${f%.gguf}.logits-exact-dequant.f32 ;; esac
	echo "ok ${f##*/} vulkan: greedy as the CPU; $("$PYTHON" "$cmp_py" "$TMPDIR/vk.f32" "$ref")"
done
# The other block types (a pipeline each), on the model whose rows are
# whole 256-blocks so every K-quant is used: files covering Q2_K..Q6_K,
# Q4_1, Q5_x, IQ4_NL, IQ4_XS (and Q4_K_M, the common mix), each within
# 1e-4 x max of its exact dequantized reference (the CPU, which rounds
# activations to 8 bits as llama.cpp does, is allowed ~2e-2: test_quants.c).
K=$SHARED/golden/quants/llama-256
kids=$("$PYTHON" -c "import json; print(','.join(map(str, json.load(open('$K/tokens.json'))['input_ids'])))")
for t in Q2_K Q3_K_M Q4_K_M Q4_1 Q5_0 Q5_1 IQ4_NL IQ4_XS; do
	"$E" eval -m "$K/$t.gguf" --tokens "$kids" -o "$TMPDIR/vk.f32" --device=vulkan >/dev/null \
		2>"$TMPDIR/err" || { cat "$TMPDIR/err"; exit 1; }
	echo "ok llama-256/$t vulkan: $("$PYTHON" "$cmp_py" "$TMPDIR/vk.f32" "$K/$t.logits-exact-dequant.f32")"
done
if "$E" eval -m "$G/model-f32.gguf" --tokens 1 --device=vulkan:x 2>"$TMPDIR/err"; then exit 1; fi
grep -q "device 'vulkan:x': want cpu, vulkan or vulkan:N" "$TMPDIR/err"
if "$E" eval -m "$G/model-f32.gguf" --tokens 1 --device=vulkan:9 2>"$TMPDIR/err" >/dev/null; then
	grep -q "using the CPU" "$TMPDIR/err" # no device 9: said once, on the CPU
fi
out=$("$E" bench -m "$Q/Q8_0.gguf" -p 8 -n 2 -r 1 --device=vulkan)
grep -q '^device: vulkan (' <<<"$out"
grep -Eq '^\| .* \| vulkan \| .* \| tg2 \|' <<<"$out"
echo "ok bench --device=vulkan"

# emberd: the same greedy completion on both devices.
complete() { # DEVICE-ENV... -> the completion's text
	port=$(free_port)
	env "$@" "$BUILD/emberd" --model="$G/model-f32.gguf" --port="$port" --threads=1 --slots=2 \
		2>"$TMPDIR/emberd.log" &
	pid=$!
	wait_health "$port" $pid "$TMPDIR/emberd.log"
	curl -sf "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
		-d '{"prompt": "The quick brown fox", "max_tokens": 8, "temperature": 0}' |
		"$PYTHON" -c 'import json,sys; print(ascii(json.load(sys.stdin)["choices"][0]["text"]))'
	curl -sf "http://127.0.0.1:$port/v1/embeddings" -H 'Content-Type: application/json' \
		-d '{"input": ["The quick brown fox", "jumps"]}' >"$TMPDIR/emb-$1.json"
	kill $pid
	wait $pid || true
}
cpu=$(complete EMBER_DEVICE=cpu)
vk=$(complete EMBER_DEVICE=vulkan)
[ "$cpu" = "$vk" ] || { echo "emberd: cpu '$cpu', vulkan '$vk'"; exit 1; }
echo "ok emberd EMBER_DEVICE=vulkan: '$vk' as on the CPU"
"$PYTHON" - "$TMPDIR/emb-EMBER_DEVICE=cpu.json" "$TMPDIR/emb-EMBER_DEVICE=vulkan.json" <<'PY'
import json, sys
a, b = ([d["embedding"] for d in json.load(open(f))["data"]] for f in sys.argv[1:3])
assert len(a) == len(b) == 2 and all(len(x) == len(y) > 0 for x, y in zip(a, b))
worst = max(abs(p - q) for x, y in zip(a, b) for p, q in zip(x, y))
print("ok emberd embeddings on vulkan: max |diff| vs the CPU %.3g" % worst)
assert worst <= 1e-4
PY
