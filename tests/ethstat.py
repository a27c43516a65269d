#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Prints a netdev's driver statistics (what `ethtool -S DEV` shows), one
"name value" per line, through the SIOCETHTOOL ioctl: the guests have no
ethtool. virtio_net's tx_queue_N_kicks against tx_queue_N_packets is how
many packets each notification of the host carried."""
import fcntl
import socket
import struct
import sys

SIOCETHTOOL = 0x8946
ETHTOOL_GSTRINGS = 0x1b
ETHTOOL_GSSET_INFO = 0x37
ETHTOOL_GSTATS = 0x1d
ETH_SS_STATS = 1
ETH_GSTRING_LEN = 32


def ioctl(sock, dev, buf):
    ifr = struct.pack("16sP", dev.encode(), buf.buffer_info()[0])
    fcntl.ioctl(sock, SIOCETHTOOL, ifr)


def main():
    import array
    dev = sys.argv[1] if len(sys.argv) > 1 else "eth0"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    # struct ethtool_sset_info: cmd, reserved, u64 sset_mask, u32 data[]
    info = array.array("B", struct.pack("=IIQI", ETHTOOL_GSSET_INFO, 0, 1 << ETH_SS_STATS, 0))
    ioctl(s, dev, info)
    n = struct.unpack_from("=IIQI", info.tobytes())[3]
    # struct ethtool_gstrings: cmd, string_set, len, data[]
    strs = array.array("B", struct.pack("=III", ETHTOOL_GSTRINGS, ETH_SS_STATS, n) + bytes(n * ETH_GSTRING_LEN))
    ioctl(s, dev, strs)
    raw = strs.tobytes()[12:]
    names = [raw[i * ETH_GSTRING_LEN:(i + 1) * ETH_GSTRING_LEN].split(b"\0")[0].decode() for i in range(n)]
    # struct ethtool_stats: cmd, n_stats, u64 data[]
    st = array.array("B", struct.pack("=II", ETHTOOL_GSTATS, n) + bytes(n * 8))
    ioctl(s, dev, st)
    vals = struct.unpack_from("=%dQ" % n, st.tobytes(), 8)
    for k, v in zip(names, vals):
        print(k, v)


main()
