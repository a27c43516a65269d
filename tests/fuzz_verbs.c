// SPDX-License-Identifier: GPL-2.0
/*
 * A small verbs fuzzer: random but bounded sequences of verbs calls with
 * random arguments against one oxe device, from a printed seed so that a
 * failure can be replayed (fuzz_verbs SEED ITERATIONS). Objects are kept in
 * small tables and picked at random, so calls hit live, destroyed-and-reused
 * and mismatched objects (an MR of one PD with a QP of another, QPs connected
 * to QPs that are gone, keys that were freed). The kernel must not crash or
 * warn; the process ends with nothing pinned once everything is destroyed.
 *
 * Prints one KTAP line: ok if the run ends with VmPin 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "oxe_test.h"

#define N 8
#define ARENA (16 << 20)

static uint64_t state;

static uint64_t rnd(void)
{
	/* xorshift64*: tiny, and the same sequence for the same seed. */
	state ^= state >> 12;
	state ^= state << 25;
	state ^= state >> 27;
	return state * 2685821657736338717ULL;
}

static uint64_t pick(uint64_t n)
{
	return n ? rnd() % n : 0;
}

/* A value from a menu of interesting ones. */
static uint64_t wild(void)
{
	static const uint64_t v[] = { 0, 1, 7, 8, 4095, 4096, 4097, 65536, 1 << 20,
				      0x7fffffff, 0x80000000, 0xffffffff, UINT64_MAX,
				      UINT64_MAX - 4095 };

	return rnd() % 3 ? v[pick(sizeof(v) / sizeof(v[0]))] : rnd();
}

static struct ibv_context *ctx;
static struct ibv_pd *pd[N];
static struct ibv_cq *cq[N];
static struct ibv_qp *qp[N];
static struct ibv_mr *mr[N];
static uint32_t old_keys[N];
static char *arena;

static void modify(struct ibv_qp *q)
{
	struct ibv_qp_attr a = {};
	union ibv_gid gid;
	int gi = gid_index(ctx);
	int mask = IBV_QP_STATE;

	ibv_query_gid(ctx, 1, gi, &gid);
	a.qp_state = pick(7);
	switch (a.qp_state) {
	case IBV_QPS_INIT:
		a.port_num = rnd() % 8 ? 1 : wild();
		a.qp_access_flags = rnd();
		mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		break;
	case IBV_QPS_RTR:
		a.path_mtu = pick(7);
		struct ibv_qp *peer = qp[pick(N)];

		a.dest_qp_num = rnd() % 4 ? (peer ? peer->qp_num : 0) : wild();
		a.rq_psn = rnd();
		a.max_dest_rd_atomic = pick(256);
		a.min_rnr_timer = pick(32);
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = gid;
		a.ah_attr.grh.sgid_index = gi;
		a.ah_attr.grh.hop_limit = 64;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		break;
	case IBV_QPS_RTS:
		a.timeout = pick(32);
		a.retry_cnt = pick(8);
		a.rnr_retry = pick(8);
		a.sq_psn = rnd();
		a.max_rd_atomic = pick(256);
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			IBV_QP_MAX_QP_RD_ATOMIC;
		break;
	default:
		break;
	}
	if (rnd() % 8 == 0)
		mask = rnd() & 0x1fffff;
	ibv_modify_qp(q, &a, mask);
}

static void post_one(struct ibv_qp *q)
{
	struct ibv_sge sge[4];
	struct ibv_send_wr wr = {}, *bad;
	int n = pick(5);

	for (int i = 0; i < n; i++) {
		struct ibv_mr *m = mr[pick(N)];

		sge[i].addr = rnd() % 4 ? (uintptr_t)arena + pick(ARENA) : wild();
		sge[i].length = rnd() % 4 ? pick(70000) : wild();
		sge[i].lkey = m && rnd() % 8 ? m->lkey : (rnd() % 2 ? old_keys[pick(N)] : wild());
	}
	wr.wr_id = rnd();
	wr.sg_list = sge;
	wr.num_sge = n;
	wr.opcode = rnd() % 8 ? pick(7) : wild();
	wr.send_flags = IBV_SEND_SIGNALED | (rnd() % 4 ? 0 : rnd() & 0xf);
	struct ibv_mr *t = mr[pick(N)];
	uint64_t raddr = rnd() % 4 ? (uintptr_t)arena + pick(ARENA) : wild();
	uint32_t rkey = t && rnd() % 4 ? t->rkey : (rnd() % 2 ? old_keys[pick(N)] : wild());

	if (wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr & ~7ULL;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = rnd();
		wr.wr.atomic.swap = rnd();
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ibv_post_send(q, &wr, &bad);
}

static void post_recv_one(struct ibv_qp *q)
{
	struct ibv_mr *m = mr[pick(N)];
	struct ibv_sge sge = {
		.addr = (uintptr_t)arena + pick(ARENA), .length = pick(70000),
		.lkey = m ? m->lkey : wild(),
	};
	struct ibv_recv_wr wr = { .wr_id = rnd(), .sg_list = &sge, .num_sge = pick(2) }, *bad;

	ibv_post_recv(q, &wr, &bad);
}

static void step(void)
{
	int i = pick(N), j = pick(N);
	struct ibv_wc wc[8];

	switch (pick(14)) {
	case 0:
		if (!pd[i])
			pd[i] = ibv_alloc_pd(ctx);
		else if (ibv_dealloc_pd(pd[i]) == 0)
			pd[i] = NULL;
		break;
	case 1:
		if (!cq[i])
			cq[i] = ibv_create_cq(ctx, rnd() % 4 ? 1 + pick(512) : (int)wild(), NULL, NULL, 0);
		else if (ibv_destroy_cq(cq[i]) == 0)
			cq[i] = NULL;
		break;
	case 2:
	case 3: {
		if (qp[i]) {
			if (ibv_destroy_qp(qp[i]) == 0)
				qp[i] = NULL;
			break;
		}
		struct ibv_qp_init_attr a = {
			.send_cq = cq[pick(N)], .recv_cq = cq[pick(N)],
			.qp_type = rnd() % 8 ? IBV_QPT_RC : pick(8),
			.sq_sig_all = pick(2),
			.cap = { .max_send_wr = rnd() % 4 ? pick(256) : wild(),
				 .max_recv_wr = rnd() % 4 ? pick(256) : wild(),
				 .max_send_sge = pick(40), .max_recv_sge = pick(40),
				 .max_inline_data = rnd() % 4 ? pick(600) : wild() },
		};
		if (pd[j] && a.send_cq && a.recv_cq)
			qp[i] = ibv_create_qp(pd[j], &a);
		break;
	}
	case 4:
	case 5:
		if (mr[i]) {
			uint32_t k = mr[i]->lkey;

			if (ibv_dereg_mr(mr[i]) == 0) {
				old_keys[i] = k;
				mr[i] = NULL;
			}
		} else if (pd[j]) {
			uint64_t off = pick(ARENA), len = rnd() % 4 ? 1 + pick(ARENA - off) : wild();
			void *addr = rnd() % 8 ? arena + off : (void *)(uintptr_t)wild();

			mr[i] = ibv_reg_mr_iova2(pd[j], addr, len, rnd() % 4 ? (uintptr_t)addr : wild(),
						 rnd() % 4 ? 0xf & rnd() : (unsigned int)rnd());
		}
		break;
	case 6:
	case 7:
		if (qp[i])
			modify(qp[i]);
		break;
	case 8:
	case 9:
	case 10:
		if (qp[i])
			post_one(qp[i]);
		break;
	case 11:
		if (qp[i])
			post_recv_one(qp[i]);
		break;
	case 12:
		if (cq[i])
			ibv_poll_cq(cq[i], 8, wc);
		break;
	case 13:
		if (cq[i])
			ibv_req_notify_cq(cq[i], pick(2));
		break;
	}
}

int main(int argc, char **argv)
{
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 0) : (uint64_t)getpid();
	long iters = argc > 2 ? atol(argv[2]) : 2000;
	state = seed ? seed : 1;
	printf("TAP version 13\n1..1\n# fuzz_verbs seed %llu iterations %ld (replay: fuzz_verbs %llu %ld)\n",
	       (unsigned long long)seed, iters, (unsigned long long)seed, iters);
	fflush(stdout);
	ctx = open_dev();
	arena = mmap(NULL, ARENA, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		     -1, 0);
	if (!ctx || arena == MAP_FAILED) {
		printf("not ok 1 fuzz: no device\n");
		return 1;
	}
	for (long n = 0; n < iters; n++)
		step();
	/* Tear down in dependency order; what fails to go is a bug. */
	int stuck = 0;

	for (int i = 0; i < N; i++)
		if (qp[i] && ibv_destroy_qp(qp[i]))
			stuck++;
	for (int i = 0; i < N; i++) {
		if (mr[i] && ibv_dereg_mr(mr[i]))
			stuck++;
		if (cq[i] && ibv_destroy_cq(cq[i]))
			stuck++;
	}
	for (int i = 0; i < N; i++)
		if (pd[i] && ibv_dealloc_pd(pd[i]))
			stuck++;
	long pin = vmpin_kb();

	ibv_close_device(ctx);
	if (!stuck && pin == 0)
		printf("ok 1 fuzz: seed %llu, %ld calls, everything destroyed, nothing pinned\n",
		       (unsigned long long)seed, iters);
	else
		printf("not ok 1 fuzz: seed %llu: %d objects would not go, VmPin %ld kB\n",
		       (unsigned long long)seed, stuck, pin);
	return !(stuck == 0 && pin == 0);
}
