#!/usr/bin/env bash
# ember synth writes loadable models of every type; same seed, same bytes;
# bad shapes and types are refused without leaving a file.
set -eu
E=$BUILD/ember
for t in f32 f16 bf16 q8_0 q4_0; do
	"$E" synth --preset tiny --type "$t" --seed 7 -o "$TMPDIR/m-$t.gguf"
	"$E" inspect "$TMPDIR/m-$t.gguf" | grep -q "blk.1.ffn_down.weight *$t "
	"$E" eval -m "$TMPDIR/m-$t.gguf" --tokens 1,40,41 --greedy 4 | grep -q '^greedy: [0-9]'
done
# every architecture of the engine's table: loads and generates
for a in llama gemma qwen2 stablelm phi2 falcon falcon-rw; do
	"$E" synth --arch "$a" --preset tiny --type q4_0 -o "$TMPDIR/a-$a.gguf"
	"$E" eval -m "$TMPDIR/a-$a.gguf" --tokens 1,40,41 --greedy 3 | grep -q '^greedy: [0-9]'
done
"$E" inspect "$TMPDIR/a-qwen2.gguf" | grep -q 'blk.0.attn_q.bias'
"$E" inspect "$TMPDIR/a-phi2.gguf" | grep -q 'phi2.rope.dimension_count *u32 *6'
"$E" inspect "$TMPDIR/a-falcon-rw.gguf" | grep -q 'falcon.use_alibi *bool *true'
"$E" inspect "$TMPDIR/a-falcon-rw.gguf" | grep -q 'blk.1.attn_qkv.bias'
if "$E" synth --arch nope --preset tiny -o "$TMPDIR/bad.gguf" 2>/dev/null; then exit 1; fi
"$E" synth --preset tiny --type q8_0 --seed 7 -o "$TMPDIR/again.gguf"
cmp "$TMPDIR/m-q8_0.gguf" "$TMPDIR/again.gguf"
"$E" synth --preset tiny --type q8_0 --seed 8 -o "$TMPDIR/other.gguf"
! cmp -s "$TMPDIR/m-q8_0.gguf" "$TMPDIR/other.gguf"
# explicit shape: GQA 8 heads over 2 kv heads
"$E" synth --hidden 128 --layers 1 --heads 8 --kv-heads 2 --ffn 256 --vocab 400 -o "$TMPDIR/s.gguf"
"$E" inspect "$TMPDIR/s.gguf" | grep -q 'llama.attention.head_count_kv *u32 *2'
for bad in "--heads 3" "--kv-heads 3" "--vocab 10" "--type q8_k" "--type nope" "--preset nope" "--hidden x"; do
	if "$E" synth --preset tiny $bad -o "$TMPDIR/bad.gguf" 2>"$TMPDIR/err"; then
		echo "accepted: $bad"; exit 1
	fi
	grep -q 'ember synth:' "$TMPDIR/err"
	[ ! -e "$TMPDIR/bad.gguf" ] && [ ! -e "$TMPDIR/bad.gguf.tmp" ]
done
