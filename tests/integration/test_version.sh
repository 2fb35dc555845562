#!/usr/bin/env bash
# Both programs report their version and the CPU features they detected,
# and EMBER_CPU lowers the kernel level they would use.
set -eu
for prog in ember emberd; do
	out=$("$BUILD/$prog" --version)
	echo "$out"
	grep -q "^$prog [0-9]\+\.[0-9]\+\.[0-9]\+$" <<<"$out"
	grep -q '^cpu: ' <<<"$out"
	grep -q '^kernels: \(scalar\|avx2\|avx512\)$' <<<"$out"
	EMBER_CPU=scalar "$BUILD/$prog" --version | grep -q '^kernels: scalar$'
	# one line per operation, each naming a level; a cap leaves none above it
	grep -q '^op gemv q4_0: \(scalar\|avx2\|avx512\)$' <<<"$out"
	if EMBER_CPU=scalar "$BUILD/$prog" --version | grep '^op ' | grep -qv ': scalar$'; then exit 1; fi
	if EMBER_CPU=avx2 "$BUILD/$prog" --version | grep -q '^op .*: avx512$'; then exit 1; fi
	if grep -q avx2 /proc/cpuinfo; then grep -q '^cpu: .*AVX2' <<<"$out"; fi
done
# an unknown sub-command is an error, not a crash
if "$BUILD/ember" no-such-command 2>/dev/null; then exit 1; fi
