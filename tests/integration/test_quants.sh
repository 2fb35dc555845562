#!/usr/bin/env bash
# llama.cpp's presets in `ember quantize` and `ember convert -q`: from the
# F32 file llama-quantize was given (../shared/golden/quants/README.md),
# every preset's output has the same tensors as llama-quantize's, byte for
# byte and type for type (its per-tensor policy and its rounding; tensor
# order is not compared, llama-quantize writes its own). Both golden
# folders: llama-256 (every K-quant and IQ4_XS) and llama (rows of 128:
# llama.cpp's 32-element fallbacks). The converter's path from the Hugging
# Face checkpoint gives the same bytes for q4_k_m. Then the quantized file
# runs.
set -eu
same=$ROOT/tests/integration/gguf_same_tensors.py
Q=$SHARED/golden/quants

for dir in llama-256 llama; do
	src=$Q/llama-256/source-f32.gguf
	[ $dir = llama ] && src=$SHARED/golden/llama/model-f32.gguf
	for T in Q4_K_M Q4_K_S Q5_K_M Q6_K Q3_K_M Q2_K Q4_1 Q5_0 Q5_1 IQ4_NL IQ4_XS; do
		t=$(echo $T | tr 'A-Z' 'a-z')
		"$BUILD/ember" quantize "$src" "$TMPDIR/$t.gguf" -q $t
		"$PYTHON" "$same" "$TMPDIR/$t.gguf" "$Q/$dir/$T.gguf"
		echo "ok $dir $t: byte-identical to llama-quantize"
	done
done

"$BUILD/ember" convert "$SHARED/golden/llama/hf" "$TMPDIR/conv.gguf" -q q4_k_m
"$PYTHON" "$same" "$TMPDIR/conv.gguf" "$Q/llama/Q4_K_M.gguf"
echo "ok convert -q q4_k_m: byte-identical to llama-quantize"

"$BUILD/ember" inspect "$TMPDIR/q4_k_m.gguf" | grep -q 'general.file_type *u32 *15'
"$BUILD/ember" run -m "$TMPDIR/q4_k_m.gguf" -p hello -n 4 >/dev/null 2>&1
echo "ok the q4_k_m file runs"

if "$BUILD/ember" quantize "$src" "$TMPDIR/bad.gguf" -q q4_k_x 2>"$TMPDIR/err"; then exit 1; fi
grep -q 'q4_k_m' "$TMPDIR/err"
[ ! -e "$TMPDIR/bad.gguf" ]
