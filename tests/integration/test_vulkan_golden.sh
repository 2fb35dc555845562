#!/usr/bin/env bash
# Every golden architecture through the Vulkan device (lavapipe in `make
# test`): `ember eval --device=vulkan` of the F32 model reproduces the exact
# logits within 1e-4 x max|exact| at every position (the figure is printed
# per arch) and the greedy continuation token for token, as the CPU does.
# falcon-rw has no llama.cpp file: ours is converted from the HF checkpoint.
# Skipped, with the reason, where the build or the machine has no Vulkan.
set -eu
if ! "$BUILD/ember" --version | grep -q '^vulkan:[0-9]*: .*: usable'; then
	echo "skip: no usable Vulkan device: $("$BUILD/ember" --version | grep '^vulkan' | head -1)"
	exit 0
fi
check_py=$TMPDIR/check.py
cat >"$check_py" <<'PY'
import array, sys
got, exact = array.array('f'), array.array('f')
got.frombytes(open(sys.argv[1], 'rb').read())
exact.frombytes(open(sys.argv[2], 'rb').read())
assert len(got) == len(exact), (len(got), len(exact))
n = 24
V = len(exact) // n
worst = wabs = 0.0
for t in range(n):
    g, e = got[t * V:(t + 1) * V], exact[t * V:(t + 1) * V]
    d = max(abs(a - b) for a, b in zip(g, e))
    worst = max(worst, d / max(abs(b) for b in e))
    wabs = max(wabs, d)
print("max|diff| %.3g, /max|exact| %.3g" % (wabs, worst))
assert worst <= float(sys.argv[3]), "logits differ from the reference"
PY
# One arch (run three at a time: lavapipe's steps mostly wait on its threads).
one() {
	arch=$1
	G=$SHARED/golden/$arch
	file=$G/model-f32.gguf
	if [ ! -f "$file" ]; then
		file=$TMPDIR/$arch.gguf
		"$BUILD/ember" convert "$G/hf" "$file" -q f32 >/dev/null
	fi
	ids=$("$PYTHON" -c "import json; print(','.join(map(str, json.load(open('$G/tokens.json'))['input_ids'])))")
	want=$("$PYTHON" -c "import json; print(' '.join(map(str, json.load(open('$G/tokens.json'))['greedy_continuation'])))")
	out=$("$BUILD/ember" eval -m "$file" --tokens "$ids" -o "$TMPDIR/$arch.f32" --greedy 16 \
		--device=vulkan 2>"$TMPDIR/$arch.err") || { cat "$TMPDIR/$arch.err"; return 1; }
	[ "$out" = "greedy: $want" ] || { echo "$arch: $out, want $want"; return 1; }
	echo "ok $arch vulkan: greedy; $("$PYTHON" "$check_py" "$TMPDIR/$arch.f32" "$G/logits-exact.f32" 1e-4)"
}
export -f one
export check_py
printf '%s\n' llama llama3 qwen2 qwen3 gemma gemma2 gemma3 phi phi3 phi3-longrope stablelm \
	falcon falcon-rw | xargs -P 3 -I{} bash -c 'one {}'
