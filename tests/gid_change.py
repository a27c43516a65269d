#!/usr/bin/env python3
# A device's addresses as paths: between two of its own, and from one that
# goes away.
#
# EXTRA_IP is added to NETDEV beside IP, DEV's GID. An RC QP with IP's GID
# and one with EXTRA_IP's reach each other: a destination that is another
# GID of the device is this device, as rxe loops back a packet to its own
# MAC (it went out to the IP stack, which had it come back on lo, where no
# device takes it). Then EXTRA_IP is deleted: a SEND of the RC QP whose
# source it was, and a datagram through an AH made with it, fail with
# LOC_QP_OP_ERR, as rxe fails them when rdma_get_gid_attr finds no GID
# there (they went out from the stale address, a datagram "successfully");
# so does a WRITE from it in flight to a QP that never answers, at its
# first retransmission (1 s), not with RETRY_EXC_ERR after its retries.
#
# Usage (in DEV's namespace, as root):
#   gid_change.py DEV NETDEV IP EXTRA_IP
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GID, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

import roce

dev, ndev, ip, extra = sys.argv[1:5]
QKEY = 0x11111111
check = roce.Checks()
ctx = Context(name=dev)


def gid_index(addr):
    want = roce.mapped_gid(addr)
    for i in range(ctx.query_port(1).gid_tbl_len):
        try:
            if ctx.query_gid(1, i).gid == want:
                return i
        except Exception:
            pass
    return None


def wait_gid(addr, present):
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (gid_index(addr) is not None) == present:
            return True
        time.sleep(0.05)
    return False


def route(gi, peer_ip):
    return AHAttr(port_num=1, is_global=1,
                  gr=GlobalRoute(dgid=GID(roce.mapped_gid(peer_ip)), sgid_index=gi))


def rc_connect(qp, gi, peer_ip, peer_qpn, timeout=14, retry_cnt=3):
    attr = roce.rc_attr(gi, peer_ip, peer_qpn, timeout=timeout)
    attr.retry_cnt = retry_cnt
    qp.to_rts(attr)


def completions(n, seconds):
    """wr_id -> status of the next `n` completions of `cq`."""
    wcs = {}
    for _ in range(n):
        wc = roce.poll_one(cq, seconds)
        if wc:
            wcs[wc.wr_id] = wc.status
    return wcs


def send(qp, wr_id, ud=None, write=False):
    wr = SendWR(wr_id=wr_id, opcode=e.IBV_WR_RDMA_WRITE if write else e.IBV_WR_SEND,
                num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)])
    wr.send_flags = e.IBV_SEND_SIGNALED
    if ud:
        wr.set_wr_ud(ud[0], ud[1], QKEY)
    if write:
        wr.set_wr_rdma(0x1234, mr.buf)
    qp.post_send(wr)


def status(wc):
    return f"status {wc.status}" if wc else "no completion in 5 s"


pd = PD(ctx)
cq = CQ(ctx, 16)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)
gi = gid_index(ip)
subprocess.run(["ip", "addr", "add", f"{extra}/24", "dev", ndev], check=True)
try:
    check(wait_gid(extra, True), f"{extra} becomes a GID of {dev}")
    gx = gid_index(extra)
    rc = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                            cap=QPCap(max_send_wr=2, max_recv_wr=2))) for _ in range(2)]
    rc_connect(rc[0], gi, extra, rc[1].qp_num)
    rc_connect(rc[1], gx, ip, rc[0].qp_num)
    rc[1].post_recv(RecvWR(wr_id=10, num_sge=1, sg=[SGE(mr.buf + 1024, 1024, mr.lkey)]))
    send(rc[0], 1)
    wcs = completions(2, 5.0)
    check(wcs == {1: e.IBV_WC_SUCCESS, 10: e.IBV_WC_SUCCESS},
          f"RC from {ip} to {extra}, both {dev}'s: the SEND and its receive complete: {wcs}")

    ud = [QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                            cap=QPCap(max_send_wr=2, max_recv_wr=2))) for _ in range(2)]
    for q in ud:
        attr = QPAttr(port_num=1)
        attr.qkey = QKEY
        attr.pkey_index = 0
        q.to_rts(attr)
    ud[1].post_recv(RecvWR(wr_id=20, num_sge=1, sg=[SGE(mr.buf + 2048, 1024, mr.lkey)]))
    ah = AH(pd, attr=route(gx, ip))
    send(ud[0], 2, (ah, ud[1].qp_num))
    wcs = completions(2, 5.0)
    check(wcs == {2: e.IBV_WC_SUCCESS, 20: e.IBV_WC_SUCCESS},
          f"UD from {extra} to {ip}: the datagram and its receive complete: {wcs}")

    # A QP that never answers: no QP of the device has this number. The
    # WRITE's retransmit timer: 4.096 us << 18, 1 s, 7 times (the address
    # goes well before 8.6 s, even on a slow KASAN guest).
    silent = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                               cap=QPCap(max_send_wr=2, max_recv_wr=2)))
    rc_connect(silent, gx, ip, 0xfffff0, timeout=18, retry_cnt=7)
    send(silent, 5, write=True)
    time.sleep(0.2)
finally:
    subprocess.run(["ip", "addr", "del", f"{extra}/24", "dev", ndev])
check(wait_gid(extra, False), f"{extra}'s GID goes with the address")

send(ud[0], 3, (ah, ud[1].qp_num))
send(rc[1], 4)
wcs = completions(3, 8.0)
check(wcs.get(3) == e.IBV_WC_LOC_QP_OP_ERR,
      f"a datagram through an AH from {extra}, deleted: LOC_QP_OP_ERR: {wcs.get(3)}")
check(wcs.get(4) == e.IBV_WC_LOC_QP_OP_ERR,
      f"a SEND of the RC QP from {extra}, deleted: LOC_QP_OP_ERR: {wcs.get(4)}")
check(wcs.get(5) == e.IBV_WC_LOC_QP_OP_ERR,
      f"a WRITE from {extra} in flight when it was deleted: LOC_QP_OP_ERR at its "
      f"retransmission: {wcs.get(5)}")
ctx.close()
sys.exit(1 if check.fails else 0)
