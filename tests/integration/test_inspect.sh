#!/usr/bin/env bash
# `ember inspect` prints the golden llama file's header, keys and tensors;
# a truncated copy is an error message and exit status 1, never a crash.
set -eu
model=$SHARED/golden/llama/model-f32.gguf

out=$("$BUILD/ember" inspect "$model")
echo "$out" | head -n 12
grep -q '^version: *3$' <<<"$out"
grep -q '^alignment: *32$' <<<"$out"
grep -q '^  general.architecture  *str  *"llama"$' <<<"$out"
grep -q '^  llama.block_count  *u32  *2$' <<<"$out"
grep -q '^  tokenizer.ggml.tokens  *arr\[str\]  *n=1000 \["<unk>", "<s>", "</s>"' <<<"$out"
grep -q '^  token_embd.weight  *f32  *\[128, 1000\]  *512000  *512000$' <<<"$out"
grep -q '^total: *625280 parameters, 2501120 bytes' <<<"$out"

# truncated in the header, inside the kvs, inside the last tensor's data
check_cut() {
	head -c "$1" "$model" >"$TMPDIR/cut.gguf"
	rc=0
	"$BUILD/ember" inspect "$TMPDIR/cut.gguf" >"$TMPDIR/out" 2>"$TMPDIR/err" || rc=$?
	cat "$TMPDIR/err"
	[ $rc -eq 1 ]
	grep -q "^ember inspect: $TMPDIR/cut.gguf: .*$2" "$TMPDIR/err"
}
check_cut 3 'truncated'
check_cut 20000 "key 'tokenizer.ggml.token_type'"
check_cut 2524000 "tensor 'output_norm.weight': data .* past end of file"

# a missing file and a bad invocation
rc=0; "$BUILD/ember" inspect "$TMPDIR/missing.gguf" 2>/dev/null || rc=$?
[ $rc -eq 1 ]
rc=0; "$BUILD/ember" inspect 2>/dev/null || rc=$?
[ $rc -eq 2 ]
