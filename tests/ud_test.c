// SPDX-License-Identifier: GPL-2.0
/*
 * UD QPs, address handles and SRQs on one oxe device, through the stock
 * libibverbs and librxe: datagrams with the sender's IP header in the first
 * 40 bytes of the receive buffer, Q_Keys (the privileged bit too), what a
 * UD responder drops and counts, the AH errors; QPs of several types sharing
 * one SRQ, its limit event, "last WQE reached", RNR on an empty SRQ.
 * kselftest harness.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "kselftest_harness.h"
#include "oxe_test.h"

#define BUF (64 * 1024)
#define GRH 40
#define QKEY 0x1234

struct ud {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
};

static int ud_open(struct ibv_context *ctx, struct ibv_pd *pd, struct ud *u, uint32_t qkey)
{
	struct ibv_qp_init_attr qia = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 32, .max_recv_wr = 32, .max_send_sge = 2,
			 .max_recv_sge = 2 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = qkey,
	};

	u->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!u->cq)
		return -1;
	qia.send_cq = qia.recv_cq = u->cq;
	u->qp = ibv_create_qp(pd, &qia);
	if (!u->qp)
		return -1;
	if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return -1;
	u->buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (u->buf == MAP_FAILED)
		return -1;
	u->mr = ibv_reg_mr(pd, u->buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	return u->mr ? 0 : -1;
}

/* An AH to this device's own IPv4 GID: loopback. */
static struct ibv_ah *self_ah(struct ibv_context *ctx, struct ibv_pd *pd)
{
	int gi = gid_index(ctx);
	struct ibv_ah_attr a = {
		.is_global = 1, .port_num = 1,
		.grh = { .sgid_index = gi, .hop_limit = 64 },
	};

	if (ibv_query_gid(ctx, 1, gi, &a.grh.dgid))
		return NULL;
	return ibv_create_ah(pd, &a);
}

/* The interface index of the device's netdev (sysfs ports/1/gid_attrs/ndevs/0). */
static int if_index_of(struct ibv_context *ctx)
{
	char path[256], name[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/gid_attrs/ndevs/0",
		 ibv_get_device_name(ctx->device));
	f = fopen(path, "r");
	if (!f || fscanf(f, "%63s", name) != 1)
		name[0] = 0;
	if (f)
		fclose(f);
	return if_nametoindex(name);
}

static int ud_send(struct ud *u, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey, void *addr,
		   uint32_t len, enum ibv_wr_opcode op, uint32_t imm, uint64_t id)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, u->mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm),
		.wr.ud = { .ah = ah, .remote_qpn = qpn, .remote_qkey = qkey },
	}, *bad;

	return ibv_post_send(u->qp, &wr, &bad);
}

static int ud_recv(struct ud *u, void *addr, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, u->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(u->qp, &wr, &bad);
}

/* No completion on @cq within ~100 ms. */
static int quiet(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	for (int i = 0; i < 100; i++) {
		if (ibv_poll_cq(cq, 1, &wc))
			return 0;
		usleep(1000);
	}
	return 1;
}

/* A counter after the core's 10 ms cache of it ran out. */
static long counter(struct ibv_context *ctx, const char *name)
{
	usleep(50000);
	return port_counter(ctx, name);
}

FIXTURE(ud) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_ah *ah;
	struct ud a, b;
};

FIXTURE_SETUP(ud)
{
	self->ctx = open_dev();
	ASSERT_NE(NULL, self->ctx);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	ASSERT_EQ(0, ud_open(self->ctx, self->pd, &self->a, QKEY));
	ASSERT_EQ(0, ud_open(self->ctx, self->pd, &self->b, QKEY));
	self->ah = self_ah(self->ctx, self->pd);
	ASSERT_NE(NULL, self->ah) TH_LOG("create_ah: %s", strerror(errno));
}

FIXTURE_TEARDOWN(ud)
{
}

/*
 * A datagram arrives whole after the 40 bytes of the GRH's place, which
 * hold its IPv4 header (in the last 20, as rxe puts it), with the sender's
 * QPN; the verbs library builds the answer's AH from it, and the answer
 * goes back.
 */
TEST_F(ud, datagram_with_its_ip_header_and_an_answer)
{
	struct ibv_wc wc;
	union ibv_gid gid;
	struct ibv_ah *back;
	unsigned char *h = (unsigned char *)self->b.buf;

	for (int i = 0; i < 1000; i++)
		self->a.buf[i] = i * 7 + 3;
	ASSERT_EQ(0, ud_recv(&self->b, self->b.buf, GRH + 1024, 21));
	ASSERT_EQ(0, ud_send(&self->a, self->ah, self->b.qp->qp_num, QKEY, self->a.buf, 1000,
			     IBV_WR_SEND, 0, 1));
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(IBV_WC_SEND, wc.opcode);
	ASSERT_EQ(1, wait_wc(self->b.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	EXPECT_EQ(21, wc.wr_id);
	EXPECT_EQ(GRH + 1000, wc.byte_len);
	EXPECT_EQ(self->a.qp->qp_num, wc.src_qp);
	EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
	EXPECT_EQ(0, memcmp(self->a.buf, self->b.buf + GRH, 1000));
	/* IPv4, UDP, from and to this device's address, 20 + 8 + 12 + 4 +
	 * 1000 + 4 bytes long. */
	ASSERT_EQ(0, ibv_query_gid(self->ctx, 1, gid_index(self->ctx), &gid));
	EXPECT_EQ(0x45, h[20]);
	EXPECT_EQ(17, h[20 + 9]);
	EXPECT_EQ(20 + 8 + 12 + 8 + 1000 + 4, h[22] << 8 | h[23]);
	EXPECT_EQ(0, memcmp(h + 20 + 12, gid.raw + 12, 4));
	EXPECT_EQ(0, memcmp(h + 20 + 16, gid.raw + 12, 4));

	back = ibv_create_ah_from_wc(self->pd, &wc, (struct ibv_grh *)self->b.buf, 1);
	ASSERT_NE(NULL, back) TH_LOG("create_ah_from_wc: %s", strerror(errno));
	ASSERT_EQ(0, ud_recv(&self->a, self->a.buf + 4096, GRH + 64, 22));
	ASSERT_EQ(0, ud_send(&self->b, back, wc.src_qp, QKEY, self->b.buf + GRH, 64,
			     IBV_WR_SEND, 0, 2));
	ASSERT_EQ(1, wait_wc(self->b.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(22, wc.wr_id);
	EXPECT_EQ(self->b.qp->qp_num, wc.src_qp);
	EXPECT_EQ(0, memcmp(self->a.buf, self->a.buf + 4096 + GRH, 64));
	EXPECT_EQ(0, ibv_destroy_ah(back));
}

/* Immediate data and a zero-length datagram: the GRH's 40 bytes alone. */
TEST_F(ud, zero_length_with_immediate)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, ud_recv(&self->b, self->b.buf, GRH, 5));
	ASSERT_EQ(0, ud_send(&self->a, self->ah, self->b.qp->qp_num, QKEY, self->a.buf, 0,
			     IBV_WR_SEND_WITH_IMM, 0xfeed, 1));
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(1, wait_wc(self->b.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(GRH, wc.byte_len);
	EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
	EXPECT_EQ(0xfeed, ntohl(wc.imm_data));
}

/*
 * A wrong Q_Key: dropped and counted (qkey_violations), no completion, the
 * receive kept for the next datagram. A Q_Key with the privileged bit in
 * the WR stands for the sending QP's own (the same as the receiver's here).
 */
TEST_F(ud, wrong_qkey_is_dropped_and_privileged_qkey_is_the_qps)
{
	struct ibv_wc wc;
	long before = counter(self->ctx, "qkey_violations");
	struct ibv_port_attr pa;

	ASSERT_LE(0, before);
	ASSERT_EQ(0, ibv_query_port(self->ctx, 1, &pa));
	/* The port's count, as rxe keeps it (it stayed 0). */
	EXPECT_EQ((uint32_t)before, pa.qkey_viol_cntr);
	ASSERT_EQ(0, ud_recv(&self->b, self->b.buf, GRH + 64, 9));
	ASSERT_EQ(0, ud_send(&self->a, self->ah, self->b.qp->qp_num, QKEY + 1, self->a.buf, 64,
			     IBV_WR_SEND, 0, 1));
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	/* The QP's own count (`rdma -dd res show qp`), exact whatever else runs. */
	EXPECT_EQ(1, qp_res_reaches(self->ctx, self->b.qp->qp_num, "qkey_violations", 1));
	EXPECT_TRUE(quiet(self->b.cq));
	EXPECT_EQ(before + 1, counter(self->ctx, "qkey_violations"));
	ASSERT_EQ(0, ibv_query_port(self->ctx, 1, &pa));
	EXPECT_EQ((uint32_t)before + 1, pa.qkey_viol_cntr);
	EXPECT_EQ(0, qp_res(self->ctx, self->a.qp->qp_num, "qkey_violations"));
	ASSERT_EQ(0, ud_send(&self->a, self->ah, self->b.qp->qp_num, 0x80000000, self->a.buf, 64,
			     IBV_WR_SEND, 0, 2));
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	ASSERT_EQ(1, wait_wc(self->b.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(9, wc.wr_id);
}

/*
 * What a UD responder cannot take is dropped, counted in rcv_drops, and the
 * QP carries on: a datagram with no receive posted, one longer than the
 * receive's buffers (which stays for the next). One longer than the port's
 * MTU is not sent at all, and that is no error (IBA C10-93.1.1, as rxe).
 */
TEST_F(ud, what_the_responder_cannot_take_is_dropped)
{
	struct ibv_wc wc;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	long drops = counter(self->ctx, "rcv_drops");
	long sent = counter(self->ctx, "sent_pkts");

	ASSERT_EQ(0, ud_send(&self->a, self->ah, self->b.qp->qp_num, QKEY, self->a.buf, 10,
			     IBV_WR_SEND, 0, 1));
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	/* Dropped before the receive below is posted. */
	EXPECT_EQ(1, qp_res_reaches(self->ctx, self->b.qp->qp_num, "rcv_drops", 1));
	EXPECT_TRUE(quiet(self->b.cq));
	ASSERT_EQ(0, ud_recv(&self->b, self->b.buf, GRH + 100, 3));
	ASSERT_EQ(0, ud_send(&self->a, self->ah, self->b.qp->qp_num, QKEY, self->a.buf, 101,
			     IBV_WR_SEND, 0, 2));
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	EXPECT_EQ(2, qp_res_reaches(self->ctx, self->b.qp->qp_num, "rcv_drops", 2));
	EXPECT_TRUE(quiet(self->b.cq));
	EXPECT_EQ(drops + 2, counter(self->ctx, "rcv_drops"));
	EXPECT_EQ(sent + 2, counter(self->ctx, "sent_pkts"));
	/* 1500-byte netdev: MTU 1024. */
	ASSERT_EQ(0, ud_send(&self->a, self->ah, self->b.qp->qp_num, QKEY, self->a.buf, 1025,
			     IBV_WR_SEND, 0, 3));
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(3, wc.wr_id);
	EXPECT_EQ(sent + 2, counter(self->ctx, "sent_pkts"));
	ASSERT_EQ(0, ud_send(&self->a, self->ah, self->b.qp->qp_num, QKEY, self->a.buf, 100,
			     IBV_WR_SEND, 0, 4));
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	ASSERT_EQ(1, wait_wc(self->b.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(3, wc.wr_id);
	EXPECT_EQ(GRH + 100, wc.byte_len);
	ASSERT_EQ(0, ibv_query_qp(self->b.qp, &qa, IBV_QP_STATE, &qia));
	EXPECT_EQ(IBV_QPS_RTS, qa.qp_state);
	EXPECT_EQ(IBV_QPT_UD, qia.qp_type);
}

/*
 * A receive's buffers are looked up as bytes reach them (rxe's copy_data):
 * a bad lkey past the datagram is no error; one the datagram reaches
 * completes the receive with LOC_PROT_ERR and the QP goes to ERR.
 */
TEST_F(ud, recv_buffers_are_looked_up_when_bytes_reach_them)
{
	struct ibv_sge sge[2] = {
		{ (uintptr_t)self->b.buf, GRH + 64, self->b.mr->lkey },
		{ (uintptr_t)self->b.buf + 4096, 64, self->b.mr->lkey ^ 0x55 },
	};
	struct ibv_recv_wr wr = { .wr_id = 5, .sg_list = sge, .num_sge = 2 }, *bad;
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	struct ibv_wc wc;

	ASSERT_EQ(0, ibv_post_recv(self->b.qp, &wr, &bad));
	ASSERT_EQ(0, ud_send(&self->a, self->ah, self->b.qp->qp_num, QKEY, self->a.buf, 64,
			     IBV_WR_SEND, 0, 1));
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	ASSERT_EQ(1, wait_wc(self->b.cq, &wc));
	EXPECT_EQ(5, wc.wr_id);
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(GRH + 64, wc.byte_len);
	wr.wr_id = 6;
	ASSERT_EQ(0, ibv_post_recv(self->b.qp, &wr, &bad));
	ASSERT_EQ(0, ud_send(&self->a, self->ah, self->b.qp->qp_num, QKEY, self->a.buf, 100,
			     IBV_WR_SEND, 0, 2));
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	ASSERT_EQ(1, wait_wc(self->b.cq, &wc));
	EXPECT_EQ(6, wc.wr_id);
	EXPECT_EQ(IBV_WC_LOC_PROT_ERR, wc.status) TH_LOG("%s", ibv_wc_status_str(wc.status));
	ASSERT_EQ(0, ibv_query_qp(self->b.qp, &qa, IBV_QP_STATE, &qia));
	EXPECT_EQ(IBV_QPS_ERR, qa.qp_state);
}

/*
 * AH errors: an unknown source GID index is refused; a send through an AH
 * of another PD completes with LOC_QP_OP_ERR and the QP goes to ERR.
 */
TEST_F(ud, ah_errors)
{
	struct ibv_wc wc;
	struct ibv_pd *pd2 = ibv_alloc_pd(self->ctx);
	struct ibv_ah_attr bad = { .is_global = 1, .port_num = 1, .grh = { .sgid_index = 200 } };
	struct ibv_ah *other;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;

	ASSERT_NE(NULL, pd2);
	EXPECT_EQ(NULL, ibv_create_ah(self->pd, &bad));
	other = self_ah(self->ctx, pd2);
	ASSERT_NE(NULL, other);
	ASSERT_EQ(0, ud_recv(&self->b, self->b.buf, GRH + 64, 1));
	ASSERT_EQ(0, ud_send(&self->a, other, self->b.qp->qp_num, QKEY, self->a.buf, 64,
			     IBV_WR_SEND, 0, 7));
	ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
	EXPECT_EQ(IBV_WC_LOC_QP_OP_ERR, wc.status);
	EXPECT_EQ(7, wc.wr_id);
	ASSERT_EQ(0, ibv_query_qp(self->a.qp, &qa, IBV_QP_STATE, &qia));
	EXPECT_EQ(IBV_QPS_ERR, qa.qp_state);
	EXPECT_TRUE(quiet(self->b.cq));
	EXPECT_EQ(0, ibv_destroy_ah(other));
}

/*
 * Many AHs: each gets a number of its own (librxe puts it in the WQE), the
 * device's limit is rxe's, and a datagram through each of a few hundred
 * arrives from the right QP.
 */
TEST_F(ud, many_ahs)
{
	enum { N = 300 };
	struct ibv_ah **ahs = calloc(N, sizeof(*ahs));
	struct ibv_device_attr da;
	struct ibv_wc wc;
	int got = 0;

	ASSERT_NE(NULL, ahs);
	ASSERT_EQ(0, ibv_query_device(self->ctx, &da));
	EXPECT_EQ(32767, da.max_ah);
	for (int i = 0; i < N; i++) {
		ahs[i] = self_ah(self->ctx, self->pd);
		ASSERT_NE(NULL, ahs[i]);
	}
	for (int i = 0; i < N; i++) {
		ASSERT_EQ(0, ud_recv(&self->b, self->b.buf + (i % 16) * 128, GRH + 8, i));
		ASSERT_EQ(0, ud_send(&self->a, ahs[i], self->b.qp->qp_num, QKEY, self->a.buf, 8,
				     IBV_WR_SEND, 0, i));
		ASSERT_EQ(1, wait_wc(self->a.cq, &wc));
		ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		ASSERT_EQ(1, wait_wc(self->b.cq, &wc));
		got += wc.status == IBV_WC_SUCCESS && wc.wr_id == (uint64_t)i &&
		       wc.src_qp == self->a.qp->qp_num;
	}
	EXPECT_EQ(N, got);
	for (int i = 0; i < N; i++)
		EXPECT_EQ(0, ibv_destroy_ah(ahs[i]));
	free(ahs);
}

/*
 * SRQs: two RC receivers and a UD one take their receives from one SRQ;
 * their senders are QPs of their own.
 */
#define SRQ_WR 16

FIXTURE(srq) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_srq *srq;
	struct ibv_cq *cq;
	struct ibv_qp *rc[2], *rcv[2];
	struct ud tx, rx;
	struct ibv_mr *mr;
	char *buf;
};

static struct ibv_qp *rc_qp(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr qia = {
		.qp_type = IBV_QPT_RC, .send_cq = cq, .recv_cq = cq, .srq = srq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};

	return ibv_create_qp(pd, &qia);
}

static int srq_post(struct ibv_srq *srq, void *addr, uint32_t len, uint32_t lkey, uint64_t id)
{
	struct ibv_sge sge = { (uintptr_t)addr, len, lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_srq_recv(srq, &wr, &bad);
}

/* The next asynchronous event of @ctx within 5 s, or -1. */
static int async_event(struct ibv_context *ctx)
{
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };
	struct ibv_async_event ev;
	int type;

	if (poll(&p, 1, 5000) != 1 || ibv_get_async_event(ctx, &ev))
		return -1;
	type = ev.event_type;
	ibv_ack_async_event(&ev);
	return type;
}

FIXTURE_SETUP(srq)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = SRQ_WR, .max_sge = 1 } };
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_qp_init_attr qia = {
		.qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 16, .max_send_sge = 1 },
	};
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qkey = QKEY,
	};

	self->ctx = open_dev();
	ASSERT_NE(NULL, self->ctx);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	self->srq = ibv_create_srq(self->pd, &sa);
	ASSERT_NE(NULL, self->srq) TH_LOG("create_srq: %s", strerror(errno));
	self->cq = ibv_create_cq(self->ctx, 256, NULL, NULL, 0);
	ASSERT_NE(NULL, self->cq);
	for (int i = 0; i < 2; i++) {
		self->rc[i] = rc_qp(self->pd, self->cq, NULL);
		self->rcv[i] = rc_qp(self->pd, self->cq, self->srq);
		ASSERT_NE(NULL, self->rc[i]);
		ASSERT_NE(NULL, self->rcv[i]) TH_LOG("QP on an SRQ: %s", strerror(errno));
		ASSERT_EQ(0, connect_rc(self->ctx, self->rc[i], self->rcv[i]->qp_num, acc, 7));
		ASSERT_EQ(0, connect_rc(self->ctx, self->rcv[i], self->rc[i]->qp_num, acc, 7));
	}
	/* A UD receiver on the same SRQ, and a UD sender. */
	ASSERT_EQ(0, ud_open(self->ctx, self->pd, &self->tx, QKEY));
	self->rx.cq = self->cq;
	qia.send_cq = qia.recv_cq = self->cq;
	qia.srq = self->srq;
	self->rx.qp = ibv_create_qp(self->pd, &qia);
	ASSERT_NE(NULL, self->rx.qp);
	ASSERT_EQ(0, ibv_modify_qp(self->rx.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				   IBV_QP_PORT | IBV_QP_QKEY));
	a.qp_state = IBV_QPS_RTR;
	ASSERT_EQ(0, ibv_modify_qp(self->rx.qp, &a, IBV_QP_STATE));
	self->buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->buf);
	self->mr = ibv_reg_mr(self->pd, self->buf, BUF, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, self->mr);
}

FIXTURE_TEARDOWN(srq)
{
}

/*
 * RC and UD receivers share the SRQ: each message takes the next receive,
 * whichever QP it is for, and completes with that QP's number.
 */
TEST_F(srq, qps_of_two_types_share_one_srq)
{
	struct ibv_ah *ah = self_ah(self->ctx, self->pd);
	struct ibv_wc wc;
	uint32_t seen[3] = {};
	struct ibv_srq_attr sa;

	ASSERT_NE(NULL, ah);
	ASSERT_EQ(0, ibv_query_srq(self->srq, &sa));
	EXPECT_LE(SRQ_WR, sa.max_wr);
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(0, srq_post(self->srq, self->buf + i * 2048, 2048, self->mr->lkey, 100 + i));
	for (int i = 0; i < 6; i++) {
		int ud = i % 3 == 2, recvs = 0;

		memset(self->tx.buf, 'a' + i, 512);
		if (ud) {
			ASSERT_EQ(0, ud_send(&self->tx, ah, self->rx.qp->qp_num, QKEY, self->tx.buf,
					     512, IBV_WR_SEND, 0, i));
			ASSERT_EQ(1, wait_wc(self->tx.cq, &wc));
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
		} else {
			ASSERT_EQ(0, post(self->rc[i % 3], IBV_WR_SEND, self->tx.buf, 512,
					  self->tx.mr->lkey, 0, 0, i));
		}
		/* The receive, and an RC sender's completion, on the shared CQ. */
		for (int n = 0; n < (ud ? 1 : 2); n++) {
			ASSERT_EQ(1, wait_wc(self->cq, &wc));
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status) TH_LOG("message %d: %s", i,
							      ibv_wc_status_str(wc.status));
			if (wc.opcode != IBV_WC_RECV)
				continue;
			recvs++;
			EXPECT_EQ(100 + i, wc.wr_id);
			for (int q = 0; q < 3; q++)
				seen[q] += wc.qp_num == (q < 2 ? self->rcv[q] : self->rx.qp)->qp_num;
			/* UD: the payload after the GRH's place. */
			EXPECT_EQ('a' + i, self->buf[i * 2048 + (ud ? GRH : 0) + 511]);
		}
		EXPECT_EQ(1, recvs);
	}
	EXPECT_EQ(2, seen[0]);
	EXPECT_EQ(2, seen[1]);
	EXPECT_EQ(2, seen[2]);
	ibv_destroy_ah(ah);
}

/*
 * The limit: armed at 4 with 8 posted, IBV_EVENT_SRQ_LIMIT_REACHED comes once
 * fewer than 4 are left, and disarms it (the query shows 0).
 */
TEST_F(srq, limit_event)
{
	struct pollfd p = { .fd = self->ctx->async_fd, .events = POLLIN };
	struct ibv_srq_attr sa = { .srq_limit = 4 };
	struct ibv_wc wc;
	int got = 0;

	for (int i = 0; i < 8; i++)
		ASSERT_EQ(0, srq_post(self->srq, self->buf + i * 64, 64, self->mr->lkey, i));
	ASSERT_EQ(0, ibv_modify_srq(self->srq, &sa, IBV_SRQ_LIMIT));
	ASSERT_EQ(0, ibv_query_srq(self->srq, &sa));
	EXPECT_EQ(4, sa.srq_limit);
	for (int i = 0; i < 5; i++) {
		ASSERT_EQ(0, post(self->rc[0], IBV_WR_SEND, self->tx.buf, 8, self->tx.mr->lkey, 0, 0,
				  i));
		for (int n = 0; n < 2; n++) {
			ASSERT_EQ(1, wait_wc(self->cq, &wc));
		}
	}
	EXPECT_EQ(IBV_EVENT_SRQ_LIMIT_REACHED, async_event(self->ctx));
	ASSERT_EQ(0, ibv_query_srq(self->srq, &sa));
	EXPECT_EQ(0, sa.srq_limit);
	/* Once only: a sixth message raises nothing. */
	ASSERT_EQ(0, post(self->rc[0], IBV_WR_SEND, self->tx.buf, 8, self->tx.mr->lkey, 0, 0, 9));
	for (int n = 0; n < 2; n++) {
		got += wait_wc(self->cq, &wc);
	}
	EXPECT_EQ(2, got);
	EXPECT_EQ(0, poll(&p, 1, 200));
}

/*
 * An empty SRQ makes an RC sender wait (RNR) until a receive is posted; a
 * receiver QP put in ERR raises IBV_EVENT_QP_LAST_WQE_REACHED, and the SRQ's
 * receives stay for the others.
 */
TEST_F(srq, rnr_on_empty_srq_and_last_wqe_reached)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc;

	ASSERT_EQ(0, post(self->rc[0], IBV_WR_SEND, self->tx.buf, 100, self->tx.mr->lkey, 0, 0, 1));
	usleep(100000);
	EXPECT_EQ(0, ibv_poll_cq(self->cq, 1, &wc));
	ASSERT_EQ(0, srq_post(self->srq, self->buf, 4096, self->mr->lkey, 50));
	ASSERT_EQ(1, wait_wc(self->cq, &wc));
	ASSERT_EQ(1, wait_wc(self->cq, &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);

	ASSERT_EQ(0, srq_post(self->srq, self->buf, 4096, self->mr->lkey, 51));
	ASSERT_EQ(0, ibv_modify_qp(self->rcv[0], &qa, IBV_QP_STATE));
	EXPECT_EQ(IBV_EVENT_QP_LAST_WQE_REACHED, async_event(self->ctx));
	/* The receive is still the SRQ's: the other RC receiver takes it. */
	ASSERT_EQ(0, post(self->rc[1], IBV_WR_SEND, self->tx.buf, 100, self->tx.mr->lkey, 0, 0, 2));
	for (int n = 0; n < 2; n++) {
		ASSERT_EQ(1, wait_wc(self->cq, &wc));
		EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
		if (wc.opcode == IBV_WC_RECV) {
			EXPECT_EQ(51, wc.wr_id);
			EXPECT_EQ(self->rcv[1]->qp_num, wc.qp_num);
		}
	}
}

/*
 * The completions of @rc's failed SEND: the sender's status in @send, and
 * of the receives @rcv completes, the first's wr_id and status in @id and
 * @recv; their count is returned. Polls until 300 ms pass without one
 * after the sender's (at most 10 s): a receive completed twice is seen.
 */
static int srq_failed_send(FIXTURE_DATA(srq) *self, struct ibv_qp *rc, struct ibv_qp *rcv,
			   int *send, uint64_t *id, int *recv)
{
	int recvs = 0, idle = 0;
	struct ibv_wc wc;

	*send = *recv = -1;
	for (int t = 0; t < 10000 && (*send < 0 || idle < 300); t++) {
		if (ibv_poll_cq(self->cq, 1, &wc) != 1) {
			usleep(1000);
			idle++;
			continue;
		}
		idle = 0;
		if (wc.qp_num == rc->qp_num) {
			*send = wc.status;
		} else if (wc.qp_num == rcv->qp_num && recvs++ == 0) {
			*id = wc.wr_id;
			*recv = wc.status;
		} else {
			fprintf(stderr, "# and QP %u wr_id %llu %s\n", wc.qp_num,
				(unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
		}
	}
	return recvs;
}

/*
 * A SEND longer than the SRQ receive it took: that receive completes once,
 * with LOC_LEN_ERR, and is not flushed again when its QP goes to ERR (an
 * application recycling the buffer would do it twice); the sender gets
 * REM_INV_REQ_ERR and the SRQ's next receive stays for the other QPs.
 */
TEST_F(srq, a_send_too_long_completes_its_receive_once)
{
	int send, recv;
	uint64_t id = 0;
	struct ibv_wc wc;

	ASSERT_EQ(0, srq_post(self->srq, self->buf, 100, self->mr->lkey, 60));
	ASSERT_EQ(0, srq_post(self->srq, self->buf + 4096, 4096, self->mr->lkey, 61));
	ASSERT_EQ(0, post(self->rc[0], IBV_WR_SEND, self->tx.buf, 200, self->tx.mr->lkey, 0, 0, 1));
	EXPECT_EQ(1, srq_failed_send(self, self->rc[0], self->rcv[0], &send, &id, &recv));
	EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, send);
	EXPECT_EQ(IBV_WC_LOC_LEN_ERR, recv);
	EXPECT_EQ(60, id);
	ASSERT_EQ(0, post(self->rc[1], IBV_WR_SEND, self->tx.buf, 200, self->tx.mr->lkey, 0, 0, 2));
	for (int n = 0; n < 2; n++) {
		ASSERT_EQ(1, wait_wc(self->cq, &wc));
		EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
		if (wc.qp_num == self->rcv[1]->qp_num)
			EXPECT_EQ(61, wc.wr_id);
	}
}

/*
 * A SEND_WITH_INV naming a key the peer may not invalidate (an MR not of
 * fast registration) through a QP on an SRQ: the receive it took completes
 * with REM_INV_REQ_ERR, as rxe's, and once; it is not lost with the QP.
 */
TEST_F(srq, send_with_invalidate_of_a_bad_key_completes_its_receive)
{
	int send, recv;
	uint64_t id = 0;

	ASSERT_EQ(0, srq_post(self->srq, self->buf, 4096, self->mr->lkey, 70));
	ASSERT_EQ(0, post(self->rc[0], IBV_WR_SEND_WITH_INV, self->tx.buf, 16, self->tx.mr->lkey,
			  0, self->mr->rkey, 1));
	EXPECT_EQ(1, srq_failed_send(self, self->rc[0], self->rcv[0], &send, &id, &recv));
	EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, send);
	EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, recv);
	EXPECT_EQ(70, id);
}

/*
 * Two QPs on one SRQ with one receive left each get a 64 KiB WRITE with
 * immediate at once. Both passed the RNR check on arrival; one takes the
 * receive, the other must wait (RNR) until the next one is posted, not
 * fail with its data placed (REM_OP_ERR, its QP in ERR). Both complete.
 */
TEST_F(srq, write_with_immediate_races_for_the_last_receive)
{
	int acc = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_mr *dst = ibv_reg_mr(self->pd, self->buf, BUF, acc);
	const int rounds = 50, len = BUF;
	struct ibv_wc wc;

	ASSERT_NE(NULL, dst);
	for (int r = 0; r < rounds; r++) {
		int recvs = 0, sends = 0, reposted = 0;

		ASSERT_EQ(0, srq_post(self->srq, self->buf, 8, self->mr->lkey, 2 * r));
		for (int q = 0; q < 2; q++)
			ASSERT_EQ(0, post(self->rc[q], IBV_WR_RDMA_WRITE_WITH_IMM, self->tx.buf,
					  len, self->tx.mr->lkey, (uintptr_t)self->buf, dst->rkey, q));
		while (recvs + sends < 4) {
			ASSERT_EQ(1, wait_wc(self->cq, &wc)) TH_LOG("round %d", r);
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status)
				TH_LOG("round %d: QP %u wr_id %llu: %s", r, wc.qp_num,
				       (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
			if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM)
				recvs++;
			else
				sends++;
			/* The first receive went to one of them: the next for the other. */
			if (recvs == 1 && !reposted++)
				ASSERT_EQ(0, srq_post(self->srq, self->buf, 8, self->mr->lkey,
						      2 * r + 1));
		}
	}
	ibv_dereg_mr(dst);
}

/*
 * Resizing keeps what is posted, in order (librxe maps the new ring); a size
 * below what is posted is refused, and so is one past rxe's limit.
 */
TEST_F(srq, resize_keeps_the_posted_wqes)
{
	struct ibv_srq_attr sa = { .max_wr = 200 };
	struct ibv_wc wc;

	for (int i = 0; i < 12; i++)
		ASSERT_EQ(0, srq_post(self->srq, self->buf + i * 64, 64, self->mr->lkey, i));
	ASSERT_EQ(0, ibv_modify_srq(self->srq, &sa, IBV_SRQ_MAX_WR)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, ibv_query_srq(self->srq, &sa));
	EXPECT_LE(200, sa.max_wr);
	for (int i = 12; i < 150; i++)
		ASSERT_EQ(0, srq_post(self->srq, self->buf + i * 64, 64, self->mr->lkey, i));
	for (int i = 0; i < 150; i++) {
		int recvs = 0;

		ASSERT_EQ(0, post(self->rc[i % 2], IBV_WR_SEND, self->tx.buf, 8, self->tx.mr->lkey,
				  0, 0, i));
		for (int n = 0; n < 2; n++) {
			ASSERT_EQ(1, wait_wc(self->cq, &wc));
			ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
			if (wc.opcode == IBV_WC_RECV) {
				recvs++;
				ASSERT_EQ(i, wc.wr_id);
			}
		}
		ASSERT_EQ(1, recvs);
	}
	/* 40 posted do not fit a ring of rxe's minimum (16, rounded up to 31). */
	sa.max_wr = 4;
	for (int i = 0; i < 40; i++)
		ASSERT_EQ(0, srq_post(self->srq, self->buf, 64, self->mr->lkey, i));
	EXPECT_NE(0, ibv_modify_srq(self->srq, &sa, IBV_SRQ_MAX_WR));
	ASSERT_EQ(0, ibv_query_srq(self->srq, &sa));
	EXPECT_LE(200, sa.max_wr);
	/* `rdma -dd res show srq`: the 40 still posted. */
	char pid[32];

	snprintf(pid, sizeof(pid), " pid %d ", getpid());
	EXPECT_EQ(1, res_lines("srq", pid, " drv_posted 40 "));
}

/* Bad input: rxe's limits, a limit past the ring; a QP on an SRQ has no
 * receive queue of its own. */
TEST_F(srq, errors)
{
	struct ibv_srq_init_attr big = { .attr = { .max_wr = (1 << 20) + 1, .max_sge = 1 } };
	struct ibv_srq_init_attr sges = { .attr = { .max_wr = 16, .max_sge = 28 } };
	struct ibv_srq_attr sa = { .max_wr = (1 << 20) + 1, .srq_limit = 100000 };
	struct ibv_device_attr da;

	ASSERT_EQ(0, ibv_query_device(self->ctx, &da));
	EXPECT_EQ(27, da.max_srq_sge);
	EXPECT_EQ(1 << 20, da.max_srq_wr);
	EXPECT_TRUE(da.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);
	EXPECT_EQ(NULL, ibv_create_srq(self->pd, &big));
	EXPECT_EQ(NULL, ibv_create_srq(self->pd, &sges));
	EXPECT_NE(0, ibv_modify_srq(self->srq, &sa, IBV_SRQ_MAX_WR));
	EXPECT_NE(0, ibv_modify_srq(self->srq, &sa, IBV_SRQ_LIMIT));
	/* The SRQ is in use: destroying it first is refused. */
	EXPECT_EQ(EBUSY, ibv_destroy_srq(self->srq));
}

/*
 * rxe's sizes at create: one receive is enough (RXE_MIN_SRQ_WR is 1, not
 * 16), and a `srq_limit` past the ring, which create is to ignore, fails
 * nothing (oxe used to refuse it with EINVAL) and arms nothing.
 */
TEST_F(srq, create_takes_what_rxe_takes)
{
	struct ibv_srq_init_attr one = { .attr = { .max_wr = 1, .max_sge = 1, .srq_limit = 100 } };
	struct ibv_srq *srq = ibv_create_srq(self->pd, &one);
	struct ibv_srq_attr sa;

	ASSERT_NE(NULL, srq) TH_LOG("create: %s", strerror(errno));
	ASSERT_EQ(0, ibv_query_srq(srq, &sa));
	EXPECT_EQ(1, sa.max_wr);
	EXPECT_EQ(0, sa.srq_limit);
	EXPECT_EQ(0, ibv_destroy_srq(srq));
}

/* Overflow: an SRQ takes as many receives as it reports room for, and the
 * next post fails with ENOMEM, the ring untouched; room comes back as
 * receives are consumed. */
TEST_F(srq, overflow_is_enomem)
{
	struct ibv_srq_init_attr ia = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *small = ibv_create_srq(self->pd, &ia);
	struct ibv_srq_attr sa;
	uint32_t n;

	ASSERT_NE(NULL, small);
	ASSERT_EQ(0, ibv_query_srq(small, &sa));
	ASSERT_LE(16, sa.max_wr);
	n = sa.max_wr;
	for (uint32_t i = 0; i < n; i++) {
		ASSERT_EQ(0, srq_post(small, self->buf, 64, self->mr->lkey, i)) TH_LOG("post %u", i);
	}
	EXPECT_EQ(ENOMEM, srq_post(small, self->buf, 64, self->mr->lkey, n));
	EXPECT_EQ(ENOMEM, srq_post(small, self->buf, 64, self->mr->lkey, n + 1));
	ASSERT_EQ(0, ibv_query_srq(small, &sa));
	EXPECT_EQ(n, sa.max_wr);
	EXPECT_EQ(0, ibv_destroy_srq(small));
}

/*
 * Multicast: UD QPs attached to a group (IPv4 239.1.2.3, as an IPv4-mapped
 * MGID) each get a datagram sent to it (QPN 0xffffff). The datagram goes
 * out on the netdev and comes back through the IP stack's multicast loop,
 * which needs the host in the group: rdma_cm joins it for its users (IGMP);
 * here a socket does.
 */
#define MCAST_QPN 0xffffff

FIXTURE(mcast) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ud tx, r[2];
	union ibv_gid mgid;
	int sock;
};

FIXTURE_SETUP(mcast)
{
	struct ip_mreqn mr = { .imr_multiaddr.s_addr = htonl(0xef010203) };

	self->ctx = open_dev();
	ASSERT_NE(NULL, self->ctx);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	ASSERT_EQ(0, ud_open(self->ctx, self->pd, &self->tx, QKEY));
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, ud_open(self->ctx, self->pd, &self->r[i], QKEY));
	memset(&self->mgid, 0, sizeof(self->mgid));
	self->mgid.raw[10] = self->mgid.raw[11] = 0xff;
	memcpy(self->mgid.raw + 12, &mr.imr_multiaddr.s_addr, 4);
	self->sock = socket(AF_INET, SOCK_DGRAM, 0);
	ASSERT_LE(0, self->sock);
	mr.imr_ifindex = if_index_of(self->ctx);
	ASSERT_EQ(0, setsockopt(self->sock, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mr, sizeof(mr)))
		TH_LOG("IP_ADD_MEMBERSHIP: %s", strerror(errno));
}

FIXTURE_TEARDOWN(mcast)
{
}

static struct ibv_ah *group_ah(struct ibv_context *ctx, struct ibv_pd *pd, union ibv_gid *mgid)
{
	struct ibv_ah_attr a = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = *mgid, .sgid_index = gid_index(ctx), .hop_limit = 1 },
	};

	return ibv_create_ah(pd, &a);
}

TEST_F(mcast, each_attached_qp_gets_the_datagram)
{
	struct ibv_ah *ah = group_ah(self->ctx, self->pd, &self->mgid);
	struct ibv_wc wc;
	unsigned char *h;

	ASSERT_NE(NULL, ah) TH_LOG("create_ah: %s", strerror(errno));
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, ibv_attach_mcast(self->r[i].qp, &self->mgid, 0));
		ASSERT_EQ(0, ud_recv(&self->r[i], self->r[i].buf, GRH + 256, 10 + i));
		ASSERT_EQ(0, ud_recv(&self->r[i], self->r[i].buf + 4096, GRH + 256, 20 + i));
	}
	memset(self->tx.buf, 0x3c, 256);
	ASSERT_EQ(0, ud_send(&self->tx, ah, MCAST_QPN, QKEY, self->tx.buf, 256, IBV_WR_SEND, 0, 1));
	ASSERT_EQ(1, wait_wc(self->tx.cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(1, wait_wc(self->r[i].cq, &wc)) TH_LOG("QP %d got nothing", i);
		EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
		EXPECT_EQ(10 + i, wc.wr_id);
		EXPECT_EQ(GRH + 256, wc.byte_len);
		EXPECT_EQ(self->tx.qp->qp_num, wc.src_qp);
		EXPECT_EQ(0x3c, self->r[i].buf[GRH + 255]);
		/* The IPv4 header's destination is the group. */
		h = (unsigned char *)self->r[i].buf;
		EXPECT_EQ(0, memcmp(h + 20 + 16, self->mgid.raw + 12, 4));
	}
	/* Detached, a QP gets no more of the group's datagrams. */
	ASSERT_EQ(0, ibv_detach_mcast(self->r[1].qp, &self->mgid, 0));
	ASSERT_EQ(0, ud_send(&self->tx, ah, MCAST_QPN, QKEY, self->tx.buf, 100, IBV_WR_SEND, 0, 2));
	ASSERT_EQ(1, wait_wc(self->tx.cq, &wc));
	ASSERT_EQ(1, wait_wc(self->r[0].cq, &wc));
	EXPECT_EQ(20, wc.wr_id);
	EXPECT_TRUE(quiet(self->r[1].cq));
	EXPECT_EQ(0, ibv_destroy_ah(ah));
}

/*
 * Bad input: a non-UD QP, a GID that is no multicast address, detaching
 * what was not attached; rxe's limit of 56 QPs a group; the device's limits.
 */
TEST_F(mcast, errors_and_limits)
{
	struct ibv_device_attr da;
	union ibv_gid uni = self->mgid;
	struct ibv_cq *cq = ibv_create_cq(self->ctx, 4, NULL, NULL, 0);
	struct ibv_qp *rc = NULL, *ud[57];
	struct ibv_qp_init_attr qia = {
		.qp_type = IBV_QPT_RC, .cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
						.max_recv_sge = 1 },
	};
	int n = 0;

	ASSERT_EQ(0, ibv_query_device(self->ctx, &da));
	EXPECT_EQ(8192, da.max_mcast_grp);
	EXPECT_EQ(56, da.max_mcast_qp_attach);
	EXPECT_EQ(0x70000, da.max_total_mcast_qp_attach);
	ASSERT_NE(NULL, cq);
	qia.send_cq = qia.recv_cq = cq;
	rc = ibv_create_qp(self->pd, &qia);
	ASSERT_NE(NULL, rc);
	EXPECT_EQ(EINVAL, ibv_attach_mcast(rc, &self->mgid, 0));
	uni.raw[12] = 10;
	EXPECT_EQ(EINVAL, ibv_attach_mcast(self->r[0].qp, &uni, 0));
	EXPECT_EQ(EINVAL, ibv_detach_mcast(self->r[0].qp, &self->mgid, 0));
	/* Attaching twice is no error, and one detach undoes it. */
	EXPECT_EQ(0, ibv_attach_mcast(self->r[0].qp, &self->mgid, 0));
	EXPECT_EQ(0, ibv_attach_mcast(self->r[0].qp, &self->mgid, 0));
	EXPECT_EQ(0, ibv_detach_mcast(self->r[0].qp, &self->mgid, 0));
	qia.qp_type = IBV_QPT_UD;
	for (int i = 0; i < 57; i++) {
		ud[i] = ibv_create_qp(self->pd, &qia);
		ASSERT_NE(NULL, ud[i]);
		n += ibv_attach_mcast(ud[i], &self->mgid, 0) == 0;
	}
	EXPECT_EQ(56, n);
	/* The core keeps an attached QP from being destroyed; detached, the
	 * group has room again. */
	EXPECT_EQ(EBUSY, ibv_destroy_qp(ud[0]));
	for (int i = 0; i < 57; i++) {
		if (i < 56)
			EXPECT_EQ(0, ibv_detach_mcast(ud[i], &self->mgid, 0));
		EXPECT_EQ(0, ibv_destroy_qp(ud[i]));
	}
	EXPECT_EQ(0, ibv_attach_mcast(self->r[0].qp, &self->mgid, 0));
	EXPECT_EQ(0, ibv_destroy_qp(rc));
}

TEST_HARNESS_MAIN
