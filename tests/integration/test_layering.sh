#!/usr/bin/env bash
# The compute-backend seam holds: the runtime (engine, scheduler, kv pool,
# loading) reaches the forward pass and the caches only through compute.h,
# and compute.h (with what it includes) names no CPU type.
set -eu
cd "$ROOT/engine"
cpu='"(forward|kv_cache|attention|kernels|cpu)\.h"|<pthreadpool\.h>'
fail=0
for f in engine.c engine.h engine_impl.h engine_model.c scheduler.c kv_pool.c kv_pool.h; do
	if grep -En "#include $cpu" "$f"; then
		echo "runtime file $f includes a CPU header"; fail=1
	fi
done
# compute.h and the headers it pulls in, transitively
seen=""
todo="compute.h"
while [ -n "$todo" ]; do
	set -- $todo; h=$1; shift; todo="$*"
	case " $seen " in *" $h "*) continue ;; esac
	seen="$seen $h"
	if grep -En "#include $cpu" "$h"; then
		echo "$h (reached from compute.h) includes a CPU header"; fail=1
	fi
	for d in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$h"); do todo="$todo $d"; done
done
echo "compute.h reaches:$seen"
exit $fail
