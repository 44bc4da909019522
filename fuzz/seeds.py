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
