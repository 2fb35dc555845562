#!/bin/sh
# entrypoint.sh - the container's entry point. It ends in `exec emberd`, so
# emberd is PID 1 and receives `docker stop`'s SIGTERM itself (graceful
# drain). emberd starts no children, so PID 1 has no zombies to reap.
#
#   docker run ember                         serve $EMBER_MODEL
#   docker run ember --threads=8             the same, with emberd flags
#   docker run ember ember inspect /models/model.gguf   run the tool instead
#
# Settings: /etc/ember/emberd.conf if present, then EMBER_* variables
# (EMBER_HOST=0.0.0.0 and EMBER_MODEL=/models/model.gguf by default), then
# flags.
set -eu

case "${1:-}" in
ember | emberd | sh | bash) exec "$@" ;;
esac

has_model_flag=no
for a in "$@"; do
	case $a in --model=*) has_model_flag=yes ;; esac
done
if [ $has_model_flag = no ] && [ -n "${EMBER_MODEL:-}" ] && [ ! -r "$EMBER_MODEL" ]; then
	echo "entrypoint: cannot read the model $EMBER_MODEL." >&2
	echo "  Mount a directory holding it on /models, e.g." >&2
	echo "  docker run -v \"\$PWD/models:/models:ro\" -e EMBER_MODEL=/models/NAME.gguf ..." >&2
	exit 2
fi

conf=/etc/ember/emberd.conf
if [ -r "$conf" ]; then
	set -- --config="$conf" "$@"
fi
exec /usr/bin/emberd "$@"
