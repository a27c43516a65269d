// SPDX-License-Identifier: GPL-2.0
/*
 * Memory windows on one oxe device, through the stock libibverbs and librxe:
 * type 1 (ibv_bind_mw, which librxe turns into a BIND_MW send WQE) and
 * type 2 (a BIND_MW work request), the accesses a window grants and the ones
 * it refuses (outside its range though inside the MR, without its right,
 * from another QP, after unbind, invalidation or dealloc), zero-based
 * windows, the bind errors, and an MR that cannot go while a window holds
 * it. kselftest harness: KTAP output, one forked child per case.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "kselftest_harness.h"
#include "oxe_test.h"

#define BUF (64 << 10)
#define WIN_OFF 4096
#define WIN_LEN 8192
#define MR_ACC (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)
#define REM (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/*
 * qp[0] of the loop is the requester; qp[1] owns the memory: its MR (no
 * remote rights of its own, only MW_BIND) and the windows bound on it.
 */
FIXTURE(mw) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct loop l;
	char *src, *mem;
	struct ibv_mr *src_mr, *mr;
};

FIXTURE_SETUP(mw)
{
	self->ctx = open_dev();
	ASSERT_NE(NULL, self->ctx);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	ASSERT_EQ(0, loop_open(self->ctx, self->pd, &self->l));
	self->src = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	self->mem = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->src);
	ASSERT_NE(MAP_FAILED, self->mem);
	memset(self->mem, 0, BUF);
	self->src_mr = ibv_reg_mr(self->pd, self->src, BUF, IBV_ACCESS_LOCAL_WRITE);
	self->mr = ibv_reg_mr(self->pd, self->mem, BUF, MR_ACC);
	ASSERT_NE(NULL, self->src_mr);
	ASSERT_NE(NULL, self->mr);
}

FIXTURE_TEARDOWN(mw)
{
	/* Process exit releases everything; leaks are checked by the suite. */
}

/* Binds type 1 @mw on @qp over [addr, addr + len) with @access; the status
 * of the bind's completion (-1 if it could not be posted or never came). */
static int bind1(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mw *mw, struct ibv_mr *mr,
		 void *addr, uint64_t len, unsigned int access)
{
	struct ibv_mw_bind b = {
		.wr_id = 77,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = mr, .addr = (uintptr_t)addr, .length = len,
			       .mw_access_flags = access },
	};
	uint32_t old = mw->rkey;
	struct ibv_wc wc;

	if (ibv_bind_mw(qp, mw, &b))
		return -1;
	if (wait_wc(cq, &wc) != 1)
		return -1;
	/* librxe moved mw->rkey on; a failed bind must undo that (verbs(3)). */
	if (wc.status != IBV_WC_SUCCESS)
		mw->rkey = old;
	if (wc.status == IBV_WC_SUCCESS && (wc.opcode != IBV_WC_BIND_MW || wc.wr_id != 77))
		return -1;
	return wc.status;
}

/* Posts a BIND_MW work request for type 2 @mw, giving it @rkey. */
static int bind2(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mw *mw, uint32_t rkey,
		 struct ibv_mr *mr, void *addr, uint64_t len, unsigned int access)
{
	struct ibv_send_wr wr = {
		.wr_id = 78, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED,
		.bind_mw = { .mw = mw, .rkey = rkey,
			     .bind_info = { .mr = mr, .addr = (uintptr_t)addr, .length = len,
					    .mw_access_flags = access } },
	}, *bad;
	struct ibv_wc wc;

	if (ibv_post_send(qp, &wr, &bad))
		return -1;
	if (wait_wc(cq, &wc) != 1)
		return -1;
	if (wc.status == IBV_WC_SUCCESS && (wc.opcode != IBV_WC_BIND_MW || wc.wr_id != 78))
		return -1;
	return wc.status;
}

/* A local operation with an rkey in `invalidate_rkey`: LOCAL_INV. */
static int local_inv(struct ibv_qp *qp, struct ibv_cq *cq, uint32_t rkey)
{
	struct ibv_send_wr wr = {
		.wr_id = 79, .opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED,
		.invalidate_rkey = rkey,
	}, *bad;
	struct ibv_wc wc;

	if (ibv_post_send(qp, &wr, &bad))
		return -1;
	if (wait_wc(cq, &wc) != 1)
		return -1;
	return wc.status;
}


/* Window start in the MR, and where the fixture's window goes. */
#define WIN(self) ((self)->mem + WIN_OFF)

TEST_F(mw, type1_write_read_atomic_through_the_window)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->pd, IBV_MW_TYPE_1);
	uint32_t before;
	uint64_t *orig = (uint64_t *)(self->src + 1024);

	ASSERT_NE(NULL, mw);
	before = mw->rkey;
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->l.qp[1], self->l.cq[1], mw, self->mr, WIN(self),
					WIN_LEN, REM));
	/* librxe gave it the next key byte, as the kernel did. */
	EXPECT_EQ(ibv_inc_rkey(before), mw->rkey);
	memset(self->src, 'w', 256);
	ASSERT_EQ(IBV_WC_SUCCESS, loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 256,
					  self->src_mr->lkey, (uintptr_t)WIN(self) + 100,
					  mw->rkey));
	EXPECT_EQ(0, memcmp(WIN(self) + 100, self->src, 256));
	EXPECT_EQ(0, WIN(self)[99]);
	memset(WIN(self) + WIN_LEN - 64, 'r', 64);
	ASSERT_EQ(IBV_WC_SUCCESS, loop_op(&self->l, IBV_WR_RDMA_READ, self->src + 512, 64,
					  self->src_mr->lkey,
					  (uintptr_t)WIN(self) + WIN_LEN - 64, mw->rkey));
	EXPECT_EQ(0, memcmp(self->src + 512, WIN(self) + WIN_LEN - 64, 64));
	*(uint64_t *)(WIN(self) + 8) = 40;
	{
		struct ibv_sge sge = { .addr = (uintptr_t)orig, .length = 8,
				       .lkey = self->src_mr->lkey };
		struct ibv_send_wr wr = {
			.wr_id = 5, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD, .send_flags = IBV_SEND_SIGNALED,
			.wr.atomic = { .remote_addr = (uintptr_t)WIN(self) + 8,
				       .compare_add = 2, .rkey = mw->rkey },
		}, *bad;
		struct ibv_wc wc;

		ASSERT_EQ(0, ibv_post_send(self->l.qp[0], &wr, &bad));
		ASSERT_EQ(1, wait_wc(self->l.cq[0], &wc));
		EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
		EXPECT_EQ(40, *orig);
		EXPECT_EQ(42, *(uint64_t *)(WIN(self) + 8));
	}
	/* The MR itself grants nothing remote: its own rkey is refused. */
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 8,
						 self->src_mr->lkey, (uintptr_t)WIN(self),
						 self->mr->rkey));
}

TEST_F(mw, outside_the_window_but_inside_the_mr_is_refused)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->pd, IBV_MW_TYPE_1);

	ASSERT_NE(NULL, mw);
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->l.qp[1], self->l.cq[1], mw, self->mr, WIN(self),
					WIN_LEN, REM));
	memset(self->src, 'x', 64);
	/* rdma_rxe checks the range against the MR only and lets this by. */
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 64, self->src_mr->lkey,
			  (uintptr_t)WIN(self) + WIN_LEN - 32, mw->rkey));
	for (int i = 0; i < BUF; i++)
		if (self->mem[i]) {
			EXPECT_EQ(0, self->mem[i]) TH_LOG("byte %d written", i);
			break;
		}
}

TEST_F(mw, a_window_grants_only_its_rights)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->pd, IBV_MW_TYPE_1);

	ASSERT_NE(NULL, mw);
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->l.qp[1], self->l.cq[1], mw, self->mr, WIN(self),
					WIN_LEN, IBV_ACCESS_REMOTE_READ));
	ASSERT_EQ(IBV_WC_SUCCESS, loop_op(&self->l, IBV_WR_RDMA_READ, self->src, 64,
					  self->src_mr->lkey, (uintptr_t)WIN(self), mw->rkey));
	memset(self->src, 'x', 64);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 64, self->src_mr->lkey,
			  (uintptr_t)WIN(self), mw->rkey));
	EXPECT_EQ(0, WIN(self)[0]);
}

TEST_F(mw, type1_rebind_moves_the_key_and_unbind_revokes)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->pd, IBV_MW_TYPE_1);
	struct loop l2;
	uint32_t first;

	ASSERT_NE(NULL, mw);
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->l.qp[1], self->l.cq[1], mw, self->mr, WIN(self),
					WIN_LEN, REM));
	first = mw->rkey;
	/* Rebound elsewhere: the old key is stale, the new one works there. */
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->l.qp[1], self->l.cq[1], mw, self->mr, self->mem,
					4096, REM));
	EXPECT_NE(first, mw->rkey);
	EXPECT_EQ(IBV_WC_SUCCESS, loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 8,
					  self->src_mr->lkey, (uintptr_t)self->mem, mw->rkey));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 8, self->src_mr->lkey,
			  (uintptr_t)WIN(self), first));
	/* A zero-length bind unbinds (pyverbs' invalidation of type 1). */
	ASSERT_EQ(0, loop_open(self->ctx, self->pd, &l2));
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(l2.qp[1], l2.cq[1], mw, self->mr, self->mem, 0, 0));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  loop_op(&l2, IBV_WR_RDMA_WRITE, self->src, 8, self->src_mr->lkey,
			  (uintptr_t)self->mem, mw->rkey));
	loop_close(&l2);
}

/* A bind on fresh QPs (a failed bind moves the QP to ERR); its status. */
static int bind_fresh(struct ibv_context *ctx, struct ibv_pd *pd, struct ibv_mw *mw, int type,
		      uint32_t mw_rkey, struct ibv_mr *mr, void *addr, uint64_t len,
		      unsigned int access)
{
	struct loop l;
	int st;

	if (loop_open(ctx, pd, &l)) {
		loop_close(&l);
		return -1;
	}
	if (type == 1) {
		st = bind1(l.qp[1], l.cq[1], mw, mr, addr, len, access);
	} else {
		struct ibv_mw tmp = *mw;

		tmp.rkey = mw_rkey;
		st = bind2(l.qp[1], l.cq[1], &tmp, ibv_inc_rkey(mw_rkey), mr, addr, len,
			   access);
	}
	if (st != IBV_WC_SUCCESS) {
		struct ibv_qp_attr qa;
		struct ibv_qp_init_attr qia;

		/* The error moved the QP to ERR. */
		if (ibv_query_qp(l.qp[1], &qa, IBV_QP_STATE, &qia) || qa.qp_state != IBV_QPS_ERR)
			st = -2;
	}
	loop_close(&l);
	return st;
}

TEST_F(mw, type2_bind_then_local_invalidate)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->pd, IBV_MW_TYPE_2);
	uint32_t rkey;

	ASSERT_NE(NULL, mw);
	rkey = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->l.qp[1], self->l.cq[1], mw, rkey, self->mr,
					WIN(self), WIN_LEN, REM));
	memset(self->src, 'w', 64);
	EXPECT_EQ(IBV_WC_SUCCESS, loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 64,
					  self->src_mr->lkey, (uintptr_t)WIN(self), rkey));
	EXPECT_EQ(0, memcmp(WIN(self), self->src, 64));
	EXPECT_EQ(IBV_WC_SUCCESS, local_inv(self->l.qp[1], self->l.cq[1], rkey));
	memset(WIN(self), 0, 64);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 64, self->src_mr->lkey,
			  (uintptr_t)WIN(self), rkey));
	EXPECT_EQ(0, WIN(self)[0]);
}

/* Each refusal moves both QPs of a pair to ERR: a fresh pair for each. */
TEST_F(mw, type2_answers_only_its_qp_and_its_current_key)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->pd, IBV_MW_TYPE_2);
	struct loop l2;
	uint32_t rkey;

	ASSERT_NE(NULL, mw);
	rkey = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->l.qp[1], self->l.cq[1], mw, rkey, self->mr,
					WIN(self), WIN_LEN, REM));
	/* Bound to qp[1] of the fixture's pair: l2's responder is another QP. */
	ASSERT_EQ(0, loop_open(self->ctx, self->pd, &l2));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  loop_op(&l2, IBV_WR_RDMA_WRITE, self->src, 8, self->src_mr->lkey,
			  (uintptr_t)WIN(self), rkey));
	loop_close(&l2);
	/* A type 2 window is bound once: it must be freed before a new bind
	 * (o10-37.2.30), from whatever QP. */
	EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_fresh(self->ctx, self->pd, mw, 2, rkey, self->mr,
						  WIN(self), 64, REM));
	/* Its own QP still reaches it, under the bound key only. */
	EXPECT_EQ(IBV_WC_SUCCESS, loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 8,
					  self->src_mr->lkey, (uintptr_t)WIN(self), rkey));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 8, self->src_mr->lkey,
			  (uintptr_t)WIN(self), mw->rkey));
}

TEST_F(mw, type2_rebind_after_invalidate_and_send_with_invalidate)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->pd, IBV_MW_TYPE_2);
	uint32_t rkey;
	struct ibv_wc wc;

	ASSERT_NE(NULL, mw);
	rkey = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->l.qp[1], self->l.cq[1], mw, rkey, self->mr,
					WIN(self), WIN_LEN, REM));
	ASSERT_EQ(IBV_WC_SUCCESS, local_inv(self->l.qp[1], self->l.cq[1], rkey));
	/* Free again: it binds again, under the next key. The consumer presents
	 * the window's current key (librxe does not track type 2 keys). */
	mw->rkey = rkey;
	rkey = ibv_inc_rkey(rkey);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->l.qp[1], self->l.cq[1], mw, rkey, self->mr,
					WIN(self), WIN_LEN, REM));
	/* The peer invalidates it with a SEND_WITH_INV. */
	{
		struct ibv_sge rs = { .addr = (uintptr_t)self->mem + 32768, .length = 64,
				      .lkey = self->mr->lkey };
		struct ibv_recv_wr rw = { .wr_id = 9, .sg_list = &rs, .num_sge = 1 }, *rbad;
		struct ibv_sge ss = { .addr = (uintptr_t)self->src, .length = 16,
				      .lkey = self->src_mr->lkey };
		struct ibv_send_wr sw = {
			.wr_id = 10, .sg_list = &ss, .num_sge = 1,
			.opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED,
			.invalidate_rkey = rkey,
		}, *sbad;

		ASSERT_EQ(0, ibv_post_recv(self->l.qp[1], &rw, &rbad));
		ASSERT_EQ(0, ibv_post_send(self->l.qp[0], &sw, &sbad));
		ASSERT_EQ(1, wait_wc(self->l.cq[0], &wc));
		EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(1, wait_wc(self->l.cq[1], &wc));
		EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
		EXPECT_EQ(IBV_WC_RECV, wc.opcode);
		EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_INV);
		EXPECT_EQ(rkey, wc.invalidated_rkey);
	}
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 8, self->src_mr->lkey,
			  (uintptr_t)WIN(self), rkey));
}

/*
 * A UC QP binds a type 2 window too, as rxe's (librxe offers BIND_MW on
 * UC QPs): a WRITE through the window from its UC peer lands.
 */
TEST_F(mw, type2_bound_by_a_uc_qp)
{
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_MW_BIND;
	struct ibv_qp_init_attr qia = {
		.qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_mw *mw = ibv_alloc_mw(self->pd, IBV_MW_TYPE_2);
	struct ibv_cq *cq = ibv_create_cq(self->ctx, 16, NULL, NULL, 0);
	struct ibv_sge sge = { (uintptr_t)self->src, 64, self->src_mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 5, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_qp *uc[2];
	struct ibv_wc wc;
	uint32_t rkey;

	ASSERT_NE(NULL, mw);
	ASSERT_NE(NULL, cq);
	qia.send_cq = qia.recv_cq = cq;
	for (int i = 0; i < 2; i++) {
		uc[i] = ibv_create_qp(self->pd, &qia);
		ASSERT_NE(NULL, uc[i]);
	}
	ASSERT_EQ(0, connect_uc(self->ctx, uc[0], uc[1]->qp_num, acc));
	ASSERT_EQ(0, connect_uc(self->ctx, uc[1], uc[0]->qp_num, acc));
	rkey = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(uc[1], cq, mw, rkey, self->mr, WIN(self), WIN_LEN,
					IBV_ACCESS_REMOTE_WRITE));
	memset(self->src, 0x5a, 64);
	wr.wr.rdma.remote_addr = (uintptr_t)WIN(self) + 128;
	wr.wr.rdma.rkey = rkey;
	ASSERT_EQ(0, ibv_post_send(uc[0], &wr, &bad));
	ASSERT_EQ(1, wait_wc(cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	for (int t = 0; t < 2000 && WIN(self)[128 + 63] != 0x5a; t++)
		usleep(1000);
	EXPECT_EQ(0, memcmp(WIN(self) + 128, self->src, 64));
	for (int i = 0; i < 2; i++)
		ibv_destroy_qp(uc[i]);
	ibv_dealloc_mw(mw);
	ibv_destroy_cq(cq);
}

TEST_F(mw, type2_zero_based_window)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->pd, IBV_MW_TYPE_2);
	uint32_t rkey;

	ASSERT_NE(NULL, mw);
	rkey = ibv_inc_rkey(mw->rkey);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->l.qp[1], self->l.cq[1], mw, rkey, self->mr,
					WIN(self), WIN_LEN, REM | IBV_ACCESS_ZERO_BASED));
	memset(self->src, 'z', 32);
	/* Offsets from 0 land from the window's start on. */
	EXPECT_EQ(IBV_WC_SUCCESS, loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 32,
					  self->src_mr->lkey, 16, rkey));
	EXPECT_EQ(0, memcmp(WIN(self) + 16, self->src, 32));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 32, self->src_mr->lkey,
			  WIN_LEN - 16, rkey));
}

TEST_F(mw, bind_errors_complete_with_mw_bind_err)
{
	struct ibv_mr *nobind = ibv_reg_mr(self->pd, self->mem, BUF, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *ro = ibv_reg_mr(self->pd, self->mem, BUF, IBV_ACCESS_MW_BIND);
	struct ibv_pd *pd2 = ibv_alloc_pd(self->ctx);
	struct ibv_mw *mw1 = ibv_alloc_mw(self->pd, IBV_MW_TYPE_1);
	struct ibv_mw *mw2 = ibv_alloc_mw(self->pd, IBV_MW_TYPE_2);
	struct ibv_mw *other = NULL;
	struct ibv_mr *mr2 = NULL;

	ASSERT_NE(NULL, nobind);
	ASSERT_NE(NULL, ro);
	ASSERT_NE(NULL, pd2);
	ASSERT_NE(NULL, mw1);
	ASSERT_NE(NULL, mw2);
	/* C10-73: the MR has no MW_BIND. */
	EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_fresh(self->ctx, self->pd, mw1, 1, 0, nobind,
						  self->mem, 64, IBV_ACCESS_REMOTE_READ));
	/* C10-74: remote write on an MR without local write. */
	EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_fresh(self->ctx, self->pd, mw1, 1, 0, ro, self->mem,
						  64, IBV_ACCESS_REMOTE_WRITE));
	EXPECT_EQ(IBV_WC_SUCCESS, bind_fresh(self->ctx, self->pd, mw1, 1, 0, ro, self->mem, 64,
					     IBV_ACCESS_REMOTE_READ));
	/* C10-75: past the end of the MR, and before its start. */
	EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_fresh(self->ctx, self->pd, mw1, 1, 0, self->mr,
						  self->mem + BUF - 8, 64,
						  IBV_ACCESS_REMOTE_READ));
	EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_fresh(self->ctx, self->pd, mw1, 1, 0, self->mr,
						  self->mem - 8, 64, IBV_ACCESS_REMOTE_READ));
	/* o10-37.2.40: type 2 with length 0. */
	EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_fresh(self->ctx, self->pd, mw2, 2, mw2->rkey,
						  self->mr, self->mem, 0,
						  IBV_ACCESS_REMOTE_READ));
	/* A stale window key. */
	EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_fresh(self->ctx, self->pd, mw2, 2,
						  ibv_inc_rkey(ibv_inc_rkey(mw2->rkey)), self->mr,
						  self->mem, 64, IBV_ACCESS_REMOTE_READ));
	/* C10-72: a window of another PD (and an MR of another PD). */
	other = ibv_alloc_mw(pd2, IBV_MW_TYPE_2);
	ASSERT_NE(NULL, other);
	EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_fresh(self->ctx, self->pd, other, 2, other->rkey,
						  self->mr, self->mem, 64,
						  IBV_ACCESS_REMOTE_READ));
	mr2 = ibv_reg_mr(pd2, self->mem, BUF, MR_ACC);
	ASSERT_NE(NULL, mr2);
	EXPECT_EQ(IBV_WC_MW_BIND_ERR, bind_fresh(self->ctx, self->pd, mw2, 2, mw2->rkey, mr2,
						  self->mem, 64, IBV_ACCESS_REMOTE_READ));
	/* Still free after all that: a good bind works. */
	EXPECT_EQ(IBV_WC_SUCCESS, bind_fresh(self->ctx, self->pd, mw2, 2, mw2->rkey, self->mr,
					     self->mem, 64, IBV_ACCESS_REMOTE_READ));
	/* librxe refuses zero-based type 1 itself (o10-36.2.2). */
	{
		struct ibv_mw_bind b = {
			.send_flags = IBV_SEND_SIGNALED,
			.bind_info = { .mr = self->mr, .addr = (uintptr_t)self->mem,
				       .length = 64,
				       .mw_access_flags = IBV_ACCESS_REMOTE_READ |
							  IBV_ACCESS_ZERO_BASED },
		};

		EXPECT_EQ(EINVAL, ibv_bind_mw(self->l.qp[1], mw1, &b));
	}
}

TEST_F(mw, window_keys_are_no_lkeys_and_types_are_checked)
{
	struct ibv_mw *mw = ibv_alloc_mw(self->pd, IBV_MW_TYPE_1);
	struct ibv_device_attr a;

	ASSERT_NE(NULL, mw);
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->l.qp[1], self->l.cq[1], mw, self->mr, WIN(self),
					WIN_LEN, REM));
	EXPECT_EQ(IBV_WC_LOC_PROT_ERR, loop_op(&self->l, IBV_WR_RDMA_WRITE, WIN(self), 8,
					       mw->rkey, (uintptr_t)WIN(self), mw->rkey));
	errno = 0;
	EXPECT_EQ(NULL, ibv_alloc_mw(self->pd, 3));
	EXPECT_EQ(EINVAL, errno);
	ASSERT_EQ(0, ibv_query_device(self->ctx, &a));
	EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
	EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	EXPECT_EQ((1 << 19) - 1, a.max_mw);
}

TEST_F(mw, an_mr_with_a_bound_window_cannot_go)
{
	struct ibv_mw *mw1 = ibv_alloc_mw(self->pd, IBV_MW_TYPE_1);
	struct ibv_mw *mw2 = ibv_alloc_mw(self->pd, IBV_MW_TYPE_2);
	char *buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;
	uint32_t rkey;

	ASSERT_NE(NULL, mw1);
	ASSERT_NE(NULL, mw2);
	ASSERT_NE(MAP_FAILED, buf);
	mr = ibv_reg_mr(self->pd, buf, BUF, MR_ACC);
	ASSERT_NE(NULL, mr);
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->l.qp[1], self->l.cq[1], mw1, mr, buf, 64, REM));
	rkey = ibv_inc_rkey(mw2->rkey);
	ASSERT_EQ(IBV_WC_SUCCESS, bind2(self->l.qp[1], self->l.cq[1], mw2, rkey, mr, buf, 64,
					REM));
	EXPECT_EQ(EBUSY, ibv_dereg_mr(mr));
	EXPECT_EQ(-EBUSY, rereg(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, IBV_ACCESS_LOCAL_WRITE, NULL));
	EXPECT_EQ(-EBUSY, rereg(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, MR_ACC, NULL));
	/* Into its own PD is no change (the core drops the flag): done, as rxe. */
	EXPECT_EQ(0, rereg(mr, IBV_REREG_MR_CHANGE_PD, self->pd, 0, NULL));
	/* Still usable through the windows. */
	EXPECT_EQ(IBV_WC_SUCCESS, loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 8,
					  self->src_mr->lkey, (uintptr_t)buf, mw1->rkey));
	/* Unbinding one is not enough; freeing the other is. */
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->l.qp[1], self->l.cq[1], mw1, mr, buf, 0, 0));
	EXPECT_EQ(EBUSY, ibv_dereg_mr(mr));
	ASSERT_EQ(0, ibv_dealloc_mw(mw2));
	EXPECT_EQ(0, ibv_dereg_mr(mr));
	/* And a window freed while bound revokes its key. */
	ASSERT_EQ(IBV_WC_SUCCESS, bind1(self->l.qp[1], self->l.cq[1], mw1, self->mr, WIN(self),
					64, REM));
	rkey = mw1->rkey;
	ASSERT_EQ(0, ibv_dealloc_mw(mw1));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  loop_op(&self->l, IBV_WR_RDMA_WRITE, self->src, 8, self->src_mr->lkey,
			  (uintptr_t)WIN(self), rkey));
}

/* A process that exits or is killed with windows bound leaves nothing: the
 * core frees the windows, then the MRs they held (the suite checks that no
 * MR is left). */
TEST(exit_and_kill_with_bound_windows)
{
	for (int round = 0; round < 2; round++) {
		int pfd[2];
		pid_t pid;
		char c;
		int st;

		ASSERT_EQ(0, pipe(pfd));
		pid = fork();
		ASSERT_LE(0, pid);
		if (!pid) {
			struct ibv_context *ctx = open_dev();
			struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
			struct loop l;
			char *buf = malloc(BUF);
			struct ibv_mr *mr = pd ? ibv_reg_mr(pd, buf, BUF, MR_ACC) : NULL;

			if (!mr || loop_open(ctx, pd, &l))
				_exit(1);
			for (int i = 0; i < 8; i++) {
				struct ibv_mw *mw = ibv_alloc_mw(pd, i & 1 ? IBV_MW_TYPE_2 :
								 IBV_MW_TYPE_1);

				if (!mw)
					_exit(2);
				if ((i & 1 ? bind2(l.qp[1], l.cq[1], mw, ibv_inc_rkey(mw->rkey),
						   mr, buf, 4096, REM) :
					     bind1(l.qp[1], l.cq[1], mw, mr, buf, 4096, REM)))
					_exit(3);
			}
			if (write(pfd[1], "r", 1) != 1)
				_exit(4);
			if (round)
				pause();
			_exit(0);
		}
		close(pfd[1]);
		ASSERT_EQ(1, read(pfd[0], &c, 1));
		close(pfd[0]);
		if (round)
			kill(pid, SIGKILL);
		ASSERT_EQ(pid, waitpid(pid, &st, 0));
		if (round) {
			EXPECT_TRUE(WIFSIGNALED(st));
		} else {
			EXPECT_EQ(0, WEXITSTATUS(st));
		}
	}
}

TEST_HARNESS_MAIN
