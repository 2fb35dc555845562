#!/usr/bin/env bash
# Both programs report their version and the CPU features they detected,
# and EMBER_CPU lowers the kernel level they would use.
set -eu
for prog in ember emberd; do
	out=$("$BUILD/$prog" --version)
	echo "$out"
	grep -q "^$prog [0-9]\+\.[0-9]\+\.[0-9]\+$" <<<"$out"
	grep -q '^cpu: ' <<<"$out"
	# x86-64 levels (amx where CPUID, XCR0 and the kernel allow the tiles) or
	# AArch64's
	grep -q '^kernels: \(scalar\|avx2\|avx512\|amx\|neon\|dotprod\|i8mm\)$' <<<"$out"
	EMBER_CPU=scalar "$BUILD/$prog" --version | grep -q '^kernels: scalar$'
	# one line per operation, each naming a level; a cap leaves none above it
	grep -q '^op gemv q4_0: \(scalar\|avx2\|avx512\|amx\|neon\|dotprod\|i8mm\)$' <<<"$out"
	if EMBER_CPU=scalar "$BUILD/$prog" --version | grep '^op ' | grep -qv ': scalar$'; then exit 1; fi
	if EMBER_CPU=avx2 "$BUILD/$prog" --version | grep -q '^op .*: \(avx512\|amx\)$'; then exit 1; fi
	if EMBER_CPU=avx512 "$BUILD/$prog" --version | grep -q '^op .*: amx$'; then exit 1; fi
	if grep -qw amx_tile /proc/cpuinfo && [ "$(uname -m)" = x86_64 ]; then
		# an AMX machine picks amx unless the tiles are refused (said on stderr)
		grep -q '^kernels: \(amx\|avx512\)$' <<<"$out"
	fi
	if grep -q avx2 /proc/cpuinfo; then grep -q '^cpu: .*AVX2' <<<"$out"; fi
done
# an unknown sub-command is an error, not a crash
if "$BUILD/ember" no-such-command 2>/dev/null; then exit 1; fi
