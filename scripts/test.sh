#!/usr/bin/env bash
# The whole test suite: formatting, lints, then every unit and integration test in release mode
# (one build serves the tests, the benchmarks and the binary), then the fuzz targets for a
# bounded time each (scripts/fuzz.sh). Tests that trace need root; tests
# that need Cassandra start it themselves. Ends with one "N passed, N failed" line over all
# test binaries.
set -euo pipefail
cd "$(dirname "$0")/.."

# The SSH tests (`run --observe`) start their own sshd on 127.0.0.x with keys they make; one
# of them runs a "host" whose clock is off through libfaketime. Only the server binary and the
# library are needed: policy-rc.d keeps the package from starting a system sshd on port 22.
# The tracer's device tests make a btrfs on a loop device (mkfs.btrfs). The live metrics test
# scrapes a run with a Prometheus it starts itself (the package's service stays off). The report
# test takes a real screenshot of report.html with headless Chromium.
test_packages=()
[[ -x /usr/sbin/sshd ]] || test_packages+=(openssh-server)
dpkg-query -W -f='${Status}' libfaketime 2>/dev/null | grep -q "install ok installed" || test_packages+=(libfaketime)
command -v mkfs.btrfs >/dev/null || test_packages+=(btrfs-progs)
command -v prometheus >/dev/null || test_packages+=(prometheus)
command -v chromium >/dev/null || test_packages+=(chromium)
# The agent build for hosts with an older glibc (scripts/build-agent.sh) puts zig and
# cargo-zigbuild from PyPI in a venv of its own.
python3 -c 'import ensurepip' 2>/dev/null || test_packages+=(python3-venv)
if ((${#test_packages[@]})); then
  echo "test: installing ${test_packages[*]} for the SSH, device and report tests (no system service is started)" >&2
  sudo_cmd=()
  [[ $(id -u) -ne 0 ]] && sudo_cmd=(sudo)
  made_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' | "${sudo_cmd[@]}" tee /usr/sbin/policy-rc.d >/dev/null
    "${sudo_cmd[@]}" chmod 755 /usr/sbin/policy-rc.d
    made_policy=1
  fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${test_packages[@]}" >/dev/null
  if ((made_policy)); then "${sudo_cmd[@]}" rm -f /usr/sbin/policy-rc.d; fi
fi
cargo fmt --all -- --check
cargo clippy --release --workspace --all-targets -- -D warnings
# The agent iodig sends to a glibc 2.28 host (seconds once built, about 3 minutes cold): the SSH
# test that sends it must find it, not pass without it.
scripts/build-agent.sh 2.28
export IODIG_REQUIRE_AGENT_BUILD=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --release --workspace --no-fail-fast -- --test-threads=2 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
passed=$(grep -Eo '^test result: .* ([0-9]+) passed' "$log" | grep -Eo '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
failed=$(grep -Eo '^test result: .* ([0-9]+) failed' "$log" | grep -Eo '[0-9]+ failed' | awk '{s+=$1} END {print s+0}')
echo "tests: $passed passed, $failed failed"
# Every reader of user input and of run directories, fuzzed 60 s each (kept crashes replay above).
fuzz_status=0
scripts/fuzz.sh "${IODIG_FUZZ_SECONDS:-60}" || fuzz_status=$?
if ((status == 0)); then status=$fuzz_status; fi
exit "$status"
