#!/usr/bin/env bash
# Integration test runner: runs every tests/integration/test_*.sh and
# test_*.py as its own process (they start real programs: ember, emberd),
# each with a time limit, and ends with "N passed, N failed".
#
# Environment for the tests: BUILD (binaries), ROOT (repo root),
# SHARED (../shared), TMPDIR (a fresh directory removed afterwards).
# Usage: tests/integration/run.sh [NAME-SUBSTRING...]
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
export ROOT
export BUILD=${BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
export SHARED=$ROOT/../shared
export PYTHON=/usr/bin/python3
LIMIT=${TEST_TIMEOUT:-300}

passed=0 failed=0 failures=()
for t in "$ROOT"/tests/integration/test_*.sh "$ROOT"/tests/integration/test_*.py; do
	[ -e "$t" ] || continue
	name=$(basename "$t")
	if [ $# -gt 0 ]; then
		keep=0; for f in "$@"; do case $name in *"$f"*) keep=1 ;; esac; done
		[ $keep = 1 ] || continue
	fi
	tmp=$(mktemp -d)
	start=$(date +%s%N)
	case $t in
	*.py) TMPDIR=$tmp timeout -k 5 "$LIMIT" "$PYTHON" "$t" >"$tmp/.log" 2>&1 ;;
	*) TMPDIR=$tmp timeout -k 5 "$LIMIT" bash "$t" >"$tmp/.log" 2>&1 ;;
	esac
	rc=$?
	ms=$((($(date +%s%N) - start) / 1000000)); secs=$((ms / 1000)).$((ms % 1000 / 100))
	if [ $rc -eq 0 ]; then
		passed=$((passed + 1)); echo "PASS $name (${secs}s)"
	else
		failed=$((failed + 1)); failures+=("$name")
		echo "FAIL $name (exit $rc)"; sed 's/^/    /' "$tmp/.log" | tail -n 40
	fi
	rm -rf "$tmp"
done
echo "integration: $passed passed, $failed failed"
[ $failed -eq 0 ]
