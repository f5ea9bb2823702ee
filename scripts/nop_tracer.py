#!/usr/bin/env python3
"""nop_tracer.py: the floor under any block-IO tracer. Attaches a BPF program that does nothing
(`r0 = 0; exit`) to each named tracepoint as tp_btf, as iodig's tracer attaches its own, holds
them for SECS seconds, and prints a JSON document with the window the programs were attached
(`start_unix_ms`, `end_unix_ms`) in the shape bench-tracer-toggle.sh reads from `iodig trace
--json`. Whatever these programs cost is the kernel's dispatch to a BPF program on that
tracepoint, which no tracer body can go under.

Usage (root): scripts/nop_tracer.py SECS TRACEPOINT...   e.g. 5 block_io_start block_rq_complete
Needs bpftool (the tracepoints' BTF ids) and /sys/kernel/btf/vmlinux; no compiler.
"""
import ctypes
import json
import re
import subprocess
import sys
import time

SYS_BPF = 321  # x86_64
BPF_PROG_LOAD = 5
BPF_RAW_TRACEPOINT_OPEN = 17
BPF_PROG_TYPE_TRACING = 26
BPF_TRACE_RAW_TP = 23


class ProgLoad(ctypes.Structure):
    """The head of `union bpf_attr` for BPF_PROG_LOAD, up to attach_btf_id."""
    _fields_ = [
        ("prog_type", ctypes.c_uint32), ("insn_cnt", ctypes.c_uint32),
        ("insns", ctypes.c_uint64), ("license", ctypes.c_uint64),
        ("log_level", ctypes.c_uint32), ("log_size", ctypes.c_uint32),
        ("log_buf", ctypes.c_uint64), ("kern_version", ctypes.c_uint32),
        ("prog_flags", ctypes.c_uint32), ("prog_name", ctypes.c_char * 16),
        ("prog_ifindex", ctypes.c_uint32), ("expected_attach_type", ctypes.c_uint32),
        ("prog_btf_fd", ctypes.c_uint32), ("func_info_rec_size", ctypes.c_uint32),
        ("func_info", ctypes.c_uint64), ("func_info_cnt", ctypes.c_uint32),
        ("line_info_rec_size", ctypes.c_uint32), ("line_info", ctypes.c_uint64),
        ("line_info_cnt", ctypes.c_uint32), ("attach_btf_id", ctypes.c_uint32),
        ("_rest", ctypes.c_uint8 * 64),
    ]


class RawTpOpen(ctypes.Structure):
    _fields_ = [("name", ctypes.c_uint64), ("prog_fd", ctypes.c_uint32),
                ("_pad", ctypes.c_uint32), ("cookie", ctypes.c_uint64)]


libc = ctypes.CDLL(None, use_errno=True)


def bpf(cmd, attr):
    fd = libc.syscall(SYS_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"bpf command {cmd}")
    return fd


def btf_ids():
    """The BTF id of every `btf_trace_<tracepoint>` typedef of the running kernel."""
    out = subprocess.run(["bpftool", "btf", "dump", "file", "/sys/kernel/btf/vmlinux"],
                         check=True, capture_output=True, text=True).stdout
    return {m.group(2): int(m.group(1))
            for m in re.finditer(r"^\[(\d+)\] TYPEDEF 'btf_trace_(\w+)'", out, re.M)}


def attach_nop(tracepoint, btf_id):
    # r0 = 0 (BPF_ALU64 | BPF_MOV | BPF_K), exit (BPF_JMP | BPF_EXIT)
    insns = (ctypes.c_uint64 * 2)(0xB7, 0x95)
    lic = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(4096)
    a = ProgLoad(prog_type=BPF_PROG_TYPE_TRACING, insn_cnt=2,
                 insns=ctypes.addressof(insns), license=ctypes.addressof(lic),
                 log_level=1, log_size=len(log), log_buf=ctypes.addressof(log),
                 prog_name=b"nop", expected_attach_type=BPF_TRACE_RAW_TP,
                 attach_btf_id=btf_id)
    try:
        prog = bpf(BPF_PROG_LOAD, a)
    except OSError as e:
        sys.exit(f"nop_tracer.py: {tracepoint}: the kernel refused the program ({e}): "
                 f"{log.value.decode(errors='replace')}")
    return prog, bpf(BPF_RAW_TRACEPOINT_OPEN, RawTpOpen(prog_fd=prog))


def usage_error(msg):
    print(msg, file=sys.stderr)
    sys.exit(2)


def main():
    if len(sys.argv) < 3:
        usage_error(__doc__.strip().split("\n\n")[1])
    secs = float(sys.argv[1])
    ids = btf_ids()
    missing = [tp for tp in sys.argv[2:] if tp not in ids]
    if missing:
        usage_error(f"nop_tracer.py: no tracepoint {', '.join(missing)} in this kernel's BTF "
                 f"(block ones here: {', '.join(sorted(t for t in ids if t.startswith('block_')))})")
    # The fds stay open while the programs should stay attached; the kernel detaches at exit.
    fds = [attach_nop(tp, ids[tp]) for tp in sys.argv[2:]]
    start = int(time.time() * 1000)
    time.sleep(secs)
    end = int(time.time() * 1000)
    print(json.dumps({"start_unix_ms": start, "end_unix_ms": end, "programs": sys.argv[2:],
                      "attached_fds": len(fds), "self_check": {"lost_events": 0}}))


if __name__ == "__main__":
    main()
