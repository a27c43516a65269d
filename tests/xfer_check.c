// SPDX-License-Identifier: GPL-2.0
/*
 * Moves data both ways over one RC QP and checks every byte, unlike
 * ibv_rc_pingpong --chk (which looks at the first byte of each page and
 * only prints what it finds). Each iteration i:
 *   client: RDMA WRITE of pattern (i,0) into the server's region 0, then a
 *           SEND of pattern (i,1) into the server's region 1;
 *   server: checks regions 0 and 1, fills region 3 with pattern (i,3) and
 *           SENDs pattern (i,2) back;
 *   client: checks what it received, then RDMA READs the server's region 3
 *           and checks it.
 * So every iteration carries 2 x SIZE bytes each way, through WRITE, SEND
 * and READ. Patterns depend on the iteration: a stale or misplaced buffer
 * shows as a mismatch. Exits 0 when every byte of every iteration was
 * right, 1 on a mismatch or an error completion (the first one is printed),
 * 2 on a setup error, 3 when nothing completed for 60 s.
 *
 * With -u the QP is UC, where a message may be lost: the client SENDs ITERS
 * messages (the iteration number, then pattern (i,1)), the server keeps
 * NREGIONS receives posted and checks that every message that arrives is
 * whole, right and later than the one before; it prints how many arrived.
 * Exits 0 when at least one did and all were right.
 *
 * With -a (both sides; SIZE at least 16) the client's RDMA WRITE leaves
 * the first 8 bytes of region 0 out and places them with an ATOMIC_WRITE;
 * -f adds a FLUSH (global, over region 0) before the SEND: IBA 1.5's
 * operations between two implementations (oxe and rdma_rxe), checked by
 * the same byte comparison. Both are unsignaled (wr_id 100 and 200): an
 * error still completes. rdma_rxe (7.2) drops a FLUSH that carries the
 * standard ICRC (see README), so it takes -a only.
 *
 * With -z the peer gets the rkey of a second MR over the same buffer at
 * iova 0 (region 0 starts at address 0): for a peer that is rdma_rxe,
 * which sends an ATOMIC_WRITE or FLUSH it goes back over with va 0.
 *
 * Usage: xfer_check -d DEV -g GID_INDEX [-u | -a | -f] [-z] [-s SIZE] [-n ITERS]
 *                   [-p PORT] [-m MTU] [SERVER_ADDRESS]
 * The server runs without an address; the client connects to it over TCP
 * to exchange QP numbers, PSNs, GIDs and the server's rkey.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "oxe_test.h"

#define NREGIONS 4
#define STALL_S 60

struct dest {
	uint32_t qpn, psn, rkey;
	uint64_t addr;
	union ibv_gid gid;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr, *mr0;
static uint8_t *buf;
static size_t size;
static int atomic_write, flush, iova0;

static uint8_t *region(int k)
{
	return buf + (size_t)k * size;
}

/* splitmix64: a different stream for each (iteration, region). */
static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void fill(uint8_t *p, uint32_t iter, int k)
{
	uint64_t s = ((uint64_t)iter << 8) | (uint64_t)k, v = 0;
	size_t i;

	for (i = 0; i < size; i++) {
		if (i % 8 == 0)
			v = next(&s);
		p[i] = (uint8_t)(v >> (8 * (i % 8)));
	}
}

static int check(const uint8_t *p, uint32_t iter, int k, const char *what)
{
	uint64_t s = ((uint64_t)iter << 8) | (uint64_t)k, v = 0;
	size_t i, bad = 0, first = 0;
	uint8_t want = 0, got = 0;

	for (i = 0; i < size; i++) {
		uint8_t e;

		if (i % 8 == 0)
			v = next(&s);
		e = (uint8_t)(v >> (8 * (i % 8)));
		if (p[i] != e) {
			if (!bad++) {
				first = i;
				want = e;
				got = p[i];
			}
		}
	}
	if (bad)
		fprintf(stderr,
			"iteration %u: %s: %zu of %zu bytes wrong, first at offset %zu (0x%02x, expected 0x%02x)\n",
			iter, what, bad, size, first, got, want);
	return bad ? 1 : 0;
}

/*
 * Completions are told apart by wr_id: a bit per work request (sends 0-3,
 * receives 4-7). Waits until every bit of mask has completed; others that
 * arrive meanwhile are kept for a later wait. Any error completion ends the
 * run.
 */
static unsigned int seen;

static void wait_for(unsigned int mask)
{
	time_t last = time(NULL);

	while ((seen & mask) != mask) {
		struct ibv_wc wc[4];
		int i, got = ibv_poll_cq(cq, 4, wc);

		if (got < 0) {
			fprintf(stderr, "ibv_poll_cq failed\n");
			exit(1);
		}
		for (i = 0; i < got; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "Failed status %s (%d) for wr_id %llu\n",
					ibv_wc_status_str(wc[i].status), wc[i].status,
					(unsigned long long)wc[i].wr_id);
				exit(1);
			}
			seen |= 1u << wc[i].wr_id;
		}
		if (got)
			last = time(NULL);
		else if (time(NULL) - last > STALL_S) {
			fprintf(stderr, "no completion for %d s\n", STALL_S);
			exit(3);
		}
	}
	seen &= ~mask;
}

#define SENT(k) (1u << (k))
#define RECEIVED(k) (1u << (4 + (k)))

static void post_recv(int k)
{
	struct ibv_sge sge = { (uintptr_t)region(k), (uint32_t)size, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 4 + k, .sg_list = &sge, .num_sge = 1 }, *bad;

	if (ibv_post_recv(qp, &wr, &bad)) {
		perror("ibv_post_recv");
		exit(1);
	}
}

static void post_send(int k, enum ibv_wr_opcode op, const struct dest *rem, int rk)
{
	struct ibv_sge sge = { (uintptr_t)region(k), (uint32_t)size, mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = k, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (op != IBV_WR_SEND) {
		wr.wr.rdma.remote_addr = rem->addr + (uint64_t)rk * size;
		wr.wr.rdma.rkey = rem->rkey;
	}
	if (ibv_post_send(qp, &wr, &bad)) {
		perror("ibv_post_send");
		exit(1);
	}
}

/*
 * -a: region 0 but its first 8 bytes by RDMA WRITE (signaled, as k), those
 * 8 by ATOMIC_WRITE; -f: then a FLUSH of the region. Unsignaled.
 */
static void post_write_flush(int k, const struct dest *rem)
{
	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	struct ibv_sge sge = { (uintptr_t)region(0) + 8, (uint32_t)size - 8, mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = k, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = rem->addr + 8, .rkey = rem->rkey },
	}, *bad;

	if (ibv_post_send(qp, &wr, &bad)) {
		perror("ibv_post_send");
		exit(1);
	}
	ibv_wr_start(qpx);
	qpx->wr_id = 100 + k;
	qpx->wr_flags = 0;
	ibv_wr_atomic_write(qpx, rem->rkey, rem->addr, region(0));
	qpx->wr_id = 200 + k;
	if (flush && librxe_wr_flush(qpx, rem->rkey, rem->addr, (uint32_t)size, FLUSH_TYPE_GLOBAL,
			    FLUSH_LEVEL_RANGE)) {
		ibv_wr_abort(qpx);
		fprintf(stderr, "librxe's QP is not laid out as v44's: cannot post FLUSH\n");
		exit(2);
	}
	if (ibv_wr_complete(qpx)) {
		perror("ibv_wr_complete");
		exit(1);
	}
}

static int exchange(int fd, const struct dest *me, struct dest *rem)
{
	char msg[128], gid[33];
	int i;

	for (i = 0; i < 16; i++)
		sprintf(gid + 2 * i, "%02x", me->gid.raw[i]);
	snprintf(msg, sizeof(msg), "%06x %06x %08x %016llx %s", me->qpn, me->psn,
		 me->rkey, (unsigned long long)me->addr, gid);
	if (write(fd, msg, sizeof(msg)) != sizeof(msg))
		return -1;
	memset(msg, 0, sizeof(msg));
	for (size_t got = 0; got < sizeof(msg);) {
		ssize_t r = read(fd, msg + got, sizeof(msg) - got);

		if (r <= 0)
			return -1;
		got += r;
	}
	unsigned long long addr;

	if (sscanf(msg, "%x %x %x %llx %32s", &rem->qpn, &rem->psn, &rem->rkey, &addr, gid) != 5)
		return -1;
	rem->addr = addr;
	for (i = 0; i < 16; i++) {
		unsigned int b;

		sscanf(gid + 2 * i, "%2x", &b);
		rem->gid.raw[i] = b;
	}
	return 0;
}

static int connect_to(const char *host, int port)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *t;
	char svc[16];
	int fd = -1, tries;

	snprintf(svc, sizeof(svc), "%d", port);
	if (getaddrinfo(host, svc, &hints, &res))
		return -1;
	/* The server may not listen yet (its libraries come over 9p). */
	for (tries = 0; tries < 300 && fd < 0; tries++) {
		for (t = res; t; t = t->ai_next) {
			fd = socket(t->ai_family, t->ai_socktype, t->ai_protocol);
			if (fd < 0)
				continue;
			if (!connect(fd, t->ai_addr, t->ai_addrlen))
				break;
			close(fd);
			fd = -1;
		}
		if (fd < 0)
			usleep(100000);
	}
	freeaddrinfo(res);
	return fd;
}

static int listen_on(int port)
{
	struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_port = htons(port),
				  .sin6_addr = IN6ADDR_ANY_INIT };
	int one = 1, lfd = socket(AF_INET6, SOCK_STREAM, 0), fd;

	if (lfd < 0)
		return -1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1)) {
		close(lfd);
		return -1;
	}
	fd = accept(lfd, NULL, NULL);
	close(lfd);
	return fd;
}

static int uc;

static int connect_qp(const struct dest *me, const struct dest *rem, int gidx,
		      enum ibv_mtu mtu)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = mtu, .dest_qp_num = rem->qpn,
		.rq_psn = rem->psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = rem->gid, .sgid_index = gidx, .hop_limit = 64 },
		},
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  (uc ? 0 : IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = me->psn;
	if (uc)
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = me->psn;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/*
 * UC, client: each message carries its iteration number in its first 4
 * bytes and pattern (i,1) after them; one send in flight (a UC send
 * completes once sent).
 */
static void uc_send_all(uint32_t iters, const struct dest *rem)
{
	for (uint32_t it = 1; it <= iters; it++) {
		fill(region(1), it, 1);
		memcpy(region(1), &it, sizeof(it));
		post_send(1, IBV_WR_SEND, rem, 0);
		wait_for(SENT(1));
	}
}

/* UC, server: checks one received message; 0 if right. */
static int uc_check_one(int k, uint32_t *last)
{
	uint8_t *p = region(k);
	uint64_t s, v;
	uint32_t it;

	memcpy(&it, p, sizeof(it));
	if (it <= *last) {
		fprintf(stderr, "message %u arrived after %u\n", it, *last);
		return 1;
	}
	*last = it;
	/* The pattern's own first bytes where the sender put the number. */
	s = ((uint64_t)it << 8) | 1;
	v = next(&s);
	for (size_t i = 0; i < sizeof(it) && i < size; i++)
		p[i] = (uint8_t)(v >> (8 * i));
	return check(p, it, 1, "UC SEND from the client");
}

/*
 * UC, server: keeps a receive posted in every region and checks what
 * completes, until the client has sent everything ("end" on fd) and nothing
 * more came for a second. Returns the number of messages that arrived, -1
 * on a wrong one or an error completion.
 */
static long uc_receive_all(int fd)
{
	uint32_t last = 0;
	long got = 0;
	int ended = 0;
	time_t quiet = 0;
	char done[4];

	for (;;) {
		struct ibv_wc wc;
		int n = ibv_poll_cq(cq, 1, &wc);

		if (n < 0)
			return -1;
		if (n == 0) {
			struct timeval tv = { 0, 0 };
			fd_set r;

			if (ended && time(NULL) - quiet > 1)
				return got;
			FD_ZERO(&r);
			FD_SET(fd, &r);
			if (!ended && select(fd + 1, &r, NULL, NULL, &tv) > 0) {
				if (read(fd, done, 4) != 4)
					return -1;
				ended = 1;
				quiet = time(NULL);
			}
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS || wc.wr_id < 4 || wc.byte_len != size) {
			fprintf(stderr, "completion %s (%d), wr_id %llu, %u bytes\n",
				ibv_wc_status_str(wc.status), wc.status,
				(unsigned long long)wc.wr_id, wc.byte_len);
			return -1;
		}
		if (uc_check_one((int)wc.wr_id - 4, &last))
			return -1;
		got++;
		quiet = time(NULL);
		post_recv((int)wc.wr_id - 4);
	}
}

static enum ibv_mtu mtu_enum(int bytes)
{
	switch (bytes) {
	case 256: return IBV_MTU_256;
	case 512: return IBV_MTU_512;
	case 1024: return IBV_MTU_1024;
	case 2048: return IBV_MTU_2048;
	case 4096: return IBV_MTU_4096;
	default: return 0;
	}
}

int main(int argc, char **argv)
{
	const char *devname = NULL, *server = NULL;
	int client;
	int gidx = 0, port = 18600, mtu_bytes = 0, opt, fd, i;
	uint32_t iters = 100, it;
	struct ibv_device **list;
	struct ibv_port_attr pa;
	struct ibv_qp_init_attr_ex qa = {
		.cap = { .max_send_wr = 8, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp_attr init = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};
	struct dest me, rem;
	struct timeval t0, t1;
	enum ibv_mtu mtu;
	char done[4];
	double s;
	int access;

	size = 65536;
	while ((opt = getopt(argc, argv, "d:g:s:n:p:m:uafz")) != -1) {
		switch (opt) {
		case 'u': uc = 1; break;
		case 'f': flush = 1; atomic_write = 1; break;
		case 'a': atomic_write = 1; break;
		case 'z': iova0 = 1; break;
		case 'd': devname = optarg; break;
		case 'g': gidx = atoi(optarg); break;
		case 's': size = strtoull(optarg, NULL, 0); break;
		case 'n': iters = strtoul(optarg, NULL, 0); break;
		case 'p': port = atoi(optarg); break;
		case 'm': mtu_bytes = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s -d DEV -g GIDX [-u | -a | -f] [-z] [-s SIZE] [-n ITERS] [-p PORT] [-m MTU] [SERVER]\n",
				argv[0]);
			return 2;
		}
	}
	if (optind < argc)
		server = argv[optind];
	client = server != NULL;
	if (!size || size > (1UL << 30) || !iters || (uc && size < 4) ||
	    (atomic_write && (uc || size < 16))) {
		fprintf(stderr, "SIZE must be 1 (4 with -u, 16 with -a or -f) .. 1 GiB, ITERS at least 1; no -u with -a or -f\n");
		return 2;
	}
	if (uc)
		qa.qp_type = IBV_QPT_UC;

	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!devname || !strcmp(ibv_get_device_name(list[i]), devname))
			break;
	if (!list || !list[i] || !(ctx = ibv_open_device(list[i]))) {
		fprintf(stderr, "no device %s\n", devname ? devname : "");
		return 2;
	}
	if (ibv_query_port(ctx, 1, &pa) || ibv_query_gid(ctx, 1, gidx, &me.gid)) {
		fprintf(stderr, "cannot query port 1 or GID %d\n", gidx);
		return 2;
	}
	mtu = mtu_bytes ? mtu_enum(mtu_bytes) : pa.active_mtu;
	if (!mtu) {
		fprintf(stderr, "MTU must be 256, 512, 1024, 2048 or 4096\n");
		return 2;
	}
	buf = aligned_alloc(4096, (NREGIONS * size + 4095) & ~4095UL);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!buf || !pd || !cq) {
		fprintf(stderr, "cannot allocate buffer, PD or CQ\n");
		return 2;
	}
	memset(buf, 0, NREGIONS * size);
	access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		 (flush ? UAPI_ACCESS_FLUSH_GLOBAL : 0);
	mr = ibv_reg_mr(pd, buf, NREGIONS * size, access);
	qa.send_cq = qa.recv_cq = cq;
	qa.pd = pd;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	if (atomic_write) {
		init.qp_access_flags |= flush ? UAPI_ACCESS_FLUSH_GLOBAL : 0;
		qa.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND |
				    IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_WRITE;
	}
	qp = mr ? ibv_create_qp_ex(ctx, &qa) : NULL;
	if (!qp || ibv_modify_qp(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				 IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) {
		fprintf(stderr, "cannot register the MR or set up the QP: %s\n", strerror(errno));
		return 2;
	}
	srand48(getpid() ^ time(NULL));
	me.qpn = qp->qp_num;
	me.psn = lrand48() & 0xffffff;
	me.rkey = mr->rkey;
	me.addr = (uintptr_t)buf;
	/*
	 * -z: the peer writes and reads through a second MR over the same
	 * buffer at iova 0, so region 0 starts at address 0. rdma_rxe (7.2)
	 * sends an ATOMIC_WRITE or a FLUSH it goes back over with va 0
	 * (req_retry() resets the address of a WQE that is neither an atomic
	 * nor a READ or WRITE to 0): with region 0 at 0 that address is the
	 * right one, so a lossy link cannot fail the case by chance. It also
	 * covers an MR whose iova is not its address. Without -z a requester
	 * that did what rxe does fails the case.
	 */
	if (iova0) {
		mr0 = ibv_reg_mr_iova(pd, buf, NREGIONS * size, 0, access);
		if (!mr0) {
			fprintf(stderr, "cannot register the MR at iova 0: %s\n", strerror(errno));
			return 2;
		}
		me.rkey = mr0->rkey;
		me.addr = 0;
	}

	fd = server ? connect_to(server, port) : listen_on(port);
	if (fd < 0) {
		if (client)
			fprintf(stderr, "Couldn't connect to %s:%d\n", server, port);
		else
			fprintf(stderr, "Couldn't listen to port %d\n", port);
		return 2;
	}
	/* The server's first receive is posted before it tells its QPN. */
	for (int k = 0; !client && k < (uc ? NREGIONS : 1); k++)
		post_recv(uc ? k : 1);
	if (exchange(fd, &me, &rem) || connect_qp(&me, &rem, gidx, mtu)) {
		fprintf(stderr, "cannot exchange addresses or connect the QP\n");
		return 2;
	}
	/* Both QPs are ready before the client's first packet. */
	if (write(fd, "rdy", 4) != 4 || read(fd, done, 4) != 4) {
		fprintf(stderr, "the peer went away\n");
		return 2;
	}

	gettimeofday(&t0, NULL);
	if (uc && client) {
		uc_send_all(iters, &rem);
		if (write(fd, "end", 4) != 4 || read(fd, done, 4) != 4) {
			fprintf(stderr, "the peer went away at the end\n");
			return 1;
		}
		printf("UC: %u messages of %zu bytes sent\n", iters, size);
		return 0;
	}
	if (uc) {
		long got = uc_receive_all(fd);

		if (got < 0 || write(fd, "fin", 4) != 4)
			return 1;
		printf("UC: %ld of %u messages of %zu bytes arrived, every byte right\n",
		       got, iters, size);
		return got > 0 ? 0 : 1;
	}
	for (it = 1; it <= iters; it++) {
		if (client) {
			post_recv(2);
			fill(region(0), it, 0);
			fill(region(1), it, 1);
			if (atomic_write)
				post_write_flush(0, &rem);
			else
				post_send(0, IBV_WR_RDMA_WRITE, &rem, 0);
			post_send(1, IBV_WR_SEND, &rem, 0);
			wait_for(SENT(0) | SENT(1) | RECEIVED(2));
			if (check(region(2), it, 2, "SEND from the server"))
				return 1;
			post_send(3, IBV_WR_RDMA_READ, &rem, 3);
			wait_for(SENT(3));
			if (check(region(3), it, 3, "RDMA READ of the server's memory"))
				return 1;
		} else {
			wait_for(RECEIVED(1));
			if (check(region(0), it, 0, "RDMA WRITE from the client") |
			    check(region(1), it, 1, "SEND from the client"))
				return 1;
			fill(region(3), it, 3);
			fill(region(2), it, 2);
			/* Before the reply: the client's next SEND follows it. */
			if (it < iters)
				post_recv(1);
			post_send(2, IBV_WR_SEND, &rem, 0);
			wait_for(SENT(2));
		}
	}
	gettimeofday(&t1, NULL);
	/*
	 * Neither side destroys its QP while the other may still need it: the
	 * client's last READ is answered before the server tears down ("end"),
	 * and the server's last SEND is acknowledged before the client does
	 * ("fin", once SENT(2) came). The client ACKs that SEND before its
	 * receive completes, but a lost ACK is only recovered by the server's
	 * retransmission, which a destroyed QP never answers: RETRY_EXC_ERR.
	 */
	if (client ? write(fd, "end", 4) != 4 || read(fd, done, 4) != 4
		   : read(fd, done, 4) != 4 || write(fd, "fin", 4) != 4) {
		fprintf(stderr, "the peer went away at the end\n");
		return 1;
	}
	close(fd);
	s = (t1.tv_sec - t0.tv_sec) + (t1.tv_usec - t0.tv_usec) / 1e6;
	printf("%u iterations of %zu bytes: %llu bytes each way checked in %.2f s (%.2f MB/s each way)\n",
	       iters, size, 2ULL * size * iters, s, s > 0 ? 2.0 * size * iters / s / 1e6 : 0);

	ibv_destroy_qp(qp);
	if (mr0)
		ibv_dereg_mr(mr0);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(buf);
	return 0;
}
