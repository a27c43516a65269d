#!/usr/bin/env python3
# Sends one hand-made RoCEv2 packet (IPv4, UDP 4791) through a raw socket,
# for the wire suite's bad-input cases:
#   roce_inject.py SRC DST QPN good|bad-icrc|short
# good: a SEND_ONLY with a correct ICRC; bad-icrc: the same with its ICRC
# flipped; short: a UDP payload too short to hold a BTH and an ICRC.
import socket, struct, sys, zlib

src, dst, qpn, kind = sys.argv[1], sys.argv[2], int(sys.argv[3], 0), sys.argv[4]
bth = struct.pack("!BBHII", 0x04, 0, 0xFFFF, qpn & 0xFFFFFF, 0x80000000)
payload = b"oxe!"
ib = bth + payload if kind != "short" else b"\x04\x00\xff"
udp_len = 8 + len(ib) + (4 if kind != "short" else 0)
udp = struct.pack("!HHHH", 0xC000, 4791, udp_len, 0)
ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + udp_len, 0x1234, 0x4000, 64, 17, 0,
                 socket.inet_aton(src), socket.inet_aton(dst))
# The ICRC: CRC-32 over 8 bytes of ones (the LRH), then the packet with
# TOS, TTL, IP checksum, UDP checksum and the BTH's FECN/BECN byte as ones.
m_ip = bytearray(ip); m_ip[1] = 0xFF; m_ip[8] = 0xFF; m_ip[10:12] = b"\xff\xff"
m_udp = bytearray(udp); m_udp[6:8] = b"\xff\xff"
m_ib = bytearray(ib)
if len(m_ib) >= 12:
    m_ib[4] = 0xFF
icrc = zlib.crc32(b"\xff" * 8 + bytes(m_ip) + bytes(m_udp) + bytes(m_ib))
if kind == "bad-icrc":
    icrc ^= 1
pkt = ip + udp + ib + (struct.pack("<I", icrc) if kind != "short" else b"")
s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
s.sendto(pkt, (dst, 0))
