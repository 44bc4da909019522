#!/usr/bin/env python3
"""Writes the seed corpus of each fuzz target into fuzz/corpus/<target>/:
well-formed inputs (a driver's real set-up sequence, block and vsock
requests as Linux sends them, the project's own profiles and catalogue) the
fuzzer then mutates. The byte layouts are those of fuzz/src/lib.rs."""
import os, struct, shutil

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.dirname(here)
DATA = 0x8_0000
NEXT, WRITE = 1, 2


def put(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def queue(descs, heads, size=16):
    """A hostile_queue() input: `size` descriptors (addr, len, flags, next),
    the number of pending heads, then the heads."""
    out = b""
    for i in range(size):
        addr, ln, flags, nxt = descs[i] if i < len(descs) else (0, 0, 0, 0)
        out += struct.pack("<IIHH", addr, ln, flags, nxt)
    out += struct.pack("<B", len(heads))
    out += b"".join(struct.pack("<H", h) for h in heads)
    return out


# virtio-blk: header in data, a data buffer, the status byte.
def blk(kind, sector, data_len, writable_data, payload=b""):
    hdr = struct.pack("<IIQ", kind, 0, sector)
    flags = NEXT | (WRITE if writable_data else 0)
    descs = [(DATA, 16, NEXT, 1), (DATA + 0x1000, data_len, flags, 2), (DATA + 0x3000, 1, WRITE, 0)]
    body = hdr + b"\0" * (0x1000 - len(hdr)) + payload
    return b"\0" + queue(descs, [0]) + body


put("block_requests", "read", blk(0, 1, 512, True))
put("block_requests", "write", blk(1, 2, 1024, False, b"\xab" * 1024))
put("block_requests", "flush", blk(4, 0, 0, False))
put("block_requests", "get-id", blk(8, 0, 20, True))
put("block_requests", "past-end", blk(0, 1 << 40, 4096, True))

# virtio-vsock: RX buffers for the device to fill, TX packets from the
# guest (REQUEST to host port 1024, then RW with a payload), no events.
def vsock_hdr(op, ln=0, src_port=5000, dst_port=1024, buf_alloc=65536, fwd=0, flags=0):
    return struct.pack("<QQIIIHHIII", 3, 2, src_port, dst_port, ln, 1, op, flags, buf_alloc, fwd)


rx = queue([(DATA + 0x8000 + i * 0x1000, 0x1000, WRITE, 0) for i in range(4)], [0, 1, 2, 3])
payload = b'{"jsonrpc":"2.0","id":1,"method":"initialize"}\n'
tx_descs = [(DATA, 44, 0, 0), (DATA + 0x100, 44, NEXT, 2), (DATA + 0x200, len(payload), 0, 0)]
tx = queue(tx_descs, [0, 1])
ev = queue([], [], size=4)
data = vsock_hdr(1).ljust(0x100, b"\0") + vsock_hdr(5, len(payload)).ljust(0x100, b"\0") + payload
put("vsock_queues", "connect-and-send", rx + tx + ev + data)
shutdown = vsock_hdr(4, flags=3)
put("vsock_queues", "connect-and-shutdown", rx + queue([(DATA, 44, 0, 0), (DATA + 0x100, 44, 0, 0)], [0, 1]) + ev
    + vsock_hdr(1).ljust(0x100, b"\0") + shutdown)
put("vsock_queues", "credit-request", rx + queue([(DATA, 44, 0, 0)], [0]) + ev + vsock_hdr(7))

# virtio-mmio: the Linux driver's set-up of queue 0, then DRIVER_OK.
def w(off, val):
    return struct.pack("<BBQ", 1 | 2 << 1, off, val)


def r(off):
    return struct.pack("<BB", 2 << 1, off)


setup = (r(0x000) + r(0x004) + r(0x008) + w(0x070, 1) + w(0x070, 3) + w(0x014, 1) + r(0x010)
         + w(0x024, 1) + w(0x020, 1) + w(0x070, 11) + r(0x070) + w(0x030, 0) + r(0x034)
         + w(0x038, 64) + w(0x080, 0x1000) + w(0x084, 0) + w(0x090, 0x2000) + w(0x094, 0)
         + w(0x0a0, 0x3000) + w(0x0a4, 0) + w(0x044, 1) + w(0x070, 15) + w(0x050, 0)
         + r(0x060) + w(0x064, 1))
put("mmio_registers", "driver-setup", setup)
put("mmio_registers", "setup-then-reset", setup + w(0x070, 0) + setup)

# Kernel command line: no console, two devices, then user text.
def cmdline(user, devices=((0xD000_0000, 5), (0xD000_1000, 6))):
    return (b"\0" + struct.pack("<B", len(devices))
            + b"".join(struct.pack("<QI", b, i) for b, i in devices) + user.encode())


put("cmdline", "quiet", cmdline("quiet mcpvm.channel=vsock mcpvm.root=/dev/vda"))
put("cmdline", "quoted", cmdline('init=/init -- "a b" c'))

# Boot parameters: memory (MiB above the 16 minimum), kernel end, initrd
# size, an initrd_addr_max or none, then a setup header's bytes, cmdline size.
put("boot_params", "elf-256m", struct.pack("<IIIB", 240, 0x100_0000, 9 << 20, 0) + struct.pack("<H", 512))
put("boot_params", "bzimage-4g", struct.pack("<IIIBI", 4096 - 16, 0x200_0000, 20 << 20, 1, 0x37FF_FFFF)
    + b"\0" * 0x77 + struct.pack("<H", 2048))

# Profiles and catalogues: the project's own.
os.makedirs(os.path.join(here, "corpus", "profiles"), exist_ok=True)
shutil.copy(os.path.join(top, "withholding/src/profiles.toml"),
            os.path.join(here, "corpus", "profiles", "built-in.toml"))
put("profiles", "custom.toml", b"""[defaults]
vcpus = 1

[profile.strict]
mem_mib = 128
rng = false
read_only_root = true
deny = ["@network", "ptrace", "execve"]
errno = "EACCES"
rlimits = { nofile = 64 }
""")
os.makedirs(os.path.join(here, "corpus", "catalogue"), exist_ok=True)
shutil.copy(os.path.join(top, "guest-image/catalogue.toml"),
            os.path.join(here, "corpus", "catalogue", "built-in.toml"))

# Guest events as the agent sends them, and a flood of one.
import json, io, tarfile
events = [
    {"event": "agent_start", "uptime_ms": 412},
    {"event": "spawned", "pid": 7},
    {"event": "first_stdout_byte"},
    {"event": "syscalls", "denied": [{"syscall": "execve", "errno": "EPERM", "count": 5}],
     "used": [{"syscall": "read", "count": 40}]},
    {"event": "exited", "code": 0, "signal": None, "status": 0},
]
put("guest_events", "a-run", "".join(json.dumps(e) + "\n" for e in events).encode())
put("guest_events", "long-line", b'{"event":"spawned","pid":' + b"9" * 5000 + b"}\n")
# An install microVM's events file: what its scripts did, as recorded.
install = [
    {"event": "agent_start", "uptime_ms": 5, "at_ms": 1.0},
    {"event": "effect", "uptime_ms": 40, "pid": 9, "exe": "/bin/sh", "call": "execve",
     "paths": ["/opt/node/bin/node"], "argv": ["node", "postinstall.js"],
     "during": {"phase": "start_up"}, "at_ms": 3.0},
    {"event": "effect", "uptime_ms": 41, "pid": 9, "exe": "/opt/node/bin/node", "call": "openat",
     "paths": ["/root/.ssh/id_rsa"], "access": "read", "during": {"phase": "start_up"}, "at_ms": 3.1},
    {"event": "effect", "uptime_ms": 42, "pid": 9, "exe": "/opt/node/bin/node", "call": "connect",
     "address": "inet 203.0.113.7:443", "during": {"phase": "start_up"}, "at_ms": 3.2},
    {"event": "effects", "counts": [{"syscall": "openat", "count": 900}], "dropped": 3},
]
put("guest_events", "install-scripts", "".join(json.dumps(e) + "\n" for e in install).encode())


def tar_of(entries):
    """entries: (name, type, data, link, mode)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name, kind, data, link, mode in entries:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.size = kind, mode, len(data)
            if link:
                info.linkname = link
            t.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
    return buf.getvalue()


put("workspace_tar", "files", tar_of([
    ("./src", tarfile.DIRTYPE, b"", None, 0o755),
    ("./src/main.rs", tarfile.REGTYPE, b"fn main() {}\n", None, 0o644),
    ("./run.sh", tarfile.REGTYPE, b"#!/bin/sh\n", None, 0o4777),
]))
put("workspace_tar", "hostile", tar_of([
    ("./.git/config", tarfile.REGTYPE, b"[core]\n\tfsmonitor = evil\n", None, 0o644),
    ("./.git/hooks/pre-commit", tarfile.REGTYPE, b"#!/bin/sh\nevil\n", None, 0o755),
    ("./.envrc", tarfile.REGTYPE, b"evil\n", None, 0o644),
    ("./out", tarfile.SYMTYPE, b"", "../../etc/passwd", 0o777),
    ("./hard", tarfile.LNKTYPE, b"", "src/main.rs", 0o644),
    ("./pipe", tarfile.FIFOTYPE, b"", None, 0o644),
]))

# Tool input schemas: a server's ordinary one, and hostile ones.
put("tool_arguments", "ordinary", json.dumps({
    "type": "object",
    "properties": {"path": {"type": "string"}, "limit": {"type": "integer", "minimum": 1},
                   "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2}},
    "required": ["path", "limit", "tags"]}).encode())
put("tool_arguments", "self-reference", json.dumps({
    "type": "object", "$defs": {"d": {"type": "array", "minItems": 64, "items": {"$ref": "#/$defs/d"}}},
    "properties": {"a": {"$ref": "#/$defs/d"}}, "required": ["a"]}).encode())

# Refusals: a schema line, then what a server said of a call.
put("refusals", "excel", b'{"type":"object","properties":{"filepath":{"type":"string"}},"required":["filepath"]}\n'
    b"Error: Path '/workspace/notes.txt' must point to an Excel file (.xlsm, .xlsx, .xltm, .xltx)")
put("refusals", "zod", b'\nMCP error -32602: Invalid arguments: [{"code":"invalid_enum_value","options":["a","b"],'
    b'"path":["mode"],"message":"Invalid enum value"}]')
put("refusals", "pydantic", b"\n1 validation error for call[x]\npath\n  String should match pattern "
    b"'^[A-Z][A-Z0-9_]+-\\d+$' [type=string_pattern_mismatch, input_value='1', input_type=str]")

# Request files (`--request`): a run as a probe writes it, a probe as an
# audit cell writes it, and one with a field no mcpvm writes.
run_request = {"vm": {"mem": 512, "vcpus": 1, "env": ["MCPVM_SECRET_TOKEN", "HOME"],
                      "server": "memory", "profile": "deny-net", "timeout": 300,
                      "workspace_limit": 1024, "seccomp": "on"},
               "timings": "/tmp/run/timings.json", "events": "/tmp/run/events.jsonl",
               "command": []}
put("requests", "run", json.dumps(run_request).encode())
put("requests", "probe", json.dumps({"in_vm": True, "robustness": True, "security": True,
    "dangerous": ["delete_all"], "init_timeout": 300, "vm": run_request["vm"],
    "command": []}).encode())
put("requests", "unknown-field", b'{"vm":{"mem":64},"command":["/bin/sh"],"then":"rm -rf /"}')

# A server's stdout: JSON-RPC, a log line, a split line, no final newline.
put("server_lines", "mixed", b'{"jsonrpc":"2.0","id":1,"result":{}}\nServer started\r\n{"jsonrpc":"2.0",'
    b'"method":"notifications/message"}\n\n{"jsonrpc":"2.0","id":2')

# Findings: canaries, effects of a given call and an attack, the steps
# that sent them (a traversal, an injection, an SSRF, a leaked token).
canaries = {"event": "canaries", "token": "MCPVM-CANARY-00ff", "env": "MCPVM_SECRET_TOKEN",
            "files": ["/etc/mcpvm/secret", "/workspace_secret/secret.txt"],
            "sibling": "/workspace_secret", "link": "/workspace/.mcpvm-canary-link"}
def effect(id_, call, **kw):
    e = {"event": "effect", "uptime_ms": 1, "pid": 7, "exe": "/usr/bin/node", "call": call,
         "during": {"phase": "request", "id": id_, "method": "tools/call", "tool": "t"}}
    e.update(kw)
    return e
def sent_step(name, id_, args, answer, detail=None):
    return {"step": name, "outcome": "ok", "at_ms": 1.0, "took_ms": 1.0, "detail": detail,
            "progress_notifications": 0, "exchange": [
                {"at_ms": 0.0, "dir": "sent", "bytes": 1, "message": {"jsonrpc": "2.0", "id": id_,
                 "method": "tools/call", "params": {"name": "t", "arguments": args}}},
                {"at_ms": 1.0, "dir": "received", "bytes": 1, "message": {"jsonrpc": "2.0", "id": id_,
                 "result": {"content": [{"type": "text", "text": answer}]}}}]}
put("findings", "run", json.dumps({
    "events": [canaries,
               effect(1, "openat", paths=["/workspace_secret/secret.txt"], access="read"),
               effect(1, "openat", paths=["/workspace/.mcpvm-canary-link"], resolved="/etc/mcpvm/secret", access="read"),
               effect(2, "execve", paths=["/bin/touch"], argv=["touch", "/tmp/mcpvm-attack-2"]),
               effect(3, "connect", address="inet 169.254.169.254:80"),
               {"event": "effects", "counts": [{"syscall": "openat", "count": 2}], "dropped": 0}],
    "steps": [sent_step("tools/call:t", 1, {"path": "/workspace_secret/secret.txt"}, "MCPVM-CANARY-00ff-sibling"),
              sent_step("attack:t", 2, {"text": "x; touch /tmp/mcpvm-attack-2"}, "",
                        {"attack": {"tool": "t", "argument": "/text", "class": "command-injection",
                                    "payload": "x; touch /tmp/mcpvm-attack-2", "marker": "mcpvm-attack-2"}}),
              sent_step("attack:t", 3, {"text": "http://169.254.169.254/"}, "",
                        {"attack": {"tool": "t", "argument": "/text", "class": "ssrf",
                                    "payload": "http://169.254.169.254/", "marker": "mcpvm-attack-3",
                                    "address": "inet 169.254.169.254:80"}})],
}).encode())

# Reports: one audit's meta and two records, one with hostile text.
meta = {"schema": 1, "mcpvm_version": "0.1.0", "kernel": "vmlinux", "kernel_sha256": "ab",
        "runtime_image": "runtime-1.erofs", "catalogue": "(built in)",
        "servers": {"git": {"package": "mcp-server-git", "version": "1", "runtime": "python", "layer": "k"}},
        "profiles": ["baseline", "deny-exec"], "profile_definitions": {},
        "shard": {"index": 1, "count": 1}, "started_at": 0}
def record(profile, outcome, errors, used):
    return {"schema": 1, "server": "git", "profile": profile, "outcome": outcome,
            "failed_step": None, "lifecycle": "initialize", "tools_ok": [], "tools_failed": [],
            "timings": {"wall_ms": 1.0, "boot_ms": None, "handshake_ms": 2.0, "tools_list_ms": None},
            "evidence": {"denied": [], "errors": errors, "stderr_tail": "", "exit": None, "oom": False},
            "syscalls_used": used, "finished_at": 0}
put("reports", "audit", json.dumps({"meta": meta, "records": [
    record("baseline", "ok", [], [{"syscall": "read", "count": 1}]),
    record("deny-exec", "degraded", ["tools/call:x: error: <script>alert(1)</script> | [x](y)"], None),
]}).encode())

# Shards to merge: audit.json, a NUL, results.jsonl. One that merges (so
# the fuzzer starts from a whole merge), and the hostile shapes of round
# 4: names that are paths and TOML lines, a matrix of 20,000 x 20,000.
shard_record = record("baseline", "ok", [], [{"syscall": "read", "count": 1}])
meta = dict(meta, shard={"index": 0, "count": 1})
put("merge_shards", "whole", json.dumps(meta).encode() + b"\0" + json.dumps(shard_record).encode() + b"\n")
# A cell that kept its calls (judged one by one, audit/calls.rs) and an
# entry with network rules to check: answers shaped as failures, a
# varied call, lookups refused during a call, hostile text.
with_rules = dict(meta, servers={"git": dict(meta["servers"]["git"], network=["*.x.com:443", "api.y.com:443"])})
called = dict(shard_record, calls=[
    {"tool": "a", "outcome": "ok", "arguments": '{"q":"x"}', "answer": '{"error":"fetch failed"}',
     "net": ["dns api.z.com denied (not allowed)", "dns o1.ingest.sentry.io denied (x)"], "took_ms": 1.0},
    {"tool": "b", "outcome": "ok", "arguments": '{"q":"x"}', "answer": "data \u202e<b>",
     "varied": {"property": "q", "outcome": "tool_error", "same": False}, "took_ms": 1.0},
    {"tool": "c", "outcome": "tool_error", "is_error": True, "arguments": "{}", "answer": "Error: ENOTFOUND api.q.com",
     "took_ms": 1.0},
], network=["dns api.z.com denied (not allowed)"])
put("merge_shards", "calls", json.dumps(with_rules).encode() + b"\0" + json.dumps(called).encode() + b"\n")
hostile = dict(meta, servers={"../../x/pwn": meta["servers"]["git"], "/abs/victim": meta["servers"]["git"]})
put("merge_shards", "path-names", json.dumps(hostile).encode() + b"\0")
hostile = dict(meta, profiles=["baseline", 'x"]\n[profile.evil]\nallow = ["execve'])
put("merge_shards", "toml-profile", json.dumps(hostile).encode() + b"\0")
hostile = dict(meta, servers={f"s{i}": meta["servers"]["git"] for i in range(2000)},
               profiles=[f"p{i}" for i in range(2000)])
put("merge_shards", "huge-matrix", json.dumps(hostile).encode() + b"\0")

# Snapshot state: a header and a body line as the VMM writes them.
put("snapshot_state", "header-body",
    b'{"format":"mcpvm-snapshot","version":2,"body_sha256":"00","memory_bytes":4096}\n'
    b'{"mem_mib":16,"cmdline":"quiet","vm":{},"vcpus":[],"serial":null,"virtio":[]}\n')
