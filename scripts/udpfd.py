#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
# udpfd.py RCVBUF FD LOCAL_PORT REMOTE_PORT -- CMD...: runs CMD with, as
# descriptor FD, a UDP socket bound to 127.0.0.1:LOCAL_PORT and connected to
# REMOTE_PORT, whose receive buffer is RCVBUF bytes (up to the host's
# net.core.rmem_max): a QEMU dgram netdev of local.type=fd takes it.
import os
import socket
import sys

buf, fd, lport, rport = map(int, sys.argv[1:5])
cmd = sys.argv[sys.argv.index("--") + 1:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buf)
s.bind(("127.0.0.1", lport))
s.connect(("127.0.0.1", rport))
os.dup2(s.fileno(), fd)
os.set_inheritable(fd, True)
os.execvp(cmd[0], cmd)
