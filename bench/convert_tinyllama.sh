#!/usr/bin/env bash
# Measures `ember convert` on a TinyLlama-1.1B-sized checkpoint (synthesized,
# ~2.2 GB F16): peak RSS and wall time from /usr/bin/time -v. Writes to
# $TMP (default /tmp) and deletes everything afterwards. Not part of
# `make test` (slow). Usage: bench/convert_tinyllama.sh [RECIPE] [DTYPE]
set -eu
recipe=${1:-int4}
dtype=${2:-F16}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMP:-/tmp}/ember-tinyllama-XXXXXX")
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 "$root/bench/synth_hf_checkpoint.py" "$work/hf" --dtype "$dtype" \
	--golden "$root/../shared/golden/llama/hf"
/usr/bin/time -v "$root/build/ember" convert "$work/hf" "$work/out.gguf" -q "$recipe" \
	2>"$work/time"
grep -E 'Elapsed|Maximum resident|User time|System time' "$work/time"
ls -l "$work/hf/model.safetensors" "$work/out.gguf"
