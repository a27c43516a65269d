#!/usr/bin/env python3
# A connected QP takes packets from its peer's address only.
#
# An RC QP of DEV (pyverbs) is connected to PEER_IP and has one receive
# posted. From the network namespace PEER_NS, a SEND_ONLY with the QP's
# next PSN and a correct ICRC comes from SPOOF_IP, an address of the same
# subnet that is not the peer's: it must be dropped (no completion) and
# counted on the device and on that QP (`rdma -dd res show qp`'s
# drv_rcv_drops), so that the QP someone aims at can be told. So must the
# packet from PEER_IP to another address of the QP's netdev (OTHER_IP,
# added for the test), not the one the QP sends from, and the packet from
# PEER_IP with a P_Key of another partition (0x1234; the port has the
# default one only, as rdma_rxe's `check_keys` requires).
# Then the same packet from PEER_IP with the default P_Key and other bytes
# is taken: the receive completes with those bytes, not the dropped ones.
#
# Usage (in the QP's namespace):
#   wrong_source.py DEV GID_INDEX LOCAL_IP PEER_IP SPOOF_IP OTHER_IP NETDEV PEER_NS
import subprocess
import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.wr import SGE, RecvWR

import roce

dev, gid_index = sys.argv[1], int(sys.argv[2])
local_ip, peer_ip, spoof_ip, other_ip, netdev, peer_ns = sys.argv[3:9]
PEER_QPN, SEND_ONLY = 0x4243, 0x04




ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 4)
mr = MR(pd, 64, e.IBV_ACCESS_LOCAL_WRITE)
qp = roce.rc_qp(pd, cq, gid_index, peer_ip, PEER_QPN)
qp.post_recv(RecvWR(num_sge=1, sg=[SGE(mr.buf, 64, mr.lkey)]))
tx = roce.in_namespace(peer_ns, roce.raw_socket)
drops = roce.dev_stat(dev, "rcv_drops")


def send(src, data, pkey=0xFFFF, dst=local_ip):
    tx.sendto(roce.packet(src, dst, roce.bth(SEND_ONLY, qp.qp_num, 0, ack_req=True,
                                             pkey=pkey) + data), (dst, 0))


check = roce.Checks()


send(spoof_ip, b"spoofed!")
wc = roce.poll_one(cq, 1.0)
check(wc is None, f"a SEND from {spoof_ip} completes nothing")
n = roce.qp_attr(dev, qp.qp_num, "rcv_drops")
check(n == 1, f"counted on QP {qp.qp_num}: drv_rcv_drops {n}, expected 1")
d = roce.dev_stat(dev, "rcv_drops")
check(d == drops + 1, f"counted on {dev}: rcv_drops {drops} -> {d}")

subprocess.run(["ip", "addr", "add", f"{other_ip}/24", "dev", netdev], check=True)
send(peer_ip, b"elsewhr!", dst=other_ip)
wc = roce.poll_one(cq, 1.0)
subprocess.run(["ip", "addr", "del", f"{other_ip}/24", "dev", netdev], check=True)
check(wc is None, f"a SEND to {other_ip}, not the QP's address, completes nothing")
n = roce.qp_attr(dev, qp.qp_num, "rcv_drops")
check(n == 2, f"counted on QP {qp.qp_num}: drv_rcv_drops {n}, expected 2")

send(peer_ip, b"partitn!", pkey=0x1234)
wc = roce.poll_one(cq, 1.0)
check(wc is None, "a SEND with P_Key 0x1234 completes nothing")
n = roce.qp_attr(dev, qp.qp_num, "rcv_drops")
check(n == 3, f"counted on QP {qp.qp_num}: drv_rcv_drops {n}, expected 3")

send(peer_ip, b"genuine!")
wc = wc or roce.poll_one(cq, 5.0)
check(wc is not None and wc.status == e.IBV_WC_SUCCESS and wc.byte_len == 8,
      f"the same SEND from {peer_ip} completes: "
      + (f"status {wc.status}, {wc.byte_len} bytes" if wc else "no completion in 5 s"))
got = mr.read(8, 0)
check(got == b"genuine!", f"the receive holds the peer's bytes: {got!r}")
check(roce.qp_attr(dev, qp.qp_num, "rcv_drops") == 3, "and nothing more is dropped")
ctx.close()
sys.exit(1 if check.fails else 0)
