#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every unit and integration test in release mode
# (one build serves the tests, the benchmarks and the binary). Tests that trace need root; tests
# that need Cassandra start it themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings
cargo test --release --workspace --no-fail-fast -- --test-threads=2
