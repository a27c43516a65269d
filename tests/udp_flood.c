// SPDX-License-Identifier: GPL-2.0
/*
 * Checks that a NIC's transmit queue keeps moving under paced UDP traffic:
 * PROCS processes each send SIZE-byte datagrams to PEER's discard port with
 * a short pause after each, so the device's ring drains and refills tens of
 * thousands of times a second, every send a notification to the device.
 * That is where the two-guest link lost a notification (a guest's store to
 * the ring and its load of the device's event index reordered: QEMU 7.2's
 * TCG, translating a one-vCPU guest, gave its locked instructions no host
 * barrier); the TX queue then stopped for good. Every second the parent
 * reads IFACE's tx_packets: exits 1 when it did not move for STALL_S
 * seconds, 0 after SECONDS with the queue moving throughout, 2 on a setup
 * error.
 *
 * Usage: udp_flood [-i IFACE] [-t SECONDS] [-p PROCS] [-s SIZE] [-w SPIN] PEER
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STALL_S 5
#define MAX_PROCS 16

static long tx_packets(const char *ifname)
{
	char path[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/tx_packets", ifname);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

static void sender(const struct sockaddr_in *peer, int size, int spin)
{
	static char buf[1500];
	int s = socket(AF_INET, SOCK_DGRAM, 0);

	if (s < 0)
		_exit(2);
	for (;;) {
		/* Errors (a full qdisc, an ICMP error) only mean a lost datagram. */
		sendto(s, buf, size, 0, (const struct sockaddr *)peer, sizeof(*peer));
		for (volatile int j = 0; j < spin; j++)
			;
	}
}

int main(int argc, char **argv)
{
	const char *ifname = "eth0";
	int secs = 60, procs = 3, size = 64, spin = 1000, opt, i, still = 0, rc = 0;
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(9) };
	pid_t pids[MAX_PROCS];
	long first, last, n;
	time_t start;

	while ((opt = getopt(argc, argv, "i:t:p:s:w:")) != -1) {
		switch (opt) {
		case 'i': ifname = optarg; break;
		case 't': secs = atoi(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 's': size = atoi(optarg); break;
		case 'w': spin = atoi(optarg); break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || procs < 1 || procs > MAX_PROCS || size < 1 ||
	    size > 1472 || inet_pton(AF_INET, argv[optind], &peer.sin_addr) != 1)
		goto usage;
	first = last = tx_packets(ifname);
	if (first < 0) {
		fprintf(stderr, "no tx_packets for %s\n", ifname);
		return 2;
	}
	for (i = 0; i < procs; i++) {
		pids[i] = fork();
		if (pids[i] < 0) {
			perror("fork");
			procs = i;
			rc = 2;
			goto out;
		}
		if (pids[i] == 0)
			sender(&peer, size, spin);
	}
	start = time(NULL);
	while (time(NULL) - start < secs) {
		sleep(1);
		n = tx_packets(ifname);
		still = n == last ? still + 1 : 0;
		last = n;
		if (still >= STALL_S) {
			printf("%s: tx_packets stayed at %ld for %d s, %ld s in\n", ifname, n,
			       STALL_S, (long)(time(NULL) - start));
			rc = 1;
			break;
		}
	}
	if (!rc)
		printf("%ld packets in %d s\n", last - first, secs);
out:
	for (i = 0; i < procs; i++)
		kill(pids[i], SIGKILL);
	for (i = 0; i < procs; i++)
		waitpid(pids[i], NULL, 0);
	return rc;
usage:
	fprintf(stderr, "usage: udp_flood [-i IFACE] [-t SECONDS] [-p PROCS] [-s SIZE] [-w SPIN] PEER\n");
	return 2;
}
