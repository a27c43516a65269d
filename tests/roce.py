# RoCEv2 packets by hand (IPv4, UDP 4791) for the wire suite's tests: the
# ICRC as IBA A17.3.3 and rdma_rxe compute it; and what a scripted peer in
# another network namespace needs.
import ctypes
import os
import socket
import struct
import subprocess
import time
import zlib

READ_REQUEST = 0x0C
READ_RESPONSE_FIRST = 0x0D
READ_RESPONSE_MIDDLE = 0x0E
READ_RESPONSE_LAST = 0x0F
READ_RESPONSE_ONLY = 0x10
ACKNOWLEDGE = 0x11
ATOMIC_ACKNOWLEDGE = 0x12
FETCH_ADD = 0x14
ACK = 0x1F  # AETH syndrome: ACK, no credit limit
NAK_SEQ = 0x60  # AETH syndrome: NAK, PSN sequence error
RNR_655MS = 0x20  # AETH syndrome: RNR NAK, timer code 0 (655.36 ms)
SO_RCVBUFFORCE = 33


def bth(opcode, qpn, psn, ack_req=False, pkey=0xFFFF):
    return struct.pack("!BBHII", opcode, 0, pkey, qpn & 0xFFFFFF,
                       (0x80000000 if ack_req else 0) | (psn & 0xFFFFFF))


def aeth(syndrome, msn=0):
    return struct.pack("!I", (syndrome << 24) | (msn & 0xFFFFFF))


def reth(va, rkey, length):
    return struct.pack("!QII", va, rkey, length)


def atomic_eth(va, rkey, swap_add, compare=0):
    return struct.pack("!QIQQ", va, rkey, swap_add, compare)


def parse_bth(data):
    """(opcode, dest QPN, PSN) of a received UDP payload, or None."""
    if len(data) < 16:
        return None
    opcode, _, _, qpn, psn = struct.unpack("!BBHII", data[:12])
    return opcode, qpn & 0xFFFFFF, psn & 0xFFFFFF


def packet(src, dst, ib, icrc_xor=0, sport=0xC000):
    """IPv4 + UDP + IB transport headers and payload `ib` + ICRC. `ib`
    shorter than a BTH gets no ICRC."""
    with_icrc = len(ib) >= 12
    udp_len = 8 + len(ib) + (4 if with_icrc else 0)
    udp = struct.pack("!HHHH", sport, 4791, udp_len, 0)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0x1234, 0x4000, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    if not with_icrc:
        return ip + udp + ib
    # CRC-32 over 8 bytes of ones (the LRH), then the packet with TOS, TTL,
    # IP checksum, UDP checksum and the BTH's FECN/BECN byte as ones.
    m_ip = bytearray(ip)
    m_ip[1] = 0xFF
    m_ip[8] = 0xFF
    m_ip[10:12] = b"\xff\xff"
    m_udp = bytearray(udp)
    m_udp[6:8] = b"\xff\xff"
    m_ib = bytearray(ib)
    m_ib[4] = 0xFF
    icrc = zlib.crc32(b"\xff" * 8 + bytes(m_ip) + bytes(m_udp) + bytes(m_ib)) ^ icrc_xor
    return ip + udp + ib + struct.pack("<I", icrc)


def raw_socket():
    return socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)


def peer_sockets(ns, peer_ip, rcvbuf=0):
    """A scripted peer's sockets, made in network namespace ns: UDP at
    peer_ip:4791 (0.2 s timeout; a receive buffer of rcvbuf bytes if given)
    to hear the QP, and a raw one to answer it."""
    def make():
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        if rcvbuf:
            rx.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
        rx.bind((peer_ip, 4791))
        rx.settimeout(0.2)
        return rx, raw_socket()
    return in_namespace(ns, make)


def qp_attr(dev, qpn, name):
    """Driver attribute `name` of QP `qpn` of `dev` in `rdma -dd res show qp`
    (drv_NAME), or None."""
    out = subprocess.run(["rdma", "-dd", "res", "show", "qp"], capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        if f"link {dev}/1 lqpn {qpn} " in line:
            words = line.split()
            if f"drv_{name}" in words:
                return int(words[words.index(f"drv_{name}") + 1])
    return None


def in_namespace(ns, fn):
    """fn() with this thread in network namespace ns (sockets keep theirs)."""
    libc = ctypes.CDLL(None, use_errno=True)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    there = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(there, 0x40000000) != 0:
            raise OSError(ctypes.get_errno(), "setns")
        return fn()
    finally:
        libc.setns(home, 0x40000000)
        os.close(there)
        os.close(home)


def mapped_gid(ip):
    """The IPv4-mapped GID of ip, spelt out as pyverbs wants it."""
    b = socket.inet_pton(socket.AF_INET6, f"::ffff:{ip}")
    return ":".join(b[i:i + 2].hex() for i in range(0, 16, 2))


def rc_qp(pd, cq, gid_index, peer_ip, peer_qpn, sq_psn=0, access=0, dest_rd_atomic=1,
          timeout=14, send_wr=1):
    """An RC QP of `pd` in RTS, connected to QP `peer_qpn` at `peer_ip` (a
    scripted peer): `rc_attr`'s path; room for `send_wr` send WRs and one
    receive."""
    import pyverbs.enums as e
    from pyverbs.qp import QP, QPCap, QPInitAttr

    qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                           cap=QPCap(max_send_wr=send_wr, max_recv_wr=1)))
    qp.to_rts(rc_attr(gid_index, peer_ip, peer_qpn, sq_psn, access, dest_rd_atomic, timeout))
    return qp


def rc_attr(gid_index, peer_ip, peer_qpn, sq_psn=0, access=0, dest_rd_atomic=1, timeout=14):
    """What takes an RC QP to RTS towards QP `peer_qpn` at `peer_ip`: path
    MTU 256, PSNs from 0 (its requests from `sq_psn`), a `timeout` of 67 ms
    (4.096 us << 14), 3 retries, one RNR retry."""
    import pyverbs.enums as e
    from pyverbs.addr import AHAttr, GID, GlobalRoute
    from pyverbs.qp import QPAttr

    attr = QPAttr(port_num=1)
    attr.qp_access_flags = access
    attr.path_mtu = e.IBV_MTU_256
    attr.dest_qp_num = peer_qpn
    attr.rq_psn = 0
    attr.sq_psn = sq_psn
    attr.timeout = timeout
    attr.retry_cnt = 3
    attr.rnr_retry = 1
    attr.min_rnr_timer = 12
    attr.max_rd_atomic = 1
    attr.max_dest_rd_atomic = dest_rd_atomic
    attr.ah_attr = AHAttr(port_num=1, is_global=1,
                          gr=GlobalRoute(dgid=GID(mapped_gid(peer_ip)), sgid_index=gid_index))
    return attr


def dev_stat(dev, name):
    """Counter `name` of port 1 of `dev` (`rdma statistic show link`)."""
    words = subprocess.run(["rdma", "statistic", "show", "link", f"{dev}/1"],
                           capture_output=True, text=True).stdout.split()
    return int(words[words.index(name) + 1])


def poll_one(cq, seconds):
    """The next completion of `cq` within `seconds`, or None."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        n, wcs = cq.poll(1)
        if n:
            return wcs[0]
        time.sleep(0.01)
    return None


def heard(rx, qpn, seconds, until):
    """(opcode, PSN, UDP payload) of the packets for QP `qpn` that `rx`
    hears, until `until(got)` holds or `seconds` are up."""
    got, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline and not until(got):
        try:
            data = rx.recv(4096)
        except socket.timeout:
            continue
        b = parse_bth(data)
        if b and b[1] == qpn:
            got.append((b[0], b[2], data))
    return got


class Checks:
    """check(ok, what) prints a KTAP-style diagnostic line; `fails` counts."""

    def __init__(self):
        self.fails = 0

    def __call__(self, ok, what):
        print(f"# {'ok' if ok else 'FAILED'}: {what}")
        self.fails += not ok
