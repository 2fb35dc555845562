#!/usr/bin/env bash
# run_qemu.sh - the AArch64 build's tests under qemu-aarch64 (make test-arm64).
#
# Runs build/arm64/check_unit's kernel and golden suites once per ARM level:
# qemu's -cpu picks a core with or without the dot-product and int8
# matrix-multiply extensions (what the binary sees in its HWCAP), and
# EMBER_CPU caps the level below what the core has. Before each run,
# `ember --version` must report the expected level for the Q4_0 GEMM, so a
# run can never silently test another level than it names.
#
# Check runs without fork (CK_FORK=no): under Debian 12's qemu-user a
# forking guest hangs here, so each suite runs in one process, bounded by
# timeout. The suites that spawn processes (kernels_golden runs `ember
# eval`) are left out; the golden suite checks the same logits in-process.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build/arm64}
ROOT=${ROOT:-build/arm64/sysroot}
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
LIBS="$PWD/$ROOT/usr/lib/aarch64-linux-gnu"
SUITE_TIMEOUT=${SUITE_TIMEOUT:-600}

# cpu model | EMBER_CPU ("" = none) | expected level | suites
RUNS=(
	"cortex-a53||neon|cpu neon attention golden"
	"cortex-a53|scalar|scalar|golden"
	"cortex-a76||dotprod|neon golden"
	"max||i8mm|neon golden"
	"max|dotprod|dotprod|golden"
	"max|neon|neon|golden"
)

q() { # q MODEL LEVEL CMD...
	local model=$1 level=$2
	shift 2
	timeout "$SUITE_TIMEOUT" qemu-aarch64 -cpu "$model" -E LD_LIBRARY_PATH="$LIBS" \
		-E CK_FORK=no -E EMBER_TEST_NO_FORK=1 ${level:+-E EMBER_CPU=$level} "$@"
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
	if q "$model" "$level" "$BUILD/check_unit" $suites >"$BUILD/qemu-$model-${level:-auto}.log" 2>&1; then
		passed=$((passed + 1)); verdict=ok
	else
		failed=$((failed + 1)); verdict=FAIL
	fi
	echo "$verdict qemu -cpu $model EMBER_CPU=${level:-unset} (level $want): $suites," \
	     "$(grep -E '^[0-9]+%: Checks' "$BUILD/qemu-$model-${level:-auto}.log" || echo 'no summary')," \
	     "$(( $(date +%s) - t0 )) s"
	[ $verdict = ok ] || grep -E ':[FE]:' "$BUILD/qemu-$model-${level:-auto}.log" | head -20 || true
done
echo "arm64 under qemu: $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
