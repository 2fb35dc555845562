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
check_py=$ROOT/tests/integration/logits_check.py
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
