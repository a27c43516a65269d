// SPDX-License-Identifier: GPL-2.0
/*
 * The link's transaction ceiling, the floor under ib_atomic_bw between two
 * guests: an atomic is one small request and one small response, and
 * perftest keeps 128 of them outstanding. Both guests run the same command;
 * the one that owns FROM is the client: it keeps WINDOW requests of
 * REQ bytes (44: BTH, AtomicETH and ICRC) in flight to PEER's port 4792 and
 * sends the next one for each response, with a system call each, as a
 * post's doorbell is one. The other end answers each request with RESP
 * bytes (28: BTH, AETH, AtomicAckETH and ICRC) from user space. After a
 * second of warm-up the client counts the responses of SECONDS and prints
 * "link_rr: N transactions/s". A window lost on the link (20 ms without a
 * response) is sent again. Exits 1 when no response came within 60 s.
 *
 * Usage: udp_rr [-t SECONDS] [-w WINDOW] [-s REQ] [-r RESP] -f FROM PEER
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "udp_link.h"

#define PORT 4792

/* Answers every request until none came for 3 s (60 s before the first). */
static int server(int s, int resp)
{
	static char buf[2048];
	struct sockaddr_in from;
	socklen_t flen;
	int seen = 0;

	for (;;) {
		struct pollfd p = { .fd = s, .events = POLLIN };

		if (poll(&p, 1, seen ? 3000 : 60000) <= 0)
			break;
		flen = sizeof(from);
		if (recvfrom(s, buf, sizeof(buf), 0, (struct sockaddr *)&from, &flen) < 0)
			continue;
		seen = 1;
		sendto(s, buf, resp, 0, (struct sockaddr *)&from, flen);
	}
	return seen ? 0 : 1;
}

static int client(int s, const struct sockaddr_in *peer, int secs, int window, int req, int resp)
{
	static char buf[2048];
	double start = now(), t0 = 0, t;
	long n = 0;
	int got_any = 0;

	if (connect(s, (const struct sockaddr *)peer, sizeof(*peer)) < 0) {
		perror("connect");
		return 2;
	}
	for (;;) {
		struct pollfd p = { .fd = s, .events = POLLIN };

		t = now();
		if (!got_any && t - start > 60) {
			printf("link_rr: no response in 60 s\n");
			return 1;
		}
		if (t0 && t - t0 >= secs)
			break;
		if (poll(&p, 1, 20) <= 0) {
			/* Nothing for 20 ms: the window was lost (or no server yet). */
			for (int i = 0; i < window; i++)
				send(s, buf, req, 0);
			continue;
		}
		if (recv(s, buf, sizeof(buf), 0) < 0)
			continue;
		if (!got_any) {
			got_any = 1;
			start = now();
		}
		if (!t0 && now() - start >= 1)
			t0 = now();
		else if (t0)
			n++;
		send(s, buf, req, 0);
	}
	printf("link_rr: %.0f transactions/s, window %d, %d-byte requests, %d-byte responses\n",
	       n / (now() - t0), window, req, resp);
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in peer = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	struct sockaddr_in from = { .sin_family = AF_INET, .sin_port = htons(PORT) };
	int secs = 10, window = 128, req = 44, resp = 28, opt, s;
	const char *from_arg = NULL;

	while ((opt = getopt(argc, argv, "t:w:s:r:f:")) != -1) {
		switch (opt) {
		case 't': secs = atoi(optarg); break;
		case 'w': window = atoi(optarg); break;
		case 's': req = atoi(optarg); break;
		case 'r': resp = atoi(optarg); break;
		case 'f': from_arg = optarg; break;
		default: goto usage;
		}
	}
	if (optind != argc - 1 || !from_arg || secs < 1 || window < 1 || req < 1 ||
	    req > 1472 || resp < 1 || resp > 1472 ||
	    inet_pton(AF_INET, argv[optind], &peer.sin_addr) != 1 ||
	    inet_pton(AF_INET, from_arg, &from.sin_addr) != 1)
		goto usage;
	s = socket(AF_INET, SOCK_DGRAM, 0);
	if (s < 0) {
		perror("socket");
		return 2;
	}
	if (!is_local(&from)) {
		struct sockaddr_in any = { .sin_family = AF_INET, .sin_port = htons(PORT) };

		if (bind(s, (struct sockaddr *)&any, sizeof(any)) < 0) {
			perror("bind");
			return 2;
		}
		return server(s, resp);
	}
	return client(s, &peer, secs, window, req, resp);
usage:
	fprintf(stderr, "usage: udp_rr [-t SECONDS] [-w WINDOW] [-s REQ] [-r RESP] -f FROM PEER\n");
	return 2;
}
