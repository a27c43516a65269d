// SPDX-License-Identifier: GPL-2.0
/*
 * Fault injection on the verbs oxe implements: for N = 1, 2, ... the Nth
 * fault-injectable allocation (slab or page) of one verb call fails, through
 * the calling task's /proc/thread-self/fail-nth (failslab and
 * fail_page_alloc, told not to ignore sleeping allocations). Every failure
 * must be a clean error (ENOMEM or another errno, never a crash), leave
 * nothing pinned, and the verb must succeed again once N passes the number
 * of allocations it makes.
 *
 * Needs CONFIG_FAULT_INJECTION (the debug flavour); skips elsewhere.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "kselftest_harness.h"
#include "oxe_test.h"

static int fail_fd = -1;

/* Arms fail-nth for this thread; returns -1 where fault injection is absent. */
static int arm(int n)
{
	char s[16];

	if (fail_fd < 0)
		fail_fd = open("/proc/thread-self/fail-nth", O_RDWR);
	if (fail_fd < 0)
		return -1;
	snprintf(s, sizeof(s), "%d", n);
	return pwrite(fail_fd, s, strlen(s), 0) > 0 ? 0 : -1;
}

/* True if the armed fault was injected (the counter ran down to 0). */
static int fired(void)
{
	char s[16] = "";

	if (pread(fail_fd, s, sizeof(s) - 1, 0) <= 0)
		return 0;
	/* Disarm either way. */
	int left = atoi(s);

	if (left)
		pwrite(fail_fd, "0", 1, 0);
	return left == 0;
}

typedef int (*verb_fn)(struct ibv_context *ctx, struct ibv_pd *pd, char *buf);

static int do_reg_mr(struct ibv_context *ctx, struct ibv_pd *pd, char *buf)
{
	/* 8 MiB: several pin batches and an MTT that grows. */
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 8 << 20, IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_WRITE);

	if (!mr)
		return errno;
	return ibv_dereg_mr(mr) ? -1 : 0;
}

static int do_create_cq(struct ibv_context *ctx, struct ibv_pd *pd, char *buf)
{
	struct ibv_cq *cq = ibv_create_cq(ctx, 512, NULL, NULL, 0);

	if (!cq)
		return errno;
	return ibv_destroy_cq(cq) ? -1 : 0;
}

static int do_create_qp(struct ibv_context *ctx, struct ibv_pd *pd, char *buf)
{
	static struct ibv_cq *cq;
	struct ibv_qp_init_attr qia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 128, .max_recv_wr = 128, .max_send_sge = 2,
			 .max_recv_sge = 2 },
	};
	struct ibv_qp *qp;

	if (!cq)
		cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!cq)
		return -1;
	qia.send_cq = qia.recv_cq = cq;
	qp = ibv_create_qp(pd, &qia);
	if (!qp)
		return errno;
	return ibv_destroy_qp(qp) ? -1 : 0;
}

static int do_alloc_pd(struct ibv_context *ctx, struct ibv_pd *pd, char *buf)
{
	struct ibv_pd *p = ibv_alloc_pd(ctx);

	if (!p)
		return errno;
	return ibv_dealloc_pd(p) ? -1 : 0;
}

static void sweep(struct __test_metadata *_metadata, verb_fn fn, const char *name)
{
	struct ibv_context *ctx = open_dev();
	struct ibv_pd *pd;
	char *buf = mmap(NULL, 8 << 20, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int injected = 0, errors = 0;

	ASSERT_NE(NULL, ctx);
	pd = ibv_alloc_pd(ctx);
	ASSERT_NE(NULL, pd);
	ASSERT_NE(MAP_FAILED, buf);
	/* Faulted in from the last page to the first, so that frames do not
	 * follow addresses: the MTT grows run by run, allocation by allocation. */
	madvise(buf, 8 << 20, MADV_NOHUGEPAGE);
	for (long off = (8 << 20) - 4096; off >= 0; off -= 4096)
		buf[off] = 1;
	if (arm(0))
		SKIP(return, "no /proc/thread-self/fail-nth: fault injection is not built in");
	/* Unfaulted first: sets up what the verb needs around it (a CQ for QPs). */
	ASSERT_EQ(0, fn(ctx, pd, buf));
	for (int n = 1; n < 500; n++) {
		int ret;

		ASSERT_EQ(0, arm(n));
		ret = fn(ctx, pd, buf);
		if (!fired()) {
			/* Fewer than n allocations: the call must have worked. */
			EXPECT_EQ(0, ret) TH_LOG("%s: unfaulted call failed: %d", name, ret);
			break;
		}
		injected++;
		if (ret) {
			errors++;
			EXPECT_TRUE(ret == ENOMEM || ret == EFAULT || ret == EINVAL || ret == EIO)
				TH_LOG("%s: fault %d gave errno %d", name, n, ret);
		}
		EXPECT_EQ(0, vmpin_kb()) TH_LOG("%s: fault %d left pages pinned", name, n);
	}
	TH_LOG("%s: %d faults injected, %d surfaced as errors", name, injected, errors);
	EXPECT_LT(0, injected);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

TEST(reg_mr_under_allocation_faults)
{
	sweep(_metadata, do_reg_mr, "reg_mr");
}

TEST(create_cq_under_allocation_faults)
{
	sweep(_metadata, do_create_cq, "create_cq");
}

TEST(create_qp_under_allocation_faults)
{
	sweep(_metadata, do_create_qp, "create_qp");
}

TEST(alloc_pd_under_allocation_faults)
{
	sweep(_metadata, do_alloc_pd, "alloc_pd");
}

/*
 * ibv_post_send under allocation faults, RC and UC: the send turn of a post
 * into an empty flight runs in the poster's system call, where a fault can
 * leave the WQE's SGE list or the payload of its first packet without
 * memory. The WRITE must still complete, and successfully: a failed SGE
 * list failed the WQE and the QP (LOC_QP_OP_ERR, as rxe), and after a
 * failed payload nothing was sent, so no retransmit timer came for it (UC
 * has none) and the QP stalled until the next post. A fault in the
 * doorbell itself fails the post with the WQE in the ring, and the next
 * post's doorbell takes both.
 */
static void post_sweep(struct __test_metadata *_metadata, enum ibv_qp_type type)
{
	struct ibv_context *ctx = open_dev();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	char *src = malloc(65536), *dst = malloc(65536);
	int injected = 0, failed_posts = 0;
	struct ibv_cq *cq[2] = {};
	struct ibv_qp *qp[2] = {};
	struct ibv_mr *ms, *md;

	ASSERT_NE(NULL, pd);
	ASSERT_TRUE(src && dst);
	ms = ibv_reg_mr(pd, src, 65536, IBV_ACCESS_LOCAL_WRITE);
	md = ibv_reg_mr(pd, dst, 65536, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	ASSERT_TRUE(ms && md);
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr qia = {
			.qp_type = type,
			.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};

		cq[i] = ibv_create_cq(ctx, 64, NULL, NULL, 0);
		ASSERT_NE(NULL, cq[i]);
		qia.send_cq = qia.recv_cq = cq[i];
		qp[i] = ibv_create_qp(pd, &qia);
		ASSERT_NE(NULL, qp[i]);
	}
	for (int i = 0; i < 2; i++) {
		int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

		if (type == IBV_QPT_RC) {
			ASSERT_EQ(0, connect_rc(ctx, qp[i], qp[!i]->qp_num, access, 7));
		} else {
			ASSERT_EQ(0, connect_uc(ctx, qp[i], qp[!i]->qp_num, access));
		}
	}
	if (arm(0))
		SKIP(return, "no /proc/thread-self/fail-nth: fault injection is not built in");
	for (int n = 1; n < 200; n++) {
		int ret, f, want = 1;
		struct ibv_wc wc;

		ASSERT_EQ(0, arm(n));
		ret = post(qp[0], IBV_WR_RDMA_WRITE, src, 65536, ms->lkey, (uintptr_t)dst,
			   md->rkey, n);
		f = fired();
		if (ret) {
			failed_posts++;
			ASSERT_EQ(0, post(qp[0], IBV_WR_RDMA_WRITE, src, 65536, ms->lkey,
					  (uintptr_t)dst, md->rkey, 1000 + n));
			want = 2;
		}
		for (int i = 0; i < want; i++) {
			ASSERT_EQ(1, wait_wc(cq[0], &wc))
				TH_LOG("fault %d: the WRITE never completed", n);
			EXPECT_EQ(IBV_WC_SUCCESS, wc.status)
				TH_LOG("fault %d: %s", n, ibv_wc_status_str(wc.status));
		}
		if (!f)
			break;
		injected++;
	}
	TH_LOG("%d faults injected, %d failed the post", injected, failed_posts);
	EXPECT_LT(0, injected);
	for (int i = 0; i < 2; i++) {
		ibv_destroy_qp(qp[i]);
		ibv_destroy_cq(cq[i]);
	}
	ibv_dereg_mr(ms);
	ibv_dereg_mr(md);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

TEST(rc_post_send_under_allocation_faults)
{
	post_sweep(_metadata, IBV_QPT_RC);
}

TEST(uc_post_send_under_allocation_faults)
{
	post_sweep(_metadata, IBV_QPT_UC);
}

TEST_HARNESS_MAIN
