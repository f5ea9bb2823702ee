#!/usr/bin/env bash
# bench-remote.sh: what `--observe` costs the observed host. A real sshd on 127.0.0.1 (keys made
# here), fio holding 4 KiB random reads at a fixed rate (10k IOPS by default) on a loop device,
# and an `iodig run --db basic --observe 127.0.0.1 --device LOOP` step of SECONDS: prints the
# agent's CPU time as % of one CPU over the step (from /proc/PID/stat, sampled at its end) and the
# bytes the agent sent back per node-minute (the step's node files, as compact JSON, which is
# what travels).
#
# Usage (root): scripts/bench-remote.sh [SECONDS] [IOPS]
#   IODIG=path/to/iodig   (default target/release/iodig)
set -euo pipefail

SECS=${1:-60}
IOPS=${2:-10000}
IODIG=${IODIG:-target/release/iodig}
[[ $(id -u) == 0 ]] || { echo "bench-remote.sh: run as root" >&2; exit 3; }
[[ -x /usr/sbin/sshd ]] || { echo "bench-remote.sh: /usr/sbin/sshd missing (apt-get install openssh-server)" >&2; exit 2; }
[[ -x $IODIG ]] || { echo "bench-remote.sh: $IODIG not found; cargo build --release or set IODIG" >&2; exit 2; }

work=$(mktemp -d /var/tmp/iodig-bench-remote.XXXXXX)
sshd_pid=""; fio_pid=""; loopdev=""
cleanup() {
    set +e
    if [[ -n $fio_pid ]]; then kill "$fio_pid" 2>/dev/null; wait "$fio_pid" 2>/dev/null; fi
    if [[ -n $sshd_pid ]]; then kill "$sshd_pid" 2>/dev/null; wait "$sshd_pid" 2>/dev/null; fi
    if [[ -n $loopdev ]]; then losetup -d "$loopdev"; fi
    rm -rf "$work"
}
trap cleanup EXIT

ssh-keygen -q -t ed25519 -N '' -f "$work/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$work/client_key"
cp "$work/client_key.pub" "$work/authorized_keys"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$work/sshd_config" <<CFG
ListenAddress 127.0.0.1:$port
HostKey $work/host_key
AuthorizedKeysFile $work/authorized_keys
PidFile $work/sshd.pid
StrictModes no
PasswordAuthentication no
UsePAM no
LogLevel ERROR
CFG
cat > "$work/ssh_config" <<CFG
Host 127.0.0.1
  Port $port
  User root
  IdentityFile $work/client_key
  IdentitiesOnly yes
  StrictHostKeyChecking no
  UserKnownHostsFile /dev/null
  LogLevel ERROR
CFG
mkdir -p /run/sshd
/usr/sbin/sshd -D -e -f "$work/sshd_config" & sshd_pid=$!

dd if=/dev/urandom of="$work/disk.img" bs=1M count=512 status=none
loopdev=$(losetup -f --show "$work/disk.img")
fio --name=r --filename="$loopdev" --rw=randread --bs=4k --direct=1 --ioengine=libaio \
    --iodepth=8 --rate_iops="$IOPS" --time_based --runtime=$((SECS + 30)) --output=/dev/null &
fio_pid=$!
sleep 2

"$IODIG" run --db basic -P workloadc -p recordcount=100 --threads 1 --duration "${SECS}s" \
    --warmup 0s --device "${loopdev#/dev/}" --observe 127.0.0.1 -p "ssh.config=$work/ssh_config" \
    --out "$work/runs" >/dev/null 2>"$work/stderr" &
run_pid=$!
# The agent of the run step: the newest `iodig-<hash> agent` process.
agent=""
for _ in $(seq 1 600); do
    agent=$(pgrep -nf '\.cache/iodig/bin/iodig-[0-9a-f]+ agent' || true)
    [[ -n $agent ]] && break
    sleep 0.1
done
[[ -n $agent ]] || { cat "$work/stderr" >&2; echo "bench-remote.sh: no agent started" >&2; exit 1; }
ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$agent/stat" 2>/dev/null || echo 0; }
t0=$(date +%s.%N); c0=$(cpu_ticks)
last_c=$c0; last_t=$t0
while kill -0 "$run_pid" 2>/dev/null; do
    c=$(cpu_ticks); [[ $c != 0 ]] && { last_c=$c; last_t=$(date +%s.%N); }
    sleep 0.5
done
wait "$run_pid" || { cat "$work/stderr" >&2; exit 1; }
run_dir=$(sed -n 's/^results: //p' "$work/stderr")
python3 - "$run_dir" "$c0" "$last_c" "$t0" "$last_t" "$ticks" "$SECS" "$IOPS" <<'PY'
import json, os, sys
run_dir, c0, c1, t0, t1, ticks, secs, iops = sys.argv[1:]
run = json.load(open(os.path.join(run_dir, "run.json")))
step = [s for s in run["steps"] if s["phase"] == "run"][-1]
node = step["nodes"][0]
sent = 0
for f in ("trace.json", "sys.json", "db-events.json"):
    p = os.path.join(run_dir, node["dir"], f)
    if os.path.exists(p):
        sent += len(json.dumps(json.load(open(p)), separators=(",", ":")))
wall = float(t1) - float(t0)
cpu = (float(c1) - float(c0)) / float(ticks)
minutes = step["runtime_ms"] / 60000
trace = json.load(open(os.path.join(run_dir, node["dir"], "trace.json")))
ios = sum(d["ops"]["read"]["ios"] for d in trace["devices"])
print(f"observed step: {step['runtime_ms']/1000:.1f} s, {ios / (step['runtime_ms']/1000):.0f} read IOPS traced on the host")
print(f"agent CPU: {cpu:.2f} s over {wall:.1f} s = {100*cpu/wall:.2f} % of one CPU")
print(f"sent back: {sent/1e6:.3f} MB = {sent/1e6/minutes:.3f} MB per node-minute")
print(f"clock: offset {node['clock_before']['offset_ms']:+.3f} ms, rtt {node['clock_before']['rtt_ms']:.3f} ms")
PY
