#!/usr/bin/env bash
# The engine's folders are layers (README, Architecture), and a file may
# include headers only from its own folder and the layers below it:
#
#   base     ember.h errors, buffers, clock, UTF-8     (nothing)
#   format   GGUF, element types                      base
#   model    architectures, the loaded model           base format
#   compute  compute.h, the device contract            base format model
#   cpu      compute/cpu and its kernels: one device   base format model compute
#   text     tokenizers, detokenizer, chat templates   base format model
#   runtime  engine, scheduler, KV pool, sampler,      base format model compute text
#            grammar (reaches a device only through compute.h)
#
# So a GPU backend is a sibling of compute/cpu that the runtime never names,
# and nothing below the runtime knows about tokens as text. The check also
# holds compute.h itself to naming no CPU type.
set -eu
cd "$ROOT/engine"

layer_of() { # path -> layer name
	case $1 in
	base/*) echo base ;; format/*) echo format ;; model/*) echo model ;;
	compute/cpu/*) echo cpu ;; compute/*) echo compute ;;
	text/*) echo text ;; runtime/*) echo runtime ;; *) echo unknown ;;
	esac
}
allowed() { # layer -> layers it may include
	case $1 in
	base) echo "base" ;;
	format) echo "base format" ;;
	model) echo "base format model" ;;
	compute) echo "base format model compute" ;;
	cpu) echo "base format model compute cpu" ;;
	text) echo "base format model text" ;;
	runtime) echo "base format model compute text runtime" ;;
	esac
}

# header name -> its folder (names are unique across the engine)
declare -A home
while IFS= read -r f; do
	n=${f##*/}
	if [ -n "${home[$n]:-}" ]; then echo "two headers named $n: ${home[$n]} $f"; exit 1; fi
	home[$n]=$f
done < <(find . -name '*.h' | sed 's|^\./||')

fail=0 files=0 edges=0
while IFS= read -r f; do
	files=$((files + 1))
	from=$(layer_of "$f")
	if [ "$from" = unknown ]; then echo "$f: not in a layer folder"; fail=1; continue; fi
	ok=" $(allowed "$from") "
	for inc in $(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f"); do
		h=${home[$inc]:-}
		[ -n "$h" ] || continue # a server/ or system header: not the engine's
		to=$(layer_of "$h")
		edges=$((edges + 1))
		case $ok in *" $to "*) ;; *)
			echo "$f ($from) includes $inc ($to): not a lower layer"; fail=1 ;;
		esac
	done
done < <(find . -name '*.c' -o -name '*.h' -o -name '*.cc' | sed 's|^\./||' | sort)

# compute.h names no CPU type: it reaches no cpu-layer header.
if grep -En '#include "(forward|kv_cache|attention|kernels|cpu|threadpool)\.h"|<pthreadpool\.h>' \
	compute/compute.h; then
	echo "compute.h includes a CPU header"; fail=1
fi
echo "layering: $files files, $edges engine includes checked"
exit $fail
