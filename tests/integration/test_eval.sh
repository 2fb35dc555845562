#!/usr/bin/env bash
# `ember eval` on the golden LLaMA model: the logits it writes match the
# float64 reference within the golden tolerance (max|diff| <= 1e-4 x
# max|exact| per position), with 1 and 2 threads, and --greedy reproduces
# the reference continuation.
set -eu
G=$SHARED/golden/llama
ids=$("$PYTHON" -c "import json; print(','.join(map(str, json.load(open('$G/tokens.json'))['input_ids'])))")
want=$("$PYTHON" -c "import json; print(' '.join(map(str, json.load(open('$G/tokens.json'))['greedy_continuation'])))")

for t in 1 2; do
	out=$("$BUILD/ember" eval -m "$G/model-f32.gguf" --tokens "$ids" -o "$TMPDIR/logits.f32" \
		--greedy 16 -t $t)
	echo "$out"
	[ "$out" = "greedy: $want" ]
	"$PYTHON" - "$TMPDIR/logits.f32" "$G/logits-exact.f32" <<'PY'
import sys
import numpy as np
got = np.fromfile(sys.argv[1], dtype="<f4")
exact = np.fromfile(sys.argv[2], dtype="<f4").reshape(24, -1)
assert got.size == exact.size, (got.size, exact.size)
got = got.reshape(exact.shape)
diff = np.abs(got.astype(np.float64) - exact).max(axis=1)
ref = np.abs(exact).max(axis=1)
print("max|diff| %.3g, worst ratio %.3g" % (diff.max(), (diff / ref).max()))
assert (diff <= 1e-4 * ref).all(), "logits differ from the reference"
PY
done

# Without -o: argmax per position, one per input token.
out=$("$BUILD/ember" eval -m "$G/model-f32.gguf" --tokens "$ids")
echo "$out"
[ "$(wc -w <<<"${out#argmax:}")" -eq 24 ]
# Bad input is an error with a message, not a crash.
if "$BUILD/ember" eval -m "$G/model-f32.gguf" --tokens 1,99999 2>"$TMPDIR/err"; then exit 1; fi
grep -q vocabulary "$TMPDIR/err"
if "$BUILD/ember" eval -m "$TMPDIR/none.gguf" --tokens 1 2>/dev/null; then exit 1; fi
if "$BUILD/ember" eval -m "$G/model-f32.gguf" --tokens 1,x 2>/dev/null; then exit 1; fi
