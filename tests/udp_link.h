/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by the programs that measure or exercise the two-guest link
 * with plain UDP (udp_flood, udp_rr): the monotonic clock, and whether an
 * address is this guest's own (each program runs the same command line in
 * both guests and takes its role from that).
 */
#ifndef UDP_LINK_H
#define UDP_LINK_H

#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static inline double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Whether ADDR is one of this host's addresses. */
static inline int is_local(const struct sockaddr_in *addr)
{
	struct sockaddr_in a = *addr;
	int s = socket(AF_INET, SOCK_DGRAM, 0), ok;

	a.sin_port = 0;
	ok = s >= 0 && bind(s, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (s >= 0)
		close(s);
	return ok;
}

#endif
