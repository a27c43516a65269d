#!/usr/bin/env python3
# UC on an SRQ: a SEND cut short by a lost packet leaves its receive for
# the QP's next message, as a QP's own RQ keeps it posted (IBA 9.7.5.1.7).
#
# A scripted UC requester (hand-made packets from the network namespace
# PEER_NS, roce.py) sends to a UC QP of DEV (pyverbs, path MTU 256) whose
# SRQ has one receive posted: SEND_FIRST at PSN 0, SEND_LAST at PSN 2 (PSN 1
# "lost"), then SEND_ONLY at PSN 3. The SEND_ONLY must complete that receive,
# with its own bytes. rdma_rxe loses such a receive: nothing would complete.
# Then the same cut once more, and the QP moved to ERR: the receive it keeps
# is flushed, once.
#
# Usage (in the QP's namespace): uc_srq_gap.py DEV GID_INDEX LOCAL_IP PEER_IP PEER_NS
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr
from pyverbs.wr import SGE, RecvWR

import roce

dev, gid_index, local_ip, peer_ip, peer_ns = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
PEER_QPN, MTU = 0x4245, 256
UC_SEND_FIRST, UC_SEND_LAST, UC_SEND_ONLY = 0x20, 0x22, 0x24

ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 8)
srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=4, max_sge=1)))
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UC, scq=cq, rcq=cq, srq=srq,
                       cap=QPCap(max_send_wr=1, max_recv_wr=1)))
attr = QPAttr(port_num=1)
attr.path_mtu = e.IBV_MTU_256
attr.dest_qp_num = PEER_QPN
attr.rq_psn = 0
attr.sq_psn = 0
attr.ah_attr = AHAttr(port_num=1, is_global=1,
                      gr=GlobalRoute(dgid=GID(roce.mapped_gid(peer_ip)), sgid_index=gid_index))
qp.to_rts(attr)
tx = roce.in_namespace(peer_ns, roce.raw_socket)


def send(opcode, psn, data):
    tx.sendto(roce.packet(peer_ip, local_ip, roce.bth(opcode, qp.qp_num, psn) + data),
              (local_ip, 0))


def completions(seconds, wait_first=False):
    """The completions of `seconds`; with `wait_first`, of up to 10 s for
    the first one (a KASAN guest can be slow to take a packet), then of
    `seconds` more."""
    wcs, deadline = [], time.monotonic() + (10 if wait_first else seconds)
    while time.monotonic() < deadline:
        n, got = cq.poll(1)
        if n:
            if not wcs and wait_first:
                deadline = time.monotonic() + seconds
            wcs += got
        else:
            time.sleep(0.01)
    return wcs


def taken(psn):
    """Waits (bounded) until the QP has taken the packet of `psn`."""
    for _ in range(1000):
        if qp.query(e.IBV_QP_RQ_PSN)[0].rq_psn != psn:
            return
        time.sleep(0.01)


check = roce.Checks()


def show(wcs):
    return ", ".join(f"wr_id {w.wr_id} status {w.status} len {w.byte_len}" for w in wcs) or "none"


srq.post_recv(RecvWR(wr_id=5, num_sge=1, sg=[SGE(mr.buf, 4096, mr.lkey)]))
send(UC_SEND_FIRST, 0, b"f" * MTU)
send(UC_SEND_LAST, 2, b"l" * 64)
wcs = completions(0.5)
check(not wcs, f"the SEND cut short completes nothing: {show(wcs)}")
send(UC_SEND_ONLY, 3, b"o" * 100)
wcs = completions(0.5, wait_first=True)
check(len(wcs) == 1 and wcs[0].wr_id == 5 and wcs[0].status == e.IBV_WC_SUCCESS
      and wcs[0].byte_len == 100,
      f"the next SEND completes the receive the cut one took: {show(wcs)}")
check(mr.read(100, 0) == b"o" * 100, "with its own bytes")

srq.post_recv(RecvWR(wr_id=6, num_sge=1, sg=[SGE(mr.buf, 4096, mr.lkey)]))
send(UC_SEND_FIRST, 4, b"f" * MTU)
taken(4)
send(UC_SEND_LAST, 6, b"l" * 64)
time.sleep(0.5)
qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
wcs = completions(0.5, wait_first=True)
check(len(wcs) == 1 and wcs[0].wr_id == 6 and wcs[0].status == e.IBV_WC_WR_FLUSH_ERR,
      f"in ERR, the receive the QP kept is flushed, once: {show(wcs)}")
ctx.close()
sys.exit(1 if check.fails else 0)
