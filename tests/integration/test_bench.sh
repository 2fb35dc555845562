#!/usr/bin/env bash
# ember bench prints one markdown row per test (pp, tg) with tokens/s and,
# for decode, the weight bytes per token; bad options are refused. No
# timing is asserted.
set -eu
E=$BUILD/ember
"$E" synth --preset tiny --type q4_0 --seed 3 -o "$TMPDIR/b.gguf"
out=$("$E" bench -m "$TMPDIR/b.gguf" -p 16 -n 4 -t 2 -r 2)
echo "$out"
grep -Eq '^\| .* \| pp16 \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ \| - \| - \|$' <<<"$out"
grep -Eq '^\| .* \| tg4 \| [0-9.]+ ± [0-9.]+ \| [0-9.]+ \| [0-9.]+ MB \| [0-9.]+ \|$' <<<"$out"
# -p 0 skips prefill
[ "$("$E" bench -m "$TMPDIR/b.gguf" -p 0 -n 2 -r 1 | grep -c '| tg2 |')" -eq 1 ]
for bad in "-r 0" "-t 0" "-p x" "--nope 1"; do
	if "$E" bench -m "$TMPDIR/b.gguf" $bad 2>/dev/null; then echo "accepted: $bad"; exit 1; fi
done
if "$E" bench -m "$TMPDIR/none.gguf" 2>/dev/null; then exit 1; fi
# fc_compare (built by `make bench` only: it links XNNPACK): both F32 paths
# agree on a small shape (no timing asserted)
if [ ! -x "$BUILD/fc_compare" ]; then
	echo "fc_compare not built (make bench builds it): its check is skipped"
	exit 0
fi
out=$("$BUILD/fc_compare" 3 64 40 1 1)
echo "$out"
rel=$(sed -n 's/.*max relative difference \([0-9.e+-]*\)$/\1/p' <<<"$out")
/usr/bin/python3 -c "import sys; sys.exit(0 if float('$rel') < 1e-3 else 1)"
