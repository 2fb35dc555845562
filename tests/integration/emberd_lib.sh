# emberd_lib.sh - sourced by the integration scripts that start emberd
# themselves (not a test: run.sh runs only test_*): a free port and the
# wait for /health, written once.

# An unused TCP port on 127.0.0.1 (the kernel's pick; free again when the
# probe socket closes, so emberd can bind it).
free_port() {
	/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_health PORT PID LOG: returns once emberd on PORT answers /health
# (at most 60 s); prints LOG and exits 1 if PID dies first, or says
# "emberd not ready" and exits 1 if it never answers.
wait_health() {
	for _ in $(seq 1 600); do
		curl -sf "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
		kill -0 "$2" 2>/dev/null || { cat "$3"; exit 1; }
		sleep 0.1
	done
	curl -sf "http://127.0.0.1:$1/health" >/dev/null || { echo "emberd not ready"; exit 1; }
}
