#!/usr/bin/env python3
# Sends one hand-made RoCEv2 packet (IPv4, UDP 4791) through a raw socket,
# for the wire suite's bad-input cases:
#   roce_inject.py SRC DST QPN good|bad-icrc|short
# good: a SEND_ONLY with a correct ICRC; bad-icrc: the same with its ICRC
# flipped; short: a UDP payload too short to hold a BTH and an ICRC.
import sys

import roce

src, dst, qpn, kind = sys.argv[1], sys.argv[2], int(sys.argv[3], 0), sys.argv[4]
ib = roce.bth(0x04, qpn, 0, ack_req=True) + b"oxe!" if kind != "short" else b"\x04\x00\xff"
pkt = roce.packet(src, dst, ib, icrc_xor=1 if kind == "bad-icrc" else 0)
roce.raw_socket().sendto(pkt, (dst, 0))
