#!/usr/bin/env bash
# `ember convert` on every golden checkpoint: with -q f32 the result equals
# llama.cpp's model-f32.gguf (tensors bit for bit, every key; Gemma's
# eot_token_id is a deliberate difference, see tools/convert/convert.c), `ember
# quantize` of that file equals a direct quantized conversion byte for byte,
# and bad invocations / inputs exit non-zero leaving no file.
set -eu
cmp_py=$ROOT/tests/integration/gguf_compare.py

for arch in llama gemma phi falcon stablelm qwen2; do
	out=$TMPDIR/$arch.gguf
	"$BUILD/ember" convert "$SHARED/golden/$arch/hf" "$out" -q f32 2>"$TMPDIR/err"
	[ ! -s "$TMPDIR/err" ] # quiet when stderr is not a terminal
	ignore=()
	[ $arch = gemma ] && ignore=(--ignore tokenizer.ggml.eot_token_id)
	"$PYTHON" "$cmp_py" "$out" "$SHARED/golden/$arch/model-f32.gguf" --extra ember. "${ignore[@]}"
	echo "ok $arch f32"
	for q in int8 int4 int4-mixed; do
		"$BUILD/ember" convert "$SHARED/golden/$arch/hf" "$TMPDIR/direct.gguf" -q $q
		"$BUILD/ember" quantize "$out" "$TMPDIR/requant.gguf" -q $q
		cmp "$TMPDIR/direct.gguf" "$TMPDIR/requant.gguf"
	done
	echo "ok $arch quantize == convert"
done

# Falcon-RW: our own form, checked through inspect.
"$BUILD/ember" convert "$SHARED/golden/falcon-rw/hf" "$TMPDIR/rw.gguf" -q int4-mixed
info=$("$BUILD/ember" inspect "$TMPDIR/rw.gguf")
grep -q '^  falcon.use_alibi  *bool  *true$' <<<"$info"
grep -q '^  blk.1.attn_qkv.weight  *q4_0  *\[128, 384\]' <<<"$info"
grep -q '^  blk.1.ffn_norm.bias  *f32  *\[128\]' <<<"$info"
grep -q '^  token_embd.weight  *q8_0  *\[128, 1024\]' <<<"$info"
grep -q '^  ember.recipe  *str  *"int4-mixed"$' <<<"$info"

# --keep
"$BUILD/ember" convert "$SHARED/golden/llama/hf" "$TMPDIR/k.gguf" -q int4 --keep 'blk.*.ffn_down.weight=q8_0'
info=$("$BUILD/ember" inspect "$TMPDIR/k.gguf")
grep -q '^  blk.0.ffn_down.weight  *q8_0' <<<"$info"
grep -q '^  blk.0.ffn_up.weight  *q4_0' <<<"$info"
grep -q '^  ember.recipe  *str  *"int4 --keep blk.\*.ffn_down.weight=q8_0"$' <<<"$info"

# Failures: exit status, a message, nothing left behind.
expect_fail() { # status, message, args...
	want=$1 msg=$2; shift 2
	rc=0; "$BUILD/ember" "$@" 2>"$TMPDIR/err" >/dev/null || rc=$?
	cat "$TMPDIR/err"
	[ $rc -eq "$want" ]
	grep -q -- "$msg" "$TMPDIR/err"
}
expect_fail 2 'unknown recipe' convert "$SHARED/golden/llama/hf" "$TMPDIR/x.gguf" -q int3
expect_fail 2 'expected IN and OUT' convert "$SHARED/golden/llama/hf"
expect_fail 2 'expected PATTERN=TYPE' quantize "$TMPDIR/llama.gguf" "$TMPDIR/x.gguf" --keep foo
mkdir "$TMPDIR/empty"
expect_fail 1 'config.json' convert "$TMPDIR/empty" "$TMPDIR/x.gguf"
mkdir "$TMPDIR/bad"
cp "$SHARED/golden/llama/hf/"* "$TMPDIR/bad/"
chmod u+w "$TMPDIR/bad/"*
head -c 2000000 "$SHARED/golden/llama/hf/model.safetensors" >"$TMPDIR/bad/model.safetensors"
expect_fail 1 'outside the data' convert "$TMPDIR/bad" "$TMPDIR/x.gguf"
expect_fail 1 'only f32, f16' quantize "$TMPDIR/k.gguf" "$TMPDIR/x.gguf" -q int8
[ ! -e "$TMPDIR/x.gguf" ] && [ ! -e "$TMPDIR/x.gguf.tmp" ]
"$BUILD/ember" convert --help | grep -q 'int4-mixed'
echo "ok failures"
