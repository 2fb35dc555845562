#!/bin/sh
# Runs llama.cpp's llama-bench and `ember bench` on the same files, one after
# the other per type, so that both see the same memory bandwidth (it moves by
# the hour on a shared host).
#
#   LLAMA_BENCH=/path/to/llama-bench bench/vs_llamacpp.sh
#
# Env: TYPES (default "q4_0 q8_0 f16"; also llama.cpp presets like q4_k_m),
# MODELS_DIR (default /tmp; files tl-TYPE.gguf, made here by `ember synth`
# (presets: synth f16, then `ember quantize -q`) when missing), EMBER_FIRST=1 to run
# Ember before and after llama.cpp, PP and TG the prompt and generated
# token counts (default 512 and 128; PP=0 times decode alone), REPS the
# repetitions (default 3). llama.cpp is not part of Ember: build it
# yourself (bench/RESULTS.md says which release and flags were used).
set -eu
: "${LLAMA_BENCH:?set LLAMA_BENCH to a llama-bench binary}"
[ -x "$LLAMA_BENCH" ] || { echo "vs_llamacpp: $LLAMA_BENCH is not executable" >&2; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
ember=$root/build/ember
dir=${MODELS_DIR:-/tmp}
pp=${PP:-512}
tg=${TG:-128}
reps=${REPS:-3}
[ -x "$ember" ] || make -C "$root" build/ember >&2

ember_bench() {
	"$ember" bench -m "$1" -p "$pp" -n "$tg" -t 2 -r "$reps" 2>&1 | grep -E "pp$pp|tg$tg"
}

for t in ${TYPES:-q4_0 q8_0 f16}; do
	m=$dir/tl-$t.gguf
	if [ ! -f "$m" ]; then
		case $t in
		q4_k_m | q4_k_s | q5_k_m | q3_k_m | q2_k)
			# a llama.cpp preset: its mix, quantized from an F16 synth
			[ -f "$dir/tl-f16.gguf" ] ||
				"$ember" synth --preset tinyllama-1.1b --type f16 -o "$dir/tl-f16.gguf" >&2
			"$ember" quantize "$dir/tl-f16.gguf" "$m" -q "$t" >&2 ;;
		*) "$ember" synth --preset tinyllama-1.1b --type "$t" -o "$m" >&2 ;;
		esac
	fi
	echo "== $t $(date +%H:%M:%S)"
	if [ -n "${EMBER_FIRST:-}" ]; then ember_bench "$m"; fi
	"$LLAMA_BENCH" -m "$m" -t 2 -p "$pp" -n "$tg" -r "$reps" 2>&1 | grep -E "pp$pp|tg$tg"
	ember_bench "$m"
done
