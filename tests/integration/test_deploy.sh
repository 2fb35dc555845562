#!/usr/bin/env bash
# Deployment files: `make install` lays out what a package needs, the
# systemd units pass `systemd-analyze verify` and keep their sandbox
# (exposure at most 2.0), the man pages render without warnings, and the
# Dockerfile's runtime stage provides every shared library the binaries load
# and runs as a non-root user with a HEALTHCHECK. The container probe and
# entry point run here against stand-in servers.
#
# docker/compose.yaml and docker/haproxy.cfg agree (one server and one
# session route per replica) and haproxy -c accepts the file.
#
# Not here: building and running the image is `make image-test` (podman;
# minutes, so not in make test); the replicas behind HAProxy run in
# test_scaleout.py. Starting the units under systemd needs systemd as PID 1:
# the test says when it is not.
set -eu
cd "$ROOT"
fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; }

# ---- make install ------------------------------------------------------------
# A sub-make must not inherit the jobserver or the variables of the make
# that runs the tests; BUILD is passed on so an ASan run installs its own
# (already built) binaries.
submake() { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory BUILD="$BUILD" "$@"; }

dest=$TMPDIR/root
submake install DESTDIR="$dest" PREFIX=/usr >"$TMPDIR/install.log"
for f in usr/bin/emberd usr/bin/ember lib/systemd/system/emberd.service \
	lib/systemd/system/emberd.socket usr/share/man/man8/emberd.8 \
	usr/share/man/man1/ember.1; do
	[ -f "$dest/$f" ] || fail "make install did not install /$f"
done
[ -x "$dest/usr/bin/emberd" ] && [ -x "$dest/usr/bin/ember" ] || fail "binaries not executable"
[ -d "$dest/var/lib/ember/models" ] || fail "no model directory"
cmp -s systemd/emberd.service "$dest/lib/systemd/system/emberd.service" ||
	fail "PREFIX=/usr must install the unit unchanged"
if [ -f conf/emberd.conf ]; then
	cmp -s conf/emberd.conf "$dest/etc/ember/emberd.conf" || fail "conf not installed"
	echo "# the admin's edit" >>"$dest/etc/ember/emberd.conf"
	submake install DESTDIR="$dest" PREFIX=/usr >/dev/null
	grep -q "the admin's edit" "$dest/etc/ember/emberd.conf" ||
		fail "make install overwrote an existing emberd.conf"
else
	skip "conf/emberd.conf is not in the tree yet: its install check is skipped"
	[ ! -e "$dest/etc/ember/emberd.conf" ] || fail "conf installed from nowhere"
fi
# Any other prefix keeps everything under it, and the units name it.
local_dest=$TMPDIR/local
submake install DESTDIR="$local_dest" PREFIX=/opt/ember >/dev/null
unit=$local_dest/opt/ember/lib/systemd/system/emberd.service
grep -q '^ExecStart=/opt/ember/bin/emberd --config=/opt/ember/etc/ember/emberd.conf$' "$unit" ||
	fail "PREFIX=/opt/ember: ExecStart not rewritten"
grep -q '^ReadOnlyPaths=-/opt/ember/var/lib/ember/models$' "$unit" || fail "model dir not rewritten"
[ -x "$local_dest/opt/ember/bin/emberd" ] || fail "PREFIX=/opt/ember: no binary"
echo "make install: ok"

# ---- systemd units -----------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
	# verify needs ExecStart's binary to exist: check copies of the
	# installed units that name the binary inside DESTDIR. It exits 0 on
	# unknown keys and bad values, so any output at all is a failure.
	units=$TMPDIR/units
	mkdir -p "$units"
	for u in emberd.service emberd.socket; do
		sed "s|/usr/bin/emberd|$dest/usr/bin/emberd|" "$dest/lib/systemd/system/$u" >"$units/$u"
	done
	verify() { MANPATH=$dest/usr/share/man systemd-analyze verify --man=yes "$@" 2>&1; }
	out=$(verify "$units/emberd.service" "$units/emberd.socket") || fail "verify: $out"
	[ -z "$out" ] || fail "systemd-analyze verify: $out"
	# ...and the check itself can fail:
	sed 's/^ProtectSystem=/ProtectSystm=/' "$units/emberd.service" >"$units/bad.service"
	[ -n "$(verify "$units/bad.service")" ] || fail "verify missed a misspelt key"
	echo "systemd-analyze verify: ok"

	sec=$(systemd-analyze security --offline=yes --no-pager "$units/emberd.service" 2>&1) ||
		fail "security: $sec"
	grep 'Overall exposure level' <<<"$sec"
	systemd-analyze security --offline=yes --threshold=20 "$units/emberd.service" >/dev/null 2>&1 ||
		fail "emberd.service exposure rose above 2.0"
	for key in Type=notify NotifyAccess=main WatchdogSec=30s DynamicUser=yes; do
		grep -qx "$key" systemd/emberd.service || fail "emberd.service lacks $key"
	done
	grep -qx 'ListenStream=127.0.0.1:8080' systemd/emberd.socket || fail "socket address"
else
	skip "systemd-analyze not installed: units not verified"
fi
pid1=$(cat /proc/1/comm 2>/dev/null || echo unknown)
if [ "$pid1" != systemd ]; then
	skip "systemd is not PID 1 here (PID 1 is '$pid1'): emberd.service is not started under systemd-run; the checks above are static"
else
	skip "systemd is PID 1, but this test does not start units on the machine it runs on: emberd.service is checked statically"
fi

# ---- man pages -----------------------------------------------------------------
for m in man/emberd.8 man/ember.1; do
	w=$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$m" 2>&1) || fail "$m: $w"
	[ -z "$w" ] || fail "$m: $w"
done
# Every key emberd knows is documented (once emberd has --help).
if keys=$("$BUILD/emberd" --help 2>/dev/null | sed -n 's/^  --\([a-z_0-9]*\)=.*/\1/p') && [ -n "$keys" ]; then
	for k in $keys; do
		grep -q "^\.BR $k " man/emberd.8 || fail "emberd.8 does not document key '$k'"
	done
	echo "man: all $(wc -w <<<"$keys") keys documented"
else
	skip "this emberd has no --help key list: man page keys not cross-checked"
fi

# ---- Dockerfile ----------------------------------------------------------------
echo "note: the image is built and run by 'make image-test' (podman), not here; the Dockerfile is checked statically"

# Makefile variables, without editing the Makefile.
printf 'print-%%:\n\t@echo $($*)\n' >"$TMPDIR/print.mk"
mkvar() { submake -f Makefile -f "$TMPDIR/print.mk" "print-$1"; }

# Shared libraries of the built binaries, plus those of a probe linked with
# every library the Makefile names (--no-as-needed), so a library the
# engine starts using later is already covered.
echo 'int main(void) { return 0; }' >"$TMPDIR/probe.c"
# shellcheck disable=SC2046
cc "$TMPDIR/probe.c" -o "$TMPDIR/probe" -Wl,--no-as-needed \
	$(mkvar LIBS_SERVER) $(mkvar LIBS_TOOLS) $(mkvar LIBS_ENGINE)
libs=$(for b in "$BUILD/emberd" "$BUILD/ember" "$TMPDIR/probe"; do ldd "$b"; done |
	awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
pkgs=$(for l in $libs; do
	p=$(dpkg -S "$l" 2>/dev/null || dpkg -S "$(readlink -f "$l")" 2>/dev/null) ||
		fail "no Debian package provides $l"
	echo "${p%%:*}"
done | sort -u)

MAKE_DEB_PKGS=$(mkvar DEB_PKGS) LIB_PKGS=$pkgs "$PYTHON" - <<'EOF'
import os, re, subprocess, sys

def stages(path):
    """Dockerfile -> list of stages, each a list of (INSTRUCTION, args)."""
    text = re.sub(r"\\\n", " ", open(path).read())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        word = word.upper()
        if word == "FROM":
            out.append([])
        if out:
            out[-1].append((word, rest.strip()))
    return out

def apt_installs(stage):
    pkgs = []
    for word, rest in stage:
        if word != "RUN":
            continue
        for cmd in re.split(r"&&|;", rest):
            toks = cmd.split()
            if "apt-get" in toks and "install" in toks:
                after = toks[toks.index("install") + 1:]
                pkgs += [t for t in after if not t.startswith("-")]
    return pkgs

def closure(roots):
    """The packages apt installs for `roots`: Depends and Pre-Depends,
    recursively, read from this machine's dpkg database (Debian 12 too)."""
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        r = subprocess.run(["dpkg-query", "-W", "-f=${Pre-Depends}, ${Depends}", p],
                           capture_output=True, text=True)
        if r.returncode != 0:
            if p in roots:
                sys.exit(f"FAIL: runtime package {p} is not installed here, "
                         "so its dependencies cannot be checked")
            continue  # a virtual package or an alternative not taken
        for dep in r.stdout.split(","):
            for alt in dep.split("|"):
                name = alt.strip().split(" ")[0].split(":")[0]
                if name:
                    todo.append(name)
    return seen

st = stages("Dockerfile")
if len(st) < 2:
    sys.exit("FAIL: Dockerfile is not multi-stage")
for s in st:
    if not s[0][1].startswith("debian:12-slim"):
        sys.exit(f"FAIL: stage FROM {s[0][1]}: want debian:12-slim")
build, runtime = st[0], st[-1]

# Build stage: the Makefile's DEB_PKGS minus what only the tests need.
test_only = {"check", "libsubunit-dev", "curl", "python3", "python3-numpy",
             "libvulkan-dev", "glslc", "mesa-vulkan-drivers", "vulkan-tools",
             "haproxy"}
want = set(os.environ["MAKE_DEB_PKGS"].split()) - test_only
have = set(apt_installs(build))
if want != have:
    sys.exit(f"FAIL: build stage installs {sorted(have)}; Makefile DEB_PKGS "
             f"without test-only ones is {sorted(want)}")
if not any(w == "RUN" and "make" in r.split() for w, r in build):
    sys.exit("FAIL: build stage does not run make")

# Runtime stage: every library's package is installed (directly or as a
# dependency); libc6 comes with the base image. Sanitizer runtimes only
# appear in ASan builds, never in the image.
runtime_pkgs = apt_installs(runtime)
provided = closure(runtime_pkgs) | {"libc6"}
need = [p for p in os.environ["LIB_PKGS"].split()
        if not re.match(r"lib(a|ub|l|t)san\d*$", p)]
missing = [p for p in need if p not in provided]
if missing:
    sys.exit(f"FAIL: runtime stage lacks packages for {missing}")
print(f"runtime libraries: {' '.join(need)}")
print(f"  all provided by: {' '.join(runtime_pkgs)}")
if any(p.endswith("-dev") or p in ("gcc", "g++", "make") for p in runtime_pkgs):
    sys.exit("FAIL: runtime stage installs build tools")

words = {w for w, _ in runtime}
users = [r for w, r in runtime if w == "USER"]
if not users or users[-1].split(":")[0] in ("root", "0"):
    sys.exit("FAIL: runtime stage does not end as a non-root USER")
hc = [r for w, r in runtime if w == "HEALTHCHECK"]
if not hc or "CMD" not in hc[-1].split():
    sys.exit("FAIL: runtime stage has no HEALTHCHECK CMD")
for w, arg in (("EXPOSE", "8080"), ("VOLUME", "/models")):
    if not any(x == w and arg in r.split() for x, r in runtime):
        sys.exit(f"FAIL: runtime stage lacks {w} {arg}")
env = " ".join(r for w, r in runtime if w == "ENV")
for kv in ("EMBER_HOST=0.0.0.0", "EMBER_MODEL=/models/model.gguf"):
    if kv not in env.split():
        sys.exit(f"FAIL: runtime stage lacks ENV {kv}")
if "ENTRYPOINT" not in words:
    sys.exit("FAIL: no ENTRYPOINT")
print("Dockerfile: ok")
EOF

# The scripts the image copies must be executable in the build context.
for s in docker/entrypoint.sh docker/healthcheck.sh; do
	[ -x "$s" ] || fail "$s is not executable"
	if git ls-files --error-unmatch "$s" >/dev/null 2>&1; then
		git ls-files -s "$s" | grep -q '^100755' || fail "$s is not mode 755 in git"
	fi
done
grep -q '^ *- *\.\./models:/models:ro' docker/compose.yaml || fail "compose: model volume"
grep -q 'EMBER_API_KEY' docker/compose.yaml || fail "compose: API key"
grep -q '127.0.0.1:8080:8080' docker/compose.yaml || fail "compose: port"

# ---- compose replicas <-> haproxy.cfg ------------------------------------------
# Every emberd service names its replica, and haproxy.cfg has its server and
# its session route; only HAProxy is published.
"$PYTHON" - <<'EOF'
import re, sys
import yaml
d = yaml.safe_load(open("docker/compose.yaml"))
cfg = open("docker/haproxy.cfg").read()
svcs = d["services"]
replicas = {n: s for n, s in svcs.items() if s.get("image") == "ember:latest"}
if len(replicas) < 2:
    sys.exit(f"FAIL: compose has {len(replicas)} emberd replicas, want >= 2")
ids = set()
for name, s in replicas.items():
    env = s.get("environment", {})
    rid = env.get("EMBER_REPLICA_ID")
    if rid != name:
        sys.exit(f"FAIL: service {name}: EMBER_REPLICA_ID {rid!r}, want {name!r}")
    if not re.fullmatch(r"[A-Za-z0-9_]{1,16}", rid):
        sys.exit(f"FAIL: {rid!r} is not a valid replica_id")
    ids.add(rid)
    if env.get("EMBER_FULL_STATUS") != "503":
        sys.exit(f"FAIL: {name}: EMBER_FULL_STATUS must be 503 (HAProxy 2.6 retries 503, not 429)")
    if s.get("ports"):
        sys.exit(f"FAIL: {name} publishes ports: only HAProxy should")
    for k in ("read_only", "cap_drop"):
        if not s.get(k):
            sys.exit(f"FAIL: {name} lacks {k}")
    if "/models:ro" not in " ".join(s.get("volumes", [])):
        sys.exit(f"FAIL: {name}: model volume")
servers = set(re.findall(r"^\s*server (\S+) (\S+):8080\s*$", cfg, re.M))
if servers != {(i, i) for i in ids}:
    sys.exit(f"FAIL: haproxy.cfg servers {sorted(servers)} != compose replicas {sorted(ids)}")
routes = set(re.findall(r"^\s*use-server (\S+) if \{ path_beg /v1/sessions/sess-(\S+)- \}", cfg, re.M))
if routes != {(i, i) for i in ids}:
    sys.exit(f"FAIL: haproxy.cfg session routes {sorted(routes)} != replicas {sorted(ids)}")
for need in ("balance leastconn", "option httpchk GET /health", "retry-on ",
             "option redispatch", "option http-buffer-request"):
    if need not in cfg:
        sys.exit(f"FAIL: haproxy.cfg lacks '{need}'")
hp = svcs.get("haproxy", {})
if "127.0.0.1:8080:8080" not in hp.get("ports", []):
    sys.exit("FAIL: the haproxy service must publish 127.0.0.1:8080")
if not any(v.startswith("./haproxy.cfg:") for v in hp.get("volumes", [])):
    sys.exit("FAIL: the haproxy service does not mount haproxy.cfg")
print(f"compose: replicas {' '.join(sorted(ids))}, each routed by haproxy.cfg")
EOF
command -v haproxy >/dev/null || fail "haproxy is not installed (make deps installs it)"
# The replicas' names resolve only inside compose: check it with loopback.
sed 's/ \(ember[0-9A-Za-z_]*\):8080$/ 127.0.0.1:8080/' docker/haproxy.cfg >"$TMPDIR/haproxy.cfg"
out=$(haproxy -c -f "$TMPDIR/haproxy.cfg" 2>&1) || fail "haproxy -c: $out"
echo "haproxy -c: ok"
"$PYTHON" -c 'import sys, yaml; yaml.safe_load(open(sys.argv[1]))' docker/compose.yaml 2>/dev/null ||
	{ "$PYTHON" -c 'import yaml' 2>/dev/null && fail "compose.yaml is not YAML"; }

# ---- the HEALTHCHECK probe against stand-in servers ---------------------------
# Each answers one request with the given status line and exits.
serve_once() {
	"$PYTHON" - "$1" "$2" <<'EOF' &
import socket, sys
status, portfile = sys.argv[1], sys.argv[2]
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(1)
open(portfile + ".tmp", "w").write(str(s.getsockname()[1]))
import os; os.rename(portfile + ".tmp", portfile)
s.settimeout(30)
c, _ = s.accept()
req = b""
while b"\r\n\r\n" not in req and len(req) < 4096:
    chunk = c.recv(4096)
    if not chunk:
        break
    req += chunk
req = req.decode()
ok = req.startswith("GET /health HTTP/1.1\r\n")
c.sendall((f"HTTP/1.1 {status if ok else '400 Bad Request'}\r\n"
           "Content-Length: 2\r\nConnection: close\r\n\r\n{}").encode())
c.close()
EOF
	while [ ! -s "$2" ]; do sleep 0.05; done
}
serve_once "200 OK" "$TMPDIR/p200"
EMBER_PORT=$(cat "$TMPDIR/p200") docker/healthcheck.sh || fail "probe: 200 is healthy"
serve_once "503 Service Unavailable" "$TMPDIR/p503"
if EMBER_PORT=$(cat "$TMPDIR/p503") docker/healthcheck.sh 2>/dev/null; then fail "probe: 503 is unhealthy"; fi
wait
# a closed port (the 200 server has exited)
if EMBER_PORT=$(cat "$TMPDIR/p200") docker/healthcheck.sh 2>/dev/null; then fail "probe: no server is unhealthy"; fi
echo "healthcheck probe: ok"

# ---- the entry point -------------------------------------------------------------
out=$(PATH=$BUILD:$PATH docker/entrypoint.sh ember --version) || fail "entrypoint: ember"
grep -q '^ember ' <<<"$out" || fail "entrypoint did not run the tool"
if out=$(EMBER_MODEL=$TMPDIR/none.gguf docker/entrypoint.sh 2>&1); then fail "entrypoint: missing model accepted"; fi
grep -q 'Mount a directory' <<<"$out" || fail "entrypoint: no hint for a missing model: $out"
echo "entrypoint: ok"
