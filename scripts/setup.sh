#!/usr/bin/env bash
# Installs what iodig needs to build, test and trace on a fresh Debian machine: a C/C++ toolchain
# with libclang (RocksDB bindings, BPF programs), libelf/zlib (libbpf), bpftool, fio (tracer
# benchmark), Java + Maven (real Apache Cassandra). Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(clang libclang-dev libelf-dev zlib1g-dev pkg-config bpftool fio)
if [[ -f scripts/setup-deps.txt ]]; then
  while read -r p; do [[ -n "$p" && "$p" != \#* ]] && packages+=("$p"); done < scripts/setup-deps.txt
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
fi

command -v cargo >/dev/null || { echo "setup: cargo not found; install Rust (rustup) first" >&2; exit 1; }
