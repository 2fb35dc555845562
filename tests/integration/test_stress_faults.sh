#!/usr/bin/env bash
# Fault matrix (tests/stress/faults.py): SIGTERM during 8 streams, SIGKILL
# and restart under load, a truncated model, convert/quantize/synth to a
# full disk, a tiny KV cache.
set -eu
BUILD=$BUILD /usr/bin/python3 "$ROOT/tests/stress/faults.py" --streams 8
