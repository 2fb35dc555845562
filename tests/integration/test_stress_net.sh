#!/usr/bin/env bash
# Network abuse (tests/stress/netabuse.py): slowloris, 2,000 idle
# connections, oversized headers, pipelining, a never-reading stream.
set -eu
BUILD=$BUILD /usr/bin/python3 "$ROOT/tests/stress/netabuse.py" --slow 100 --idle 2000
