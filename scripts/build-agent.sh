#!/usr/bin/env bash
# Builds iodig's agent for hosts whose glibc is older than this machine's: `iodig agent` (the
# tracer, the samplers, the Cassandra node on its host) without RocksDB and the CQL driver,
# linked by zig against glibc GLIBC's symbols (default 2.28: AlmaLinux/RHEL 8, the single-node
# brief's database server), with libelf and zlib inside the binary. `run --observe` sends it to
# a host that cannot run iodig's own binary, when its floor (read from the file) fits that host
# (docs/remote.md, "The glibc floor").
#
#   scripts/build-agent.sh [GLIBC]      e.g. scripts/build-agent.sh 2.28
#
# Installs what it needs, once, under ~/.cache/iodig/agent-build (IODIG_AGENT_TOOLS): zig and
# cargo-zigbuild from PyPI (ziglang, cargo-zigbuild), in a venv of its own; libelf and zlib come
# from Debian's libelf-dev and zlib1g-dev (scripts/setup.sh installs them). Builds in
# $CARGO_TARGET_DIR/agent-build (its own directory: the cross build's C settings would
# otherwise rebuild the main build's C dependencies each time), and puts the binary beside
# iodig's release build as $CARGO_TARGET_DIR/release/iodig-agent, where iodig looks for it
# (IODIG_AGENT names another place). Says where it is, its glibc floor and how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "build-agent: $*" >&2; }
started=$SECONDS
since() { echo "$((SECONDS - $1))s"; }

glibc=${1:-2.28}
if [[ ! $glibc =~ ^2\.([0-9]+)$ ]] || ((BASH_REMATCH[1] < 17)); then
  say "GLIBC $glibc: give a glibc version 2.17 or newer (2.17 is the oldest Rust supports), as the host's \`getconf GNU_LIBC_VERSION\` says it, e.g. 2.28"
  exit 2
fi
arch=$(uname -m)
triple="$arch-unknown-linux-gnu"

# Versions known to build this tree together (2026-11-27).
ziglang_version=0.17.1
zigbuild_version=0.24.1
tools=${IODIG_AGENT_TOOLS:-$HOME/.cache/iodig/agent-build}
mkdir -p "$tools/bin"

# Both from PyPI, into one venv: zig itself (ziglang) and cargo-zigbuild as a prebuilt wheel
# (seconds, where `cargo install` compiles it for about 2 minutes on 2 cores).
if [[ ! -x $tools/bin/zig ]] || [[ $("$tools/bin/zig" version 2>/dev/null) != "$ziglang_version" ]] \
  || [[ ! -x $tools/bin/cargo-zigbuild ]] || [[ $("$tools/bin/cargo-zigbuild" --version 2>/dev/null) != "cargo-zigbuild $zigbuild_version" ]]; then
  say "installing zig $ziglang_version and cargo-zigbuild $zigbuild_version (PyPI) into $tools/venv"
  t=$SECONDS
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install -q "ziglang==$ziglang_version" "cargo-zigbuild==$zigbuild_version"
  zig=$("$tools/venv/bin/python" -c 'import ziglang, os; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
  ln -sfn "$zig" "$tools/bin/zig"
  ln -sfn "$tools/venv/bin/cargo-zigbuild" "$tools/bin/cargo-zigbuild"
  say "zig and cargo-zigbuild installed in $(since "$t")"
fi

# libbpf's headers and archives of libelf and zlib, in a directory of their own: zig compiles
# against its own glibc headers, so /usr/include is not searched (and must not be, or glibc
# 2.36's headers would leak in); libelf's and zlib's own headers are all libbpf needs of it.
deps="$tools/deps"
mkdir -p "$deps/include" "$deps/lib"
multiarch="$arch-linux-gnu"
for h in libelf.h gelf.h zlib.h zconf.h; do
  [[ -f /usr/include/$h ]] || { say "/usr/include/$h is missing: apt-get install libelf-dev zlib1g-dev (scripts/setup.sh)"; exit 1; }
  cp -u "/usr/include/$h" "$deps/include/"
done
for a in libelf.a libz.a; do
  [[ -f /usr/lib/$multiarch/$a ]] || { say "/usr/lib/$multiarch/$a is missing: apt-get install libelf-dev zlib1g-dev (scripts/setup.sh)"; exit 1; }
  cp -u "/usr/lib/$multiarch/$a" "$deps/lib/"
done

target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target/release"
target=$(cd "$target" && pwd)
say "building iodig agent for $triple, glibc $glibc (cold: 3 to 12 minutes on 2 cores, by how busy they are; then seconds)"
t=$SECONDS
PATH="$tools/bin:$PATH" \
  CARGO_TARGET_DIR="$target/agent-build" \
  LIBBPF_SYS_EXTRA_CFLAGS="-I$deps/include" \
  LIBBPF_SYS_LIBRARY_PATH="$deps/lib" \
  cargo zigbuild --release --no-default-features \
  --features cassandra-host,iodig-iotrace/static-libelf \
  --target "$triple.$glibc"
built=$target/agent-build/$triple/release/iodig
out=$target/release/iodig-agent
cp "$built" "$out.tmp"
mv "$out.tmp" "$out"
took=$(since "$t")

# The floor as the binary states it (iodig reads the same version needs before sending it).
floor=$(objdump -T "$out" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)
symbols=$(objdump -T "$out" | awk -v v="($floor)" '$0 ~ /\*UND\*/ && index($0, v) {print $NF}' | sort -u | paste -sd, -)
libs=$(objdump -p "$out" | awk '/NEEDED/ {print $2}' | paste -sd' ' -)
newest=$(printf '%s\n%s\n' "${floor#GLIBC_}" "$glibc" | sort -V | tail -n 1)
if [[ $newest != "$glibc" ]]; then
  say "$out needs $floor, newer than the glibc $glibc asked for (for $symbols): a dependency binds a newer symbol"
  exit 1
fi
"$out" --version >/dev/null
say "built in $took (all $(since "$started")): $out ($(du -h "$out" | cut -f1))"
say "needs $floor (for $symbols); libraries: $libs"
say "iodig sends it to an --observe host whose glibc is older than its own floor and at least ${floor#GLIBC_}"
