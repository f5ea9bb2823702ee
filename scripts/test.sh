#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every unit and integration test in release mode
# (one build serves the tests, the benchmarks and the binary). Tests that trace need root; tests
# that need Cassandra start it themselves. Ends with one "N passed, N failed" line over all
# test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --release --workspace --no-fail-fast -- --test-threads=2 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(grep -Eo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '^test result: .* ([0-9]+) failed' "$log" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
echo "tests: $passed passed, $failed failed"
exit "$status"
