#!/usr/bin/env python3
# A NAK for a PSN the QP has not sent is stale (from before a RESET) or
# forged: it must fail, rewind or hold back nothing (as rdma_rxe, whose
# completer finds no WQE sent for it).
#
# An RC QP of DEV (pyverbs) connected to PEER_IP, with nothing posted, gets
# an RNR NAK for its next PSN from the network namespace PEER_NS (hand-made,
# roce.py). It used to be taken: the QP waited out an RNR timer (655 ms)
# with nothing sent, holding back what was posted meanwhile, and counted a
# retry against its rnr_retry of 1. Now `rdma -dd res show qp` shows no RNR
# wait and no retry.
#
# Usage (in the QP's namespace): stale_nak.py DEV GID_INDEX LOCAL_IP PEER_IP PEER_NS
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD

import roce

dev, gid_index, local_ip, peer_ip, peer_ns = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
PEER_QPN, SQ_PSN = 0x4246, 500


tx = roce.in_namespace(peer_ns, roce.raw_socket)
ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 4)
qp = roce.rc_qp(pd, cq, gid_index, peer_ip, PEER_QPN, sq_psn=SQ_PSN)
check = roce.Checks()


tx.sendto(roce.packet(peer_ip, local_ip, roce.bth(roce.ACKNOWLEDGE, qp.qp_num, SQ_PSN)
                      + roce.aeth(roce.RNR_655MS)), (local_ip, 0))
time.sleep(0.3)
wait, tries = roce.qp_attr(dev, qp.qp_num, "sq_rnr_wait"), roce.qp_attr(dev, qp.qp_num, "sq_rnr_retries")
check(wait == 0 and tries == 0,
      f"an RNR NAK for PSN {SQ_PSN}, not sent yet: sq_rnr_wait {wait}, sq_rnr_retries {tries}")
ctx.close()
sys.exit(1 if check.fails else 0)
