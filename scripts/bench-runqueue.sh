#!/usr/bin/env bash
# bench-runqueue.sh: what the run-queue evidence of a slow second costs, beside the field's usual
# tool for it. iodig reads each sampled process's threads' run delay from the scheduler's own
# accounting (/proc/PID/task/*/schedstat) once a second; libbpf-tools' runqlat (Debian package
# libbpf-tools, installed here when missing) runs BPF programs at every wakeup and context
# switch. Under the same load (a process of THREADS threads, like a Cassandra node, and a
# pipe ping-pong making context switches), prints iodig's CPU per reading (= per second at 1 Hz)
# and runqlat's BPF time per scheduler event and per second, from the kernel's BPF statistics.
#
# Usage (root: BPF statistics): scripts/bench-runqueue.sh
#   THREADS=300    threads of the sampled process
#   READINGS=2000  readings timed
#   SECS=10        seconds runqlat runs
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=${THREADS:-300}
READINGS=${READINGS:-2000}
SECS=${SECS:-10}
[[ $(id -u) == 0 ]] || { echo "bench-runqueue.sh: run as root (BPF statistics)" >&2; exit 3; }
command -v runqlat >/dev/null || [[ -x /usr/sbin/runqlat ]] || {
  echo "bench-runqueue.sh: installing libbpf-tools for runqlat" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libbpf-tools >/dev/null
}
RUNQLAT=$(command -v runqlat || echo /usr/sbin/runqlat)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p iodig-sysstat --example run_queue_cost
cost=$CARGO_TARGET_DIR/release/examples/run_queue_cost

pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; sysctl -q kernel.bpf_stats_enabled=0 || true; }
trap cleanup EXIT
python3 -c "
import threading, time
for _ in range($THREADS - 1):
    threading.Thread(target=time.sleep, args=(1e6,), daemon=True).start()
time.sleep(1e6)" &
sampled=$!
pids+=("$sampled")
# Context switches: two processes handing a byte back and forth through two pipes.
# The child closes the ends it does not use, so it sees end-of-file and exits with its parent.
python3 -c "
import os
a, b = os.pipe(); c, d = os.pipe()
if os.fork() == 0:
    os.close(b); os.close(c)
    while os.read(a, 1):
        os.write(d, b'x')
    os._exit(0)
os.close(a); os.close(d)
while True:
    os.write(b, b'x'); os.read(c, 1)" &
pids+=("$!")
sleep 2
ctxt() { awk '/^ctxt/ {print $2}' /proc/stat; }
c0=$(ctxt); sleep 2; c1=$(ctxt)
cs_per_s=$(( (c1 - c0) / 2 ))

ours=$("$cost" "$sampled" "$READINGS")

sysctl -q kernel.bpf_stats_enabled=1
"$RUNQLAT" "$SECS" 1 >/dev/null &
rq=$!
sleep $((SECS - 1))
stats=$(bpftool -j prog show | python3 -c "
import json, sys
# runqlat's programs, by their names (bpftool here does not list the owning processes).
names = {'sched_wakeup', 'sched_wakeup_new', 'sched_switch', 'handle_sched_wakeup', 'handle_sched_wakeup_new', 'handle_sched_switch'}
progs = [p for p in json.load(sys.stdin) if p.get('name') in names]
print(json.dumps({'run_time_ns': sum(p.get('run_time_ns', 0) for p in progs),
                  'run_cnt': sum(p.get('run_cnt', 0) for p in progs),
                  'progs': [p.get('name') for p in progs]}))")
wait "$rq" || true

python3 - "$ours" "$stats" "$cs_per_s" "$SECS" <<'PY'
import json, sys
ours, stats, cs, secs = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]) - 1
print(f"load: {cs} context switches/s; sampled process: {ours['threads']} threads")
print(f"iodig (schedstat, 1 reading/s): {ours['cpu_ns_per_reading'] / 1000:.0f} µs CPU per reading "
      f"= {ours['cpu_ns_per_reading'] / 1e7:.3f} % of a core; 0 ns per scheduler event")
if stats['run_cnt']:
    per_event = stats['run_time_ns'] / stats['run_cnt']
    per_s = stats['run_time_ns'] / secs
    print(f"runqlat (BPF at every wakeup and switch, {', '.join(stats['progs'])}): {per_event:.0f} ns per event, "
          f"{stats['run_cnt'] / secs:.0f} events/s, {per_s / 1e7:.3f} % of a core in BPF")
else:
    print("runqlat: no BPF statistics read (did it attach?)")
PY
