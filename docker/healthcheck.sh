#!/bin/bash
# healthcheck.sh - Docker HEALTHCHECK: GET /health on the local emberd.
# The runtime image has no curl; bash's /dev/tcp is enough for one
# request. Exit 0 = healthy (200), 1 = unhealthy (503 while the model
# loads, no answer, anything else). /health needs no API key.
port=${EMBER_PORT:-8080}
case ${EMBER_HOST:-127.0.0.1} in
*:*) host=::1 ;;              # IPv6 address, e.g. ::
0.0.0.0 | 127.*) host=127.0.0.1 ;;
*) host=$EMBER_HOST ;;
esac

if ! { exec 3<>"/dev/tcp/$host/$port"; } 2>/dev/null; then
	echo "health: cannot connect to $host:$port" >&2
	exit 1
fi
# One write of the whole request (bash's printf may split it), and a peer
# that answers early and closes must not kill us with SIGPIPE.
trap '' PIPE
req=$'GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'
echo -n "$req" >&3 2>/dev/null
status=
IFS= read -r -t 4 status <&3
exec 3<&-
case $status in
"HTTP/1."?" 200 "*) exit 0 ;;
esac
echo "health: ${status:-no answer from $host:$port}" >&2
exit 1
