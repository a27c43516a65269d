#!/usr/bin/env python3
# Requests whose lengths do not add up are refused before anything is
# placed or completed (IBA C9-92, C9-94; rdma_rxe's rxe_resp_check_length
# and check_rkey).
#
# A scripted requester (a UDP socket at port 4791 in the network namespace
# PEER_NS, sending hand-made packets, roce.py) sends each case below to a
# fresh RC QP of DEV (pyverbs; path MTU 256) with a 4 KiB MR that grants
# remote writes and reads and one receive posted. Each must be answered by
# a NAK "invalid request" at its PSN, place nothing of the refused packet
# (the MR holds only what packets before it brought), and
# complete its receive once, in error: the QP goes to ERR and flushes it,
# or a WRITE with immediate, which takes it first, completes it with
# REM_INV_REQ_ERR, as rxe's. Then a READ asked for again is answered again,
# unless with a length no READ is taken with.
#
# Usage (in the QP's namespace): bad_lengths.py DEV GID_INDEX LOCAL_IP PEER_IP PEER_NS
import socket
import struct
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.wr import SGE, RecvWR

import roce

dev, gid_index, local_ip, peer_ip, peer_ns = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
PEER_QPN, SIZE, MTU = 0x4244, 4096, 256
SEND_ONLY, WRITE_FIRST, WRITE_LAST_IMM, WRITE_ONLY_IMM, READ = 0x04, 0x06, 0x09, 0x0B, 0x0C
NAK_INVALID = 0x61


rx, tx = roce.peer_sockets(peer_ns, peer_ip)
ctx = Context(name=dev)
pd = PD(ctx)
access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE | e.IBV_ACCESS_REMOTE_READ
imm = struct.pack("!I", 0x1234)


def cases(va, rkey):
    """(what, bytes placed before the refused packet,
    [(opcode, psn, headers after the BTH + payload)])"""
    return [
        ("a WRITE_ONLY_IMM announcing 4096 bytes and carrying none", 0,
         [(WRITE_ONLY_IMM, 0, roce.reth(va, rkey, SIZE) + imm)]),
        ("a WRITE_FIRST of 100 bytes at MTU 256", 0,
         [(WRITE_FIRST, 0, roce.reth(va, rkey, 512) + b"w" * 100)]),
        ("a WRITE announcing 512 bytes whose WRITE_LAST_IMM ends it at 356", MTU,
         [(WRITE_FIRST, 0, roce.reth(va, rkey, 512) + b"w" * MTU),
          (WRITE_LAST_IMM, 1, imm + b"w" * 100)]),
        ("a SEND_ONLY of 260 bytes at MTU 256", 0,
         [(SEND_ONLY, 0, b"s" * 260)]),
        ("a READ of 2^31 + 4 bytes", 0,
         [(READ, 0, roce.reth(va, rkey, (1 << 31) + 4))]),
    ]


def answer():
    """The AETH syndrome and PSN of the first ACK/NAK within 5 s."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            data = rx.recv(4096)
        except socket.timeout:
            continue
        b = roce.parse_bth(data)
        if b and b[0] == roce.ACKNOWLEDGE and b[1] == PEER_QPN:
            return data[12], b[2]
    return None, None


fails = 0
for n in range(5):
    cq = CQ(ctx, 4)
    mr = MR(pd, SIZE, access)
    mr.write(b"\x00" * SIZE, SIZE)
    qp = roce.rc_qp(pd, cq, gid_index, peer_ip, PEER_QPN, access=access)
    qp.post_recv(RecvWR(wr_id=7, num_sge=1, sg=[SGE(mr.buf, SIZE, mr.lkey)]))
    what, placed, pkts = cases(mr.buf, mr.rkey)[n]
    for i, (opcode, psn, rest) in enumerate(pkts):
        last = i + 1 == len(pkts)
        tx.sendto(roce.packet(peer_ip, local_ip, roce.bth(opcode, qp.qp_num, psn,
                                                          ack_req=last) + rest),
                  (local_ip, 0))
    syndrome, psn = answer()
    # The receive's completion follows the NAK: up to 10 s for it (a KASAN
    # guest can be slow), then 0.2 s for any other.
    wcs, deadline = [], time.monotonic() + 10
    while time.monotonic() < deadline:
        k, got = cq.poll(1)
        if k:
            if not wcs:
                deadline = time.monotonic() + 0.2
            wcs += got
        else:
            time.sleep(0.01)
    ok = (syndrome == NAK_INVALID and psn == pkts[-1][1]
          and mr.read(SIZE, 0) == b"w" * placed + b"\x00" * (SIZE - placed)
          and [w.wr_id for w in wcs] == [7]
          and wcs[0].status in (e.IBV_WC_WR_FLUSH_ERR, e.IBV_WC_REM_INV_REQ_ERR))
    answered = f"syndrome {syndrome:#x} at PSN {psn}" if syndrome is not None else "no answer"
    print(f"# {'ok' if ok else 'FAILED'}: {what}: {answered}; completions "
          + (", ".join(f"wr_id {w.wr_id} status {w.status} len {w.byte_len}" for w in wcs)
             or "none"))
    fails += not ok
    qp.close()
    mr.close()
    cq.close()

# A READ asked for again (behind the expected PSN) is answered again, but
# not one of 2^31 + 4 bytes, which no first READ is taken with: it would
# have one packet stream 2 GiB of responses.
def responses(seconds):
    """Response packets for the peer within `seconds`."""
    return len(roce.heard(rx, PEER_QPN, seconds, lambda _: False))


cq = CQ(ctx, 4)
mr = MR(pd, SIZE, access)
qp = roce.rc_qp(pd, cq, gid_index, peer_ip, PEER_QPN, access=access)
got = []
for length in (MTU, (1 << 31) + 4, MTU):
    tx.sendto(roce.packet(peer_ip, local_ip, roce.bth(READ, qp.qp_num, 0)
                          + roce.reth(mr.buf, mr.rkey, length)), (local_ip, 0))
    got.append(responses(1.0))
ok = got == [1, 0, 1]
print(f"# {'ok' if ok else 'FAILED'}: a READ of {MTU} bytes, then again with 2^31 + 4 bytes, "
      f"then again as first: {got} response packets (expected [1, 0, 1])")
fails += not ok
qp.close()
mr.close()
cq.close()
ctx.close()
sys.exit(1 if fails else 0)
