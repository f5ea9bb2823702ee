#!/usr/bin/env bash
# Fuzzes every reader of user input and of run directories (fuzz/, cargo-fuzz on nightly) for a
# bounded time each: scripts/fuzz.sh [SECONDS_PER_TARGET] (default 60). Each target starts from
# fuzz/seeds/<target> and a corpus kept between runs; an input that crashes a target is copied
# into fuzz/regressions/<target>/, where the ordinary test suite replays it on stable
# (crates/fuzzing/tests/regressions.rs), and the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cache=${IODIG_FUZZ_CACHE:-$HOME/.cache/iodig}
if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: SKIPPED: no nightly Rust toolchain (cargo-fuzz needs one: rustup toolchain install nightly); the kept inputs still replay in the tests" >&2
  exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz from crates.io (about 30 s, once)" >&2
  cargo install cargo-fuzz --locked --quiet
fi
export CARGO_TARGET_DIR="$cache/fuzz-target"
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^iodig-fuzz$')
echo "fuzz: building the targets (about 3 minutes cold)" >&2
(cd fuzz && cargo +nightly fuzz build -O --sanitizer none >/dev/null 2>&1) || (cd fuzz && cargo +nightly fuzz build -O --sanitizer none)
# One target per core at a time: the wall time is half the sum on this project's 2-core CI.
fuzz_one() {
  local t=$1 corpus="$cache/fuzz-corpus/$1" log
  mkdir -p "$corpus" "fuzz/regressions/$t"
  rm -rf "fuzz/artifacts/$t"
  log=$(mktemp)
  if (cd fuzz && cargo +nightly fuzz run -O --sanitizer none "$t" "$corpus" "seeds/$t" -- \
      -max_total_time="$seconds" -max_len=65536 -len_control=0 -print_final_stats=1) >"$log" 2>&1; then
    runs=$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' "$log")
    echo "fuzz: $t: ${runs:-?} inputs in $seconds s, no crash" >&2
    rm -f "$log"
    return 0
  fi
  grep -E "panicked|ERROR|SUMMARY" "$log" | head -5 >&2 || true
  for a in fuzz/artifacts/"$t"/*; do
    [[ -f $a ]] || continue
    cp "$a" "fuzz/regressions/$t/"
    echo "fuzz: $t CRASHED; the input is kept as fuzz/regressions/$t/$(basename "$a")" >&2
  done
  rm -f "$log"
  return 1
}
jobs_at_once=$(nproc 2>/dev/null || echo 2)
failed=0
pids=()
for t in $targets; do
  fuzz_one "$t" &
  pids+=($!)
  if ((${#pids[@]} >= jobs_at_once)); then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || failed=1; done
exit "$failed"
