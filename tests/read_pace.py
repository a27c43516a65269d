#!/usr/bin/env python3
# A READ asked for again on the wire: answered again, every byte right, at a
# pace; and a QP destroyed while its responses wait for the pace goes
# cleanly.
#
# A scripted requester (a UDP socket at port 4791 in the network namespace
# PEER_NS, sending hand-made packets, roce.py) reads a 600-packet MR of an RC
# QP of DEV (pyverbs), then plays what each kind of requester does after a
# lost response:
#   1. a READ of the whole MR, every response taken;
#   2. rdma_rxe's requester: once the READ was answered, the same READ asked
#      for again from PSN 10. 590 packets are still to go from the gap, more
#      than oxe counts as a dear loss (`DEAR_READ`, 256): the QP's responses
#      are paced from there on (the tracepoint oxe_read_pace says so, with
#      the QP's number and PSN 10; 45-wire checks it);
#   3. oxe's requester: a new READ of the MR and, at once behind it, that
#      READ asked for again from its sixth packet, while it is still being
#      answered. The responder drops what it was sending and answers from
#      there (`skip_to_read_again`), which ends the pace;
#   4. the READ of step 3 asked for again once answered: paced again; the QP
#      is destroyed at its first response, with the rest waiting for
#      the pace (an hrtimer, cancelled in teardown; or fired, with the QP
#      gone).
# Each response's bytes are compared with the MR's.
#
# Usage (in the QP's namespace): read_pace.py DEV GID_INDEX LOCAL_IP PEER_IP PEER_NS
import os
import socket
import sys
import time

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD

import roce

dev, gid_index, local_ip, peer_ip, peer_ns = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
MTU, NPKTS, PEER_QPN = 256, 600, 0x4343
SIZE = MTU * NPKTS


# Every response of a READ fits: none lost on the way in here.
rx, tx = roce.peer_sockets(peer_ns, peer_ip, rcvbuf=16 << 20)

ctx = Context(name=dev)
pd = PD(ctx)
cq = CQ(ctx, 4)
mr = MR(pd, SIZE, e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_READ)
data = os.urandom(SIZE)
mr.write(data, SIZE)
qp = roce.rc_qp(pd, cq, gid_index, peer_ip, PEER_QPN, access=e.IBV_ACCESS_REMOTE_READ,
                 dest_rd_atomic=4)
print(f"# qpn={qp.qp_num}")

bad = []


def ask(base, first):
    """The READ at PSN `base` (the whole MR), asked for from its packet `first` on."""
    ib = roce.bth(roce.READ_REQUEST, qp.qp_num, base + first, ack_req=True)
    ib += roce.reth(mr.buf + first * MTU, mr.rkey, SIZE - first * MTU)
    tx.sendto(roce.packet(peer_ip, local_ip, ib), (local_ip, 0))


def responses(base, want, after=None, quiet=0.0, limit=20.0):
    """Takes the responses of the READ at PSN `base` until every PSN in `want`
    came (or `after` of them did), then until none came for `quiet` seconds.
    Returns the PSNs that came and the seconds from the first to the last."""
    seen, n, first = set(), 0, None
    deadline = time.monotonic() + limit
    last = time.monotonic()
    while time.monotonic() < deadline:
        done = want <= seen if after is None else n >= after
        if done and time.monotonic() - last >= quiet:
            break
        try:
            pkt = rx.recv(4096)
        except socket.timeout:
            continue
        b = roce.parse_bth(pkt)
        if b is None or b[1] != PEER_QPN or not roce.READ_RESPONSE_FIRST <= b[0] <= roce.READ_RESPONSE_ONLY:
            continue
        last = time.monotonic()
        first = first or last
        opcode, _, psn = b
        i = psn - base
        hdr = 12 if opcode == roce.READ_RESPONSE_MIDDLE else 16
        if not 0 <= i < NPKTS or pkt[hdr:-4] != data[i * MTU:(i + 1) * MTU]:
            bad.append(psn)
        seen.add(psn)
        n += 1
    return seen, last - (first or last)


def need(step, got, want):
    seen, took = got
    missing = want - seen
    if missing:
        print(f"# {step}: {len(missing)} responses never came (first PSN {min(missing)})")
        sys.exit(1)
    print(f"# {step}: {len(seen)} responses in {took * 1000:.0f} ms")


all_psns = set(range(NPKTS))
ask(0, 0)
need("1. READ", responses(0, all_psns), all_psns)
ask(0, 10)
need("2. READ asked for again from PSN 10 once answered", responses(0, set(range(10, NPKTS))),
     set(range(10, NPKTS)))
base = NPKTS
ask(base, 0)
ask(base, 5)
want = set(range(base, base + NPKTS))
need("3. a new READ, asked for again from its sixth packet at once", responses(base, want, quiet=0.5),
     want)
start = time.monotonic()
ask(base, 10)
responses(base, None, after=1)
qp.close()
took = time.monotonic() - start
late, _ = responses(base, None, after=1 << 30, limit=1.0)
print(f"# 4. QP destroyed {took * 1000:.0f} ms after the READ was asked for again; {len(late)} were on the way")
ctx.close()
if bad:
    print(f"# {len(bad)} responses with the wrong bytes or PSN (first PSN {bad[0]})")
    sys.exit(1)
