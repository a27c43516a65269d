#!/usr/bin/env python3
# An atomic asked for again after a long READ is answered from its saved
# result, not forgotten and not executed twice.
#
# rdma_rxe's requester checks its window of 128 PSNs where a request
# starts, not where a READ's responses end: it sends a READ of hundreds of
# packets right behind an atomic, and if the atomic's ACK is lost it asks
# for the atomic again once the READ's responses are in. A scripted
# requester (a UDP socket at port 4791 in the network namespace PEER_NS,
# hand-made packets, roce.py) does that to an RC QP of DEV (pyverbs, path
# MTU 256): FETCH_ADD 5 at PSN 0 (its ACK ignored), a READ of 200 packets
# at PSN 1, then FETCH_ADD 5 at PSN 0 again. The answer must be the first's
# (the value before it, 7), and the MR must hold 12: executed once. oxe used
# to forget an atomic 128 PSNs behind the expected PSN and drop its repeat.
#
# Usage (in the QP's namespace): atomic_replay.py DEV GID_INDEX LOCAL_IP PEER_IP PEER_NS
import struct
import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD

import roce

dev, gid_index, local_ip, peer_ip, peer_ns = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
PEER_QPN, MTU, NPKTS, READ = 0x4246, 256, 200, 0x0C

# Room for the READ's 200 responses at once.
rx, tx = roce.peer_sockets(peer_ns, peer_ip, rcvbuf=4 << 20)
ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 4)
access = e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ | e.IBV_ACCESS_REMOTE_ATOMIC
mr = MR(pd, MTU * NPKTS, access)
mr.write(struct.pack("<Q", 7), 8)
qp = roce.rc_qp(pd, cq, gid_index, peer_ip, PEER_QPN, access=access, dest_rd_atomic=4)


def send(opcode, psn, rest):
    tx.sendto(roce.packet(peer_ip, local_ip, roce.bth(opcode, qp.qp_num, psn, ack_req=True)
                          + rest), (local_ip, 0))


def answers(seconds, until):
    """(opcode, PSN, packet) of the QP's answers until `until` holds or time is up."""
    return roce.heard(rx, PEER_QPN, seconds, until)


def atomic_orig(got):
    """The original value of the first atomic ACK in `got`, or None."""
    for op, psn, data in got:
        if op == roce.ATOMIC_ACKNOWLEDGE and psn == 0 and len(data) >= 24:
            return struct.unpack("!Q", data[16:24])[0]
    return None


check = roce.Checks()


fetch_add = roce.atomic_eth(mr.buf, mr.rkey, 5)
send(roce.FETCH_ADD, 0, fetch_add)
first = atomic_orig(answers(5, atomic_orig))
check(first == 7, f"FETCH_ADD at PSN 0 answered (then taken as lost): {first}")
send(READ, 1, roce.reth(mr.buf, mr.rkey, MTU * NPKTS))
got = answers(10, lambda g: any(p == NPKTS for _, p, _ in g))
check(any(p == NPKTS for _, p, _ in got),
      f"the READ's {NPKTS} responses came (PSNs 1..{NPKTS}): {len(got)} packets")
send(roce.FETCH_ADD, 0, fetch_add)
again = atomic_orig(answers(5, atomic_orig))
check(again == 7, f"FETCH_ADD at PSN 0 again, {NPKTS} PSNs later: answered {again}, expected 7")
now = struct.unpack("<Q", mr.read(8, 0))[0]
check(now == 12, f"the MR holds {now}: executed once (12)")
ctx.close()
sys.exit(1 if check.fails else 0)
