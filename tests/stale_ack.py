#!/usr/bin/env python3
# An ACK of packets sent before a go-back completes what it covers.
#
# Between two ibv_rc_pingpong over a link that reorders (netem), the
# server's last 64 KiB SEND went like this once in a CI run: the client NAKed
# a sequence error, the server went back and sent again from there, and
# before its second copies reached the end of the message, the client's ACK
# of the first copies came (they had arrived late, in order). oxe ignored
# that ACK: it counted only PSNs sent since the go-back. The client had all
# it wanted and closed its QP; the server's second copies went unanswered
# and its SEND failed with RETRY_EXC_ERR.
#
# Here an RC QP of DEV (pyverbs) sends one 200-packet SEND to a scripted
# responder: a UDP socket at port 4791 in the network namespace PEER_NS,
# answering with hand-made packets (roce.py). It takes the first window
# (128 packets), then holds the QP back in a go-back: an RNR NAK at PSN
# 1050, so that nothing is sent again for 655 ms (a sequence NAK's copies
# would go out at once and race the next answer). Then it ACKs PSN 1127,
# the first copies. That ACK must count: the QP's window opens to PSN 1255,
# the rest of the message goes out, and the responder ACKs the last PSN
# once it has seen it. Ignored, the window stays shut at 1177, the last PSN
# never comes and the SEND fails with RETRY_EXC_ERR.
#
# Usage (in the QP's namespace): stale_ack.py DEV GID_INDEX LOCAL_IP PEER_IP PEER_NS
import socket
import sys
import threading
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.wr import SGE, SendWR

import roce

dev, gid_index, local_ip, peer_ip, peer_ns = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
MTU, NPKTS, SQ_PSN, PEER_QPN = 256, 200, 1000, 0x4242
NAK_AT, STALE_ACK = SQ_PSN + 50, SQ_PSN + 127
LAST = SQ_PSN + NPKTS - 1


rx, tx = roce.peer_sockets(peer_ns, peer_ip)
log = []


def answer(qpn, psn, syndrome):
    tx.sendto(roce.packet(peer_ip, local_ip, roce.bth(roce.ACKNOWLEDGE, qpn, psn)
                          + roce.aeth(syndrome)), (local_ip, 0))


def responder(qpn, stop):
    seen, naked, acked = set(), False, False
    while not stop.is_set():
        try:
            data = rx.recv(4096)
        except socket.timeout:
            continue
        b = roce.parse_bth(data)
        if b is None or b[1] != PEER_QPN:
            continue
        seen.add(b[2])
        if not naked and set(range(SQ_PSN, STALE_ACK + 1)) <= seen:
            answer(qpn, NAK_AT, roce.RNR_655MS)
            time.sleep(0.05)
            answer(qpn, STALE_ACK, roce.ACK)
            naked = True
            log.append(f"RNR NAK {NAK_AT}, ACK {STALE_ACK}")
        elif naked and b[2] == LAST:
            answer(qpn, LAST, roce.ACK)
            if not acked:
                log.append(f"saw {LAST}, ACK {LAST}")
            acked = True


ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 4)
mr = MR(pd, MTU * NPKTS, e.IBV_ACCESS_LOCAL_WRITE)
qp = roce.rc_qp(pd, cq, gid_index, peer_ip, PEER_QPN, sq_psn=SQ_PSN)

stop = threading.Event()
t = threading.Thread(target=responder, args=(qp.qp_num, stop))
t.start()
qp.post_send(SendWR(opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(mr.buf, MTU * NPKTS, mr.lkey)]))
status, deadline = None, time.monotonic() + 30
while status is None and time.monotonic() < deadline:
    n, wcs = cq.poll(1)
    if n:
        status = wcs[0].status
    else:
        time.sleep(0.01)
stop.set()
t.join()
print("# responder: " + "; ".join(log))
if status != e.IBV_WC_SUCCESS:
    print(f"# the SEND completed with status {status} (0 is success)" if status is not None
          else "# no completion in 30 s")
    sys.exit(1)
