#!/usr/bin/env bash
# Ember's Jinja interpreter (`ember template`) against the reference renderer
# @huggingface/jinja (npm, pinned in tests/clients/package.json) on every
# template in ../shared/chat-templates, several conversations each, byte for
# byte (tests/clients/chat_templates.mjs). No node/npm or a failed install is
# a FAILURE, not a skip: the reference is the claim.
set -eu
: "${BUILD:?}" "${ROOT:?}" "${TMPDIR:?}" "${SHARED:?}"
command -v node >/dev/null || { echo "FAIL: node not on PATH (make deps installs it)"; exit 1; }
command -v npm >/dev/null || { echo "FAIL: npm not on PATH (make deps installs it)"; exit 1; }

clients=$TMPDIR/clients
mkdir -p "$clients"
cp "$ROOT/tests/clients/package.json" "$ROOT/tests/clients/chat_templates.mjs" "$clients/"
(cd "$clients" && timeout 240 npm install --no-audit --no-fund --loglevel=error) ||
	{ echo "FAIL: npm install failed"; exit 1; }
(cd "$clients" && TZ=UTC LC_ALL=C timeout 240 node chat_templates.mjs "$BUILD/ember" "$SHARED/chat-templates")
