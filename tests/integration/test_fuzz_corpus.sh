#!/usr/bin/env bash
# Replays every kept fuzz input (tests/fuzz/corpus/<target>/) through the
# same entry points the libFuzzer targets use (make fuzz): inputs that once
# crashed stay fixed. Under make asan this runs with ASan/UBSan too.
set -eu
n=0
for dir in "$ROOT"/tests/fuzz/corpus/*/; do
	name=$(basename "$dir")
	bin=$BUILD/replay_$name
	[ -x "$bin" ] || { echo "no replay binary for corpus '$name'"; exit 1; }
	files=("$dir"*)
	[ -e "${files[0]}" ] || { echo "empty corpus $name"; exit 1; }
	"$bin" "${files[@]}"
	n=$((n + ${#files[@]}))
done
[ "$n" -gt 0 ]
# A corrupted copy of each model seed too: every prefix length of the header
# region and a few flipped bytes (seeded), in one run of the replay binary.
/usr/bin/python3 - "$ROOT/tests/fuzz/corpus/gguf" "$TMPDIR" <<'PY'
import os, random, sys
src, out = sys.argv[1], sys.argv[2]
rnd = random.Random(7)
k = 0
for name in sorted(os.listdir(src)):
    data = open(os.path.join(src, name), "rb").read()
    for cut in list(range(0, 600, 7)) + [len(data) // 2, len(data) - 1]:
        open(os.path.join(out, "cut%05d" % k), "wb").write(data[:cut]); k += 1
    for _ in range(60):
        b = bytearray(data)
        for _ in range(4):
            b[rnd.randrange(min(len(b), 4096))] = rnd.randrange(256)
        open(os.path.join(out, "flip%05d" % k), "wb").write(bytes(b)); k += 1
PY
"$BUILD/replay_gguf" "$TMPDIR"/cut* "$TMPDIR"/flip*
