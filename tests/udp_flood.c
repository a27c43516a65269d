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
 * With -f FROM it measures the link one way instead (the ceiling under the
 * two-guest benchmark): the guest that owns FROM sends from it to PEER for
 * SECONDS + 10 s; the other one waits for the traffic to arrive, counts
 * IFACE's received packets over SECONDS and prints the UDP payload rate
 * ("link: N MB/s ..."). Exits 1 when nothing arrives within 60 s.
 *
 * Usage: udp_flood [-i IFACE] [-t SECONDS] [-p PROCS] [-s SIZE] [-w SPIN]
 *                  [-f FROM] PEER
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

#include "udp_link.h"

#define STALL_S 5
#define MAX_PROCS 16

static long counter(const char *ifname, const char *name)
{
	char path[128];
	long n = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/net/%s/statistics/%s", ifname, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &n) != 1)
		n = -1;
	fclose(f);
	return n;
}

static long tx_packets(const char *ifname)
{
	return counter(ifname, "tx_packets");
}

/* The receiving end of -f: the rate at which SIZE-byte datagrams arrive. */
static int measure(const char *ifname, int secs, int size)
{
	long n0, n1;
	double t0, t1;
	int waited;

	n0 = counter(ifname, "rx_packets");
	for (waited = 0; waited < 600; waited++) {
		usleep(100000);
		n1 = counter(ifname, "rx_packets");
		if (n1 < 0)
			return 2;
		if (n1 - n0 > 100)
			break;
		n0 = n1;
	}
	if (waited == 600) {
		printf("%s: no traffic arrived in 60 s\n", ifname);
		return 1;
	}
	sleep(1);
	n0 = counter(ifname, "rx_packets");
	t0 = now();
	sleep(secs);
	n1 = counter(ifname, "rx_packets");
	t1 = now();
	printf("link: %.2f MB/s, %.0f packets/s of %d bytes\n",
	       (n1 - n0) * (double)size / (t1 - t0) / 1e6, (n1 - n0) / (t1 - t0), size);
	return 0;
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
	struct sockaddr_in from = { .sin_family = AF_INET };
	const char *from_arg = NULL;
	pid_t pids[MAX_PROCS];
	long first, last, n;
	time_t start;

	while ((opt = getopt(argc, argv, "i:t:p:s:w:f:")) != -1) {
		switch (opt) {
		case 'i': ifname = optarg; break;
		case 't': secs = atoi(optarg); break;
		case 'p': procs = atoi(optarg); break;
		case 's': size = atoi(optarg); break;
		case 'w': spin = atoi(optarg); break;
		case 'f': from_arg = optarg; break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || procs < 1 || procs > MAX_PROCS || size < 1 ||
	    size > 1472 || inet_pton(AF_INET, argv[optind], &peer.sin_addr) != 1 ||
	    (from_arg && inet_pton(AF_INET, from_arg, &from.sin_addr) != 1))
		goto usage;
	if (from_arg) {
		if (!is_local(&from))
			return measure(ifname, secs, size);
		secs += 10;
	}
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
	fprintf(stderr, "usage: udp_flood [-i IFACE] [-t SECONDS] [-p PROCS] [-s SIZE] [-w SPIN] [-f FROM] PEER\n");
	return 2;
}
