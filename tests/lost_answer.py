#!/usr/bin/env python3
# A READ whose response was lost is asked for again as soon as a later
# answer shows it, not when the retransmit timer fires.
#
# An RC QP of DEV (pyverbs; a 4.3 s timeout) posts a SEND (PSN 0), a READ
# (PSN 1) and a SEND (PSN 2) to a scripted responder: a UDP socket at port
# 4791 in the network namespace PEER_NS, answering with hand-made packets
# (roce.py). The responder "loses" the READ's response and ACKs PSN 2, which
# covers the first SEND and tells that the READ was answered and its answer
# lost (IBA's implicit NAK; rxe's completer retries at once). The QP must
# ask for the READ again within 2 s of that ACK; it used to wait for its
# timer (4.3 s): the ACK was looked at while the SEND still held the head.
# Then the responder answers, and all three complete.
#
# Usage (in the QP's namespace): lost_answer.py DEV GID_INDEX LOCAL_IP PEER_IP PEER_NS
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.wr import SGE, SendWR

import roce

dev, gid_index, local_ip, peer_ip, peer_ns = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
PEER_QPN, LEN, READ = 0x4245, 16, 0x0C
TIMEOUT = 20  # 4.096 us << 20: 4.3 s

rx, tx = roce.peer_sockets(peer_ns, peer_ip)


def requests(seconds, until):
    """(opcode, PSN) of the QP's packets until `until` holds or time is up."""
    heard = roce.heard(rx, PEER_QPN, seconds, lambda g: until([h[:2] for h in g]))
    return [h[:2] for h in heard]


ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 8)
mr = MR(pd, 3 * LEN, e.IBV_ACCESS_LOCAL_WRITE)
qp = roce.rc_qp(pd, cq, gid_index, peer_ip, PEER_QPN, timeout=TIMEOUT, send_wr=4)
for i, op in enumerate((e.IBV_WR_SEND, e.IBV_WR_RDMA_READ, e.IBV_WR_SEND)):
    wr = SendWR(wr_id=i, opcode=op, num_sge=1, sg=[SGE(mr.buf + i * LEN, LEN, mr.lkey)],
                send_flags=e.IBV_SEND_SIGNALED)
    if op == e.IBV_WR_RDMA_READ:
        wr.set_wr_rdma(0x1234, 0x10000)
    qp.post_send(wr)

check = roce.Checks()


first = requests(5, lambda g: len(g) >= 3)
check([p for _, p in first] == [0, 1, 2], f"the three requests came: {first}")


def answer(ib):
    tx.sendto(roce.packet(peer_ip, local_ip, roce.bth(ib[0], qp.qp_num, ib[1]) + ib[2]),
              (local_ip, 0))


answer((roce.ACKNOWLEDGE, 2, roce.aeth(roce.ACK)))
t0 = time.monotonic()
again = requests(6, lambda g: (READ, 1) in g)
waited = time.monotonic() - t0
check((READ, 1) in again and waited < 2,
      f"the READ asked for again {waited:.2f} s after the ACK of PSN 2 (timer: 4.3 s): {again}")
answer((roce.READ_RESPONSE_ONLY, 1, roce.aeth(roce.ACK) + b"r" * LEN))
answer((roce.ACKNOWLEDGE, 2, roce.aeth(roce.ACK)))
wcs, deadline = [], time.monotonic() + 10
while len(wcs) < 3 and time.monotonic() < deadline:
    n, got = cq.poll(1)
    wcs += got if n else []
    if not n:
        time.sleep(0.01)
check([(w.wr_id, w.status) for w in wcs] == [(0, 0), (1, 0), (2, 0)],
      "SEND, READ and SEND complete in order: "
      + ", ".join(f"wr_id {w.wr_id} status {w.status}" for w in wcs))
check(mr.read(LEN, LEN) == b"r" * LEN, "the READ placed the response's bytes")
ctx.close()
sys.exit(1 if check.fails else 0)
