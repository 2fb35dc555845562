#!/usr/bin/env bash
# Short soak (tests/stress/soak.py): 8 clients on 2 slots for 20 s over the
# request mix, with cut streams and 429s; counts, RSS, fds and slots checked.
set -eu
BUILD=$BUILD /usr/bin/python3 "$ROOT/tests/stress/soak.py" --duration 20 --clients 8 --slots 2
