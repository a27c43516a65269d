#!/usr/bin/env python3
# A datagram is taken only if it was sent to an address of the device.
#
# A UD QP of DEV (pyverbs) has receives posted. From the network namespace
# PEER_NS, a UD SEND_ONLY with the QP's Q_Key and a correct ICRC comes from
# PEER_IP to OTHER_IP, an address of the QP's namespace on another
# interface (lo, added for the test; the IP stack takes it on the veth all
# the same): it must be dropped and counted on the device and on the QP, as
# rdma_rxe's `rxe_chk_dgid` drops it. The same datagram to LOCAL_IP, the
# device's GID, is taken, with its own bytes.
#
# Usage (in the QP's namespace):
#   ud_dest.py DEV LOCAL_IP PEER_IP OTHER_IP PEER_NS
import struct
import subprocess
import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR

import roce

dev, local_ip, peer_ip, other_ip, peer_ns = sys.argv[1:6]
QKEY, PEER_QPN, UD_SEND_ONLY, GRH = 0x11111111, 0x4243, 0x64, 40




ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 4)
mr = MR(pd, 2 * 128, e.IBV_ACCESS_LOCAL_WRITE)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=1, max_recv_wr=2)))
attr = QPAttr(port_num=1)
attr.qkey = QKEY
attr.pkey_index = 0
qp.to_rts(attr)
for i in range(2):
    qp.post_recv(RecvWR(wr_id=i, num_sge=1, sg=[SGE(mr.buf + 128 * i, 128, mr.lkey)]))
tx = roce.in_namespace(peer_ns, roce.raw_socket)
drops = roce.dev_stat(dev, "rcv_drops")
check = roce.Checks()


def send(dst, data):
    deth = struct.pack("!II", QKEY, PEER_QPN)
    tx.sendto(roce.packet(peer_ip, dst, roce.bth(UD_SEND_ONLY, qp.qp_num, 0) + deth + data),
              (dst, 0))


subprocess.run(["ip", "addr", "add", f"{other_ip}/32", "dev", "lo"], check=True)
subprocess.run(["ip", "-n", peer_ns, "route", "add", f"{other_ip}/32", "via", local_ip],
               check=True)
try:
    send(other_ip, b"elsewhr!")
    wc = roce.poll_one(cq, 1.0)
finally:
    subprocess.run(["ip", "-n", peer_ns, "route", "del", f"{other_ip}/32"])
    subprocess.run(["ip", "addr", "del", f"{other_ip}/32", "dev", "lo"])
check(wc is None, f"a datagram to {other_ip} (lo's) completes nothing")
n = roce.qp_attr(dev, qp.qp_num, "rcv_drops")
check(n == 1, f"counted on QP {qp.qp_num}: drv_rcv_drops {n}, expected 1")
d = roce.dev_stat(dev, "rcv_drops")
check(d == drops + 1, f"counted on {dev}: rcv_drops {drops} -> {d}")

send(local_ip, b"genuine!")
wc = roce.poll_one(cq, 5.0)
check(wc is not None and wc.status == e.IBV_WC_SUCCESS and wc.byte_len == GRH + 8,
      f"the same datagram to {local_ip} completes: "
      + (f"status {wc.status}, {wc.byte_len} bytes" if wc else "no completion in 5 s"))
got = mr.read(8, 128 * wc.wr_id + GRH) if wc else b""
check(got == b"genuine!", f"the receive holds that datagram's bytes: {got!r}")
check(roce.qp_attr(dev, qp.qp_num, "rcv_drops") == 1, "and nothing more is dropped")
ctx.close()
sys.exit(1 if check.fails else 0)
