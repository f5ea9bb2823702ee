#!/usr/bin/env bash
# bench-jvm-probe.sh: what watching a JVM's pauses costs. iodig attaches uprobes to HotSpot's
# own USDT probes (hs_private:safepoint__begin/end, hotspot:gc__begin/end), which HotSpot passes
# once per pause, not per operation. Under a JVM that allocates hard (young collections many
# times a second, like a loaded Cassandra node), prints the probe's BPF runs per second and per
# pause, its BPF time from the kernel's statistics, and the JVM's own work per second with the
# probe attached and without, the two runs side by side.
#
# Usage (root: uprobes and BPF statistics): scripts/bench-jvm-probe.sh
#   SECS=20    seconds each run watches
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-20}
[[ $(id -u) == 0 ]] || { echo "bench-jvm-probe.sh: run as root (uprobes, BPF statistics)" >&2; exit 3; }
command -v java >/dev/null || { echo "bench-jvm-probe.sh: needs java (scripts/setup.sh installs it)" >&2; exit 3; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p iodig-jvm --example watch_pauses
watch=$CARGO_TARGET_DIR/release/examples/watch_pauses

dir=$(mktemp -d)
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; sysctl -q kernel.bpf_stats_enabled=0 || true; rm -rf "$dir"; }
trap cleanup EXIT
# Allocates short-lived arrays and keeps a window of them alive, printing how many it made in
# each second: young collections several times a second, each a safepoint.
cat > "$dir/Churn.java" <<'JAVA'
public class Churn {
    public static void main(String[] a) throws Exception {
        Object[] window = new Object[50_000];
        long made = 0, next = System.currentTimeMillis() + 1000;
        for (int i = 0; ; i++) {
            window[i % window.length] = new long[64];
            made++;
            if ((i & 1023) == 0 && System.currentTimeMillis() >= next) {
                System.out.println(made);
                made = 0;
                next += 1000;
            }
        }
    }
}
JAVA
# One run: the JVM's arrays made per second (median of the run's seconds), and the probe's
# figures when $1 is "probe".
run() {
  java -Xmx512m -Xms512m -XX:+UseG1GC "$dir/Churn.java" > "$dir/out" &
  local jvm=$!
  pids+=("$jvm")
  sleep 4 # compiled, warmed up
  local from
  from=$(wc -l < "$dir/out")
  if [[ $1 == probe ]]; then
    "$watch" "$jvm" "$SECS" > "$dir/probe.json"
  else
    sleep "$SECS"
  fi
  kill "$jvm"; wait "$jvm" 2>/dev/null || true
  tail -n +"$((from + 1))" "$dir/out" | head -n "$SECS" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}
sysctl -q kernel.bpf_stats_enabled=1
without=$(run plain)
with=$(run probe)
python3 - "$without" "$with" "$(cat "$dir/probe.json")" <<'PY'
import json, sys
without, with_, p = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
secs = p['secs']
print(f"JVM: {with_ / 1e6:.2f} M arrays/s with the probe, {without / 1e6:.2f} M without (ratio {with_ / without:.3f})")
print(f"pauses seen: {p['safepoints']} safepoints ({p['safepoints'] / secs:.1f}/s), {p['gcs']} collections, "
      f"{p['stopped_ms']:.0f} ms stopped in {secs:.0f} s")
if p['bpf_run_cnt']:
    print(f"probe: {p['bpf_run_cnt'] / secs:.1f} BPF runs/s ({p['bpf_run_cnt'] / max(1, p['safepoints'] + p['gcs']):.1f} per pause), "
          f"{p['bpf_run_time_ns'] / p['bpf_run_cnt']:.0f} ns per run, "
          f"{p['bpf_run_time_ns'] / secs / 1e7:.5f} % of a core in BPF")
else:
    print("probe: no BPF statistics read")
PY
