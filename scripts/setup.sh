#!/usr/bin/env bash
# Sets up a fresh Debian machine for iodig and builds it once: a C/C++ toolchain with libclang
# (RocksDB bindings, BPF programs, and the C/C++ dependencies), libelf/zlib (libbpf), libssl
# (TLS to Cassandra), bpftool, fio (tracer benchmark), Java + Maven (real Apache Cassandra)
# from Debian's packages, then `cargo build --release`, which the
# README's run command and the test command both reuse. Idempotent: installs only what is
# missing, and a built tree rebuilds in seconds. Says what it does and how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup: $*" >&2; }
started=$SECONDS
since() { echo "$((SECONDS - $1))s"; }

packages=(clang libclang-dev libelf-dev zlib1g-dev libssl-dev pkg-config bpftool fio)
if [[ -f scripts/setup-deps.txt ]]; then
  while read -r p; do
    [[ -n "$p" && "$p" != \#* && " ${packages[*]} " != *" $p "* ]] && packages+=("$p")
  done < scripts/setup-deps.txt
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  say "installing ${#missing[@]} Debian packages (${missing[*]}); usually under a minute"
  t=$SECONDS
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
  say "packages installed in $(since "$t")"
fi

command -v cargo >/dev/null || { say "cargo not found; install Rust (rustup) first"; exit 1; }

target=${CARGO_TARGET_DIR:-target}
if [[ ! -x $target/release/iodig ]]; then
  say "building iodig once (release): 10 to 16 minutes on 2 cores, most of it RocksDB's C++;"
  say "later builds take seconds. A lighter CQL-only client: cargo build --release --no-default-features --features cassandra"
fi
t=$SECONDS
# On a terminal cargo draws its own progress bar; in CI it prints one line per crate.
cargo build --release
say "iodig built in $(since "$t") (setup $(since "$started") in all): $target/release/iodig"
