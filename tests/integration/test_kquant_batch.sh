#!/usr/bin/env bash
# K-quant batched decode steps equal single steps bit for bit at every x86
# kernel level this CPU runs (the unit test tests/test_kquant_batch.c,
# which runs at the level its process chose, again under each EMBER_CPU
# cap; a level the CPU lacks is capped lower and says so in its line);
# each run also compares packed rows with the file layout (avx512: packed).
set -eu
cd "$ROOT"
if [ ! -x "$BUILD/check_unit" ]; then
	echo "test_kquant_batch: skipped: $BUILD/check_unit is not built (make test builds it)"
	exit 0
fi
levels="avx2 avx512"
[ "$(uname -m)" = x86_64 ] || levels=default # the ARM levels: one kernel per type, batch or not
for level in $levels; do
	if [ "$level" = default ]; then
		out=$("$BUILD/check_unit" kquant_batch 2>&1) || { echo "$out"; exit 1; }
	else
		out=$(EMBER_CPU=$level "$BUILD/check_unit" kquant_batch 2>&1) || { echo "$out"; exit 1; }
	fi
	echo "$out"
	grep -qE '^100%: Checks: 10, Failures: 0, Errors: 0' <<<"$out" # the five golden K-quant files, five packed (3 K-quant, Q4_0, Q8_0)
done
