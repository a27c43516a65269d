#!/usr/bin/env python3
"""Runs HMP commands on a QEMU monitor socket (-monitor unix:PATH,server)
and prints their output. Usage: qmon.py SOCKET CMD [CMD...]; the command
"vring PATH QUEUE" shows a virtqueue and the indices in its rings."""
import socket
import sys
import time


def read_until_prompt(s):
    buf = b""
    deadline = time.time() + 10
    while not buf.endswith(b"(qemu) ") and time.time() < deadline:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf.decode(errors="replace")


def run(s, cmd):
    s.sendall(cmd.encode() + b"\n")
    out = read_until_prompt(s)
    # The monitor echoes the command with terminal escapes: keep the answer.
    return "\n".join(out.replace("\r", "").split("\n")[1:-1])


def half(s, addr):
    """A 16-bit little-endian value of guest memory."""
    out = run(s, f"xp /1hx {addr:#x}")
    return int(out.split(":")[1].split()[0], 16)


def vring(s, path, queue):
    """The split ring as the guest wrote it, beside QEMU's view: the avail
    index the guest published and the used_event it asked for, the used
    index QEMU published and the avail_event it asked for."""
    out = run(s, f"info virtio-queue-status {path} {queue}")
    print(out)
    f = {}
    for line in out.split("\n"):
        k, _, v = line.strip().partition(":")
        if k in ("num", "avail", "used") and v.strip():
            f[k] = int(v.strip(), 0)
    num, avail, used = f["num"], f["avail"], f["used"]
    print(f"  guest avail.flags {half(s, avail):#x} avail.idx {half(s, avail + 2)}"
          f" used_event {half(s, avail + 4 + 2 * num)}")
    print(f"  ring used.flags {half(s, used):#x} used.idx {half(s, used + 2)}"
          f" avail_event {half(s, used + 4 + 8 * num)}")


def main():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(sys.argv[1])
    read_until_prompt(s)
    for cmd in sys.argv[2:]:
        print(f"(qemu) {cmd}")
        if cmd.startswith("vring "):
            _, path, queue = cmd.split()
            vring(s, path, queue)
        else:
            print(run(s, cmd))


if __name__ == "__main__":
    main()
