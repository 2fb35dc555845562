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
# cores cover neon, dotprod and i8mm (kernels_driver, its level choice, runs
# beside it on each core); EMBER_TEST_QUICK=1 gives it fewer
# shapes (every type, ragged sizes) so it fits under emulation.
#
# Check runs without fork (CK_FORK=no): under Debian 12's qemu-user a
# forking guest hangs here, so each suite runs in its own process, bounded
# by timeout (a hang names its suite). Tests that must fork a child skip it
# when EMBER_TEST_NO_FORK is set, saying so; a guest's pthread_create
# hangs too, so tests that start threads skip under EMBER_TEST_NO_THREADS
# (the suites built on threads are in SKIP); kernels_golden runs `ember
# eval` through EMBER_TEST_RUNNER (qemu-aarch64 -cpu MODEL). Suites that
# cannot run under qemu-user are in SKIP, with the reason printed.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build/arm64}
ROOT=${ROOT:-build/arm64/sysroot}
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
LIBS="$PWD/$ROOT/usr/lib/aarch64-linux-gnu"
SUITE_TIMEOUT=${SUITE_TIMEOUT:-600}

# cpu model | EMBER_CPU ("" = none) | expected level | suites (all = every one)
RUNS=(
	"cortex-a53||neon|cpu neon attention kernels kernels_driver golden"
	"cortex-a53|scalar|scalar|golden"
	"cortex-a76||dotprod|neon kernels kernels_driver golden"
	"max||i8mm|all"
	"max|dotprod|dotprod|golden"
	"max|neon|neon|golden"
)

# Suites left out under qemu-user, and why (printed with the results).
THREADS="a guest's pthread_create never returns under this machine's qemu-user (Debian 12)"
declare -A SKIP=(
	[embed]="every test starts an engine (worker threads): $THREADS"
	[engine]="every test starts an engine (worker threads): $THREADS"
	[engine_api]="every test starts an engine (worker threads): $THREADS"
	[structured]="starts an engine (worker threads): $THREADS"
	[tool_golden]="starts an engine (worker threads): $THREADS"
	[scheduler]="every test starts an engine (worker threads): $THREADS"
	[threadpool]="the compute thread pool itself (worker threads): $THREADS"
	[stream]="a producer thread feeds the uv loop: $THREADS"
)

q() { # q MODEL LEVEL CMD...
	local model=$1 level=$2
	shift 2
	timeout "$SUITE_TIMEOUT" qemu-aarch64 -cpu "$model" -E LD_LIBRARY_PATH="$LIBS" \
		-E CK_FORK=no -E EMBER_TEST_NO_FORK=1 -E EMBER_TEST_NO_THREADS=1 -E EMBER_TEST_QUICK=1 \
		-E EMBER_TEST_RUNNER="qemu-aarch64 -cpu $model" ${level:+-E EMBER_CPU=$level} "$@"
}

# One task: a suite at a row, its log and exit status under $BUILD/qemu/.
if [ "${1:-}" = --task ]; then
	IFS='|' read -r model level suite <<<"$2"
	out="$BUILD/qemu/$model-${level:-auto}-$suite"
	t0=$(date +%s)
	rc=0
	q "$model" "$level" "$BUILD/check_unit" "$suite" >"$out.log" 2>&1 || rc=$?
	echo "$rc $(( $(date +%s) - t0 ))" >"$out.rc"
	exit 0
fi

passed=0 failed=0
start=$(date +%s)
rm -rf "$BUILD/qemu"
mkdir -p "$BUILD/qemu"
tasks=()
for run in "${RUNS[@]}"; do
	IFS='|' read -r model level want suites <<<"$run"
	got=$(q "$model" "$level" "$BUILD/ember" --version | sed -n 's/^op gemm q4_0: //p')
	if [ "$got" != "$want" ]; then
		echo "FAIL qemu -cpu $model EMBER_CPU=${level:-unset}: Q4_0 GEMM runs '$got', expected $want"
		failed=$((failed + 1))
		continue
	fi
	[ "$suites" = all ] && suites=$(sed -n 's/^SUITE(\(.*\))$/\1/p' "$BUILD/tests/suites.h")
	for suite in $suites; do
		[ -n "${SKIP[$suite]:-}" ] || tasks+=("$model|$level|$suite")
	done
done
# The slow suites first (quants: about 5 min here), so none starts last.
slow='\|(quants|quants_simd|sampler|convert|kernels|models|golden|forward)$'
printf '%s\n' "${tasks[@]}" | grep -E "$slow" | sort -t'|' -k3,3r >"$BUILD/qemu/tasks"
printf '%s\n' "${tasks[@]}" | grep -vE "$slow" >>"$BUILD/qemu/tasks"
# Several qemu processes at once: each is one guest thread most of the time.
xargs -d '\n' -P "${QEMU_JOBS:-3}" -n 1 "$PWD/tests/arm64/run_qemu.sh" --task <"$BUILD/qemu/tasks"

for run in "${RUNS[@]}"; do
	IFS='|' read -r model level want suites <<<"$run"
	[ "$suites" = all ] && suites=$(sed -n 's/^SUITE(\(.*\))$/\1/p' "$BUILD/tests/suites.h")
	bad="" checks=0 secs=0 n=0
	for suite in $suites; do
		[ -z "${SKIP[$suite]:-}" ] || continue
		out="$BUILD/qemu/$model-${level:-auto}-$suite"
		[ -f "$out.rc" ] || continue # the version check failed above
		read -r rc t <"$out.rc"
		n=$((n + 1)) secs=$((secs + t))
		if [ "$rc" = 0 ]; then
			checks=$((checks + $(sed -n 's/^100%: Checks: \([0-9]*\),.*/\1/p' "$out.log")))
		else
			bad="$bad $suite"
			echo "$suite at -cpu $model EMBER_CPU=${level:-unset}: exit $rc" \
			     "$([ "$rc" != 124 ] || echo "(over $SUITE_TIMEOUT s)")"
			grep -E ':[FE]:' "$out.log" | head -10 || true
		fi
	done
	[ "$n" -gt 0 ] || continue
	if [ -z "$bad" ]; then
		passed=$((passed + 1)); verdict=ok
	else
		failed=$((failed + 1)); verdict=FAIL
	fi
	echo "$verdict qemu -cpu $model EMBER_CPU=${level:-unset} (level $want): $n suites," \
	     "$checks checks passed${bad:+, failed:$bad}, $secs s of qemu time"
done
for suite in "${!SKIP[@]}"; do
	echo "skipped under qemu: $suite: ${SKIP[$suite]}"
done
echo "arm64 under qemu: $(( $(date +%s) - start )) s"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
