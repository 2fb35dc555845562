#!/usr/bin/env bash
# run_qemu.sh - the AArch64 build's tests under qemu-aarch64 (make test-arm64).
#
# Runs build/arm64/check_unit under qemu-aarch64: every suite once at the
# highest level (-cpu max, i8mm), and the kernel and golden suites at each
# ARM level: qemu's -cpu picks a core with or without the dot-product and
# int8 matrix-multiply extensions (what the binary sees in its HWCAP), and
# EMBER_CPU caps the level below what the core has. Before each run,
# `ember --version` must report the expected level for the Q4_0 GEMM, so a
# run can never silently test another level than it names. The kernels
# suite checks every level the core has (not EMBER_CPU's cap), so the three
# cores cover neon, dotprod and i8mm; EMBER_TEST_QUICK=1 gives it fewer
# shapes (every type, ragged sizes) so it fits under emulation.
#
# Check runs without fork (CK_FORK=no): under Debian 12's qemu-user a
# forking guest hangs here, so each suite runs in its own process, bounded
# by timeout (a hang names its suite). Tests that must fork a child skip it
# when EMBER_TEST_NO_FORK is set, saying so; kernels_golden runs `ember
# eval` through EMBER_TEST_RUNNER (qemu-aarch64 -cpu MODEL). Suites that
# cannot run under qemu-user are in SKIP, with the reason printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build/arm64}
ROOT=${ROOT:-build/arm64/sysroot}
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
LIBS="$PWD/$ROOT/usr/lib/aarch64-linux-gnu"
SUITE_TIMEOUT=${SUITE_TIMEOUT:-300}

# cpu model | EMBER_CPU ("" = none) | expected level | suites (all = every one)
RUNS=(
	"cortex-a53||neon|cpu neon attention kernels golden"
	"cortex-a53|scalar|scalar|golden"
	"cortex-a76||dotprod|neon kernels golden"
	"max||i8mm|all"
	"max|dotprod|dotprod|golden"
	"max|neon|neon|golden"
)

# Suites left out under qemu-user, and why (printed with the results).
declare -A SKIP=(
)

q() { # q MODEL LEVEL CMD...
	local model=$1 level=$2
	shift 2
	timeout "$SUITE_TIMEOUT" qemu-aarch64 -cpu "$model" -E LD_LIBRARY_PATH="$LIBS" \
		-E CK_FORK=no -E EMBER_TEST_NO_FORK=1 -E EMBER_TEST_QUICK=1 \
		-E EMBER_TEST_RUNNER="qemu-aarch64 -cpu $model" ${level:+-E EMBER_CPU=$level} "$@"
}

passed=0 failed=0
start=$(date +%s)
for run in "${RUNS[@]}"; do
	IFS='|' read -r model level want suites <<<"$run"
	got=$(q "$model" "$level" "$BUILD/ember" --version | sed -n 's/^op gemm q4_0: //p')
	if [ "$got" != "$want" ]; then
		echo "FAIL qemu -cpu $model EMBER_CPU=${level:-unset}: Q4_0 GEMM runs '$got', expected $want"
		failed=$((failed + 1))
		continue
	fi
	t0=$(date +%s)
	[ "$suites" = all ] && suites=$(sed -n 's/^SUITE(\(.*\))$/\1/p' "$BUILD/tests/suites.h")
	log="$BUILD/qemu-$model-${level:-auto}.log"
	: >"$log"
	bad="" checks=0 skipped=""
	for suite in $suites; do
		if [ -n "${SKIP[$suite]:-}" ]; then
			skipped="$skipped $suite"
			continue
		fi
		if q "$model" "$level" "$BUILD/check_unit" "$suite" >>"$log" 2>&1; then
			checks=$((checks + $(sed -n 's/^100%: Checks: \([0-9]*\),.*/\1/p' "$log" | tail -1)))
		else
			bad="$bad $suite"
			echo "$suite: exit $? (124: timed out after $SUITE_TIMEOUT s)" >>"$log"
		fi
	done
	if [ -z "$bad" ]; then
		passed=$((passed + 1)); verdict=ok
	else
		failed=$((failed + 1)); verdict=FAIL
	fi
	echo "$verdict qemu -cpu $model EMBER_CPU=${level:-unset} (level $want):" \
	     "$(echo $suites | wc -w) suites, $checks checks passed${bad:+, failed:$bad}," \
	     "$(( $(date +%s) - t0 )) s"
	for suite in $skipped; do
		echo "  skipped $suite: ${SKIP[$suite]}"
	done
	[ $verdict = ok ] || grep -E ':[FE]:|^[a-z_]*: exit' "$log" | head -20 || true
done
echo "arm64 under qemu: $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
