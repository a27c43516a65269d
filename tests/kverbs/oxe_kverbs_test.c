// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests of oxe's kernel verbs, the ones only kernel clients (ULPs)
 * reach: the DMA MR behind ib_alloc_pd, fast registration (alloc_mr,
 * map_mr_sg, IB_WR_REG_MR) and invalidation (IB_WR_LOCAL_INV,
 * IB_WR_SEND_WITH_INV). Two RC QPs on one device talk over loopback.
 *
 * Load with the device up: insmod oxe_kverbs_test.ko dev=oxe0 (KUnit must
 * run module suites: kunit.enable=1 kunit.autorun=1 on the command line).
 */
#include <kunit/test.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

static char *dev = "oxe0";
module_param(dev, charp, 0444);
MODULE_PARM_DESC(dev, "the oxe device to test");

#define BUF 8192

/*
 * The device under test, found through an IB client: the core calls add()
 * for every device present when the client registers (and holds the device
 * for the client until it unregisters).
 */
static struct ib_device *test_dev;

static int client_add(struct ib_device *ibdev)
{
	if (strcmp(dev_name(&ibdev->dev), dev))
		return -ENODEV;
	test_dev = ibdev;
	return 0;
}

static void client_remove(struct ib_device *ibdev, void *data)
{
	if (ibdev == test_dev)
		test_dev = NULL;
}

static struct ib_client client = {
	.name = "oxe_kverbs_test",
	.add = client_add,
	.remove = client_remove,
};

static int suite_init(struct kunit_suite *suite)
{
	return ib_register_client(&client);
}

static void suite_exit(struct kunit_suite *suite)
{
	ib_unregister_client(&client);
}

struct ctx {
	struct ib_device *ibdev;
	struct ib_pd *pd;
	struct ib_cq *cq[2];
	struct ib_qp *qp[2];
	void *buf[2];
	u64 dma[2];
	struct page *pages[2];
	struct scatterlist sg[2];
	struct ib_mr *mr;
};

/* The IPv4-mapped GID (RoCEv2) of port 1, as the user-space tests use. */
static int roce_gid(struct ib_device *ibdev, union ib_gid *gid)
{
	int i;

	for (i = 0; i < 16; i++)
		if (!rdma_query_gid(ibdev, 1, i, gid) && ipv6_addr_v4mapped((struct in6_addr *)gid))
			return i;
	return -ENOENT;
}

static int connect_qp(struct ib_qp *qp, u32 dest, int gi, union ib_gid *gid)
{
	struct ib_qp_attr a = {};
	int ret;

	a.qp_state = IB_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ |
			    IB_ACCESS_REMOTE_ATOMIC;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX | IB_QP_PORT |
			   IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&a.ah_attr, 1);
	rdma_ah_set_grh(&a.ah_attr, gid, 0, gi, 64, 0);
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
			    IB_QP_RNR_RETRY | IB_QP_SQ_PSN | IB_QP_MAX_QP_RD_ATOMIC);
}

static int ctx_init(struct kunit *test)
{
	struct ctx *c = kunit_kzalloc(test, sizeof(*c), GFP_KERNEL);
	union ib_gid gid;
	int i, gi;

	KUNIT_ASSERT_NOT_NULL(test, c);
	test->priv = c;
	c->ibdev = test_dev;
	KUNIT_ASSERT_NOT_NULL_MSG(test, c->ibdev, "no device %s", dev);
	c->pd = ib_alloc_pd(c->ibdev, 0);
	KUNIT_ASSERT_FALSE(test, IS_ERR(c->pd));
	for (i = 0; i < 2; i++) {
		struct ib_qp_init_attr ia = {
			.qp_type = IB_QPT_RC,
			.sq_sig_type = IB_SIGNAL_ALL_WR,
			.cap = { .max_send_wr = 16, .max_recv_wr = 16,
				 .max_send_sge = 2, .max_recv_sge = 2,
				 .max_inline_data = 64 },
		};

		c->cq[i] = ib_alloc_cq(c->ibdev, NULL, 64, 0, IB_POLL_DIRECT);
		KUNIT_ASSERT_FALSE(test, IS_ERR(c->cq[i]));
		ia.send_cq = ia.recv_cq = c->cq[i];
		c->qp[i] = ib_create_qp(c->pd, &ia);
		KUNIT_ASSERT_FALSE(test, IS_ERR(c->qp[i]));
		c->buf[i] = kzalloc(BUF, GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, c->buf[i]);
		c->dma[i] = ib_dma_map_single(c->ibdev, c->buf[i], BUF, DMA_BIDIRECTIONAL);
		c->pages[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		KUNIT_ASSERT_NOT_NULL(test, c->pages[i]);
	}
	gi = roce_gid(c->ibdev, &gid);
	KUNIT_ASSERT_GE(test, gi, 0);
	KUNIT_ASSERT_EQ(test, connect_qp(c->qp[0], c->qp[1]->qp_num, gi, &gid), 0);
	KUNIT_ASSERT_EQ(test, connect_qp(c->qp[1], c->qp[0]->qp_num, gi, &gid), 0);
	return 0;
}

static void ctx_exit(struct kunit *test)
{
	struct ctx *c = test->priv;
	int i;

	if (!c || !c->ibdev)
		return;
	for (i = 0; i < 2; i++) {
		if (!IS_ERR_OR_NULL(c->qp[i]))
			ib_destroy_qp(c->qp[i]);
		if (!IS_ERR_OR_NULL(c->cq[i]))
			ib_free_cq(c->cq[i]);
		if (c->buf[i])
			ib_dma_unmap_single(c->ibdev, c->dma[i], BUF, DMA_BIDIRECTIONAL);
		kfree(c->buf[i]);
		if (c->pages[i])
			__free_page(c->pages[i]);
	}
	if (!IS_ERR_OR_NULL(c->mr))
		ib_dereg_mr(c->mr);
	if (!IS_ERR_OR_NULL(c->pd))
		ib_dealloc_pd(c->pd);
}

/* The next completion of CQ @i; a zeroed wc with status -1 on timeout. */
static struct ib_wc poll_wc(struct ctx *c, int i)
{
	unsigned long end = jiffies + 30 * HZ;
	struct ib_wc wc = {};

	while (time_before(jiffies, end)) {
		if (ib_poll_cq(c->cq[i], 1, &wc) == 1)
			return wc;
		usleep_range(100, 1000);
	}
	memset(&wc, 0, sizeof(wc));
	wc.status = -1;
	return wc;
}

static int post(struct ctx *c, int i, struct ib_send_wr *wr)
{
	return ib_post_send(c->qp[i], wr, NULL);
}

/* RDMA WRITE or READ of @len bytes from QP 1's buffer to (@rkey, @va). */
static enum ib_wc_status rdma(struct ctx *c, enum ib_wr_opcode op, u32 rkey, u64 va, u32 len)
{
	struct ib_sge sge = { .addr = c->dma[1], .length = len, .lkey = c->pd->local_dma_lkey };
	struct ib_rdma_wr wr = {
		.wr = { .opcode = op, .sg_list = &sge, .num_sge = 1,
			.send_flags = IB_SEND_SIGNALED },
		.remote_addr = va, .rkey = rkey,
	};

	if (post(c, 1, &wr.wr))
		return -1;
	return poll_wc(c, 1).status;
}

/* Maps the two test pages into a fast MR: 512 bytes into the first page, then the whole second one. */
static struct ib_mr *map_frmr(struct kunit *test, struct ctx *c)
{
	int n;

	c->mr = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, 4);
	KUNIT_ASSERT_FALSE(test, IS_ERR(c->mr));
	sg_init_table(c->sg, 2);
	sg_set_page(&c->sg[0], c->pages[0], PAGE_SIZE - 512, 512);
	sg_set_page(&c->sg[1], c->pages[1], PAGE_SIZE, 0);
	KUNIT_ASSERT_EQ(test, ib_dma_map_sg(c->ibdev, c->sg, 2, DMA_BIDIRECTIONAL), 2);
	n = ib_map_mr_sg(c->mr, c->sg, 2, NULL, PAGE_SIZE);
	KUNIT_ASSERT_EQ(test, n, 2);
	KUNIT_EXPECT_EQ(test, c->mr->length, 2 * PAGE_SIZE - 512);
	return c->mr;
}

static enum ib_wc_status reg_mr(struct ctx *c, struct ib_mr *mr, int access)
{
	struct ib_reg_wr wr = {
		.wr = { .opcode = IB_WR_REG_MR, .send_flags = IB_SEND_SIGNALED },
		.mr = mr, .key = mr->rkey, .access = access,
	};
	struct ib_wc wc;

	if (post(c, 0, &wr.wr))
		return -1;
	wc = poll_wc(c, 0);
	if (wc.status == IB_WC_SUCCESS && wc.opcode != IB_WC_REG_MR)
		return -1;
	return wc.status;
}

static enum ib_wc_status local_inv(struct ctx *c, u32 key)
{
	struct ib_send_wr wr = { .opcode = IB_WR_LOCAL_INV, .send_flags = IB_SEND_SIGNALED,
				 .ex.invalidate_rkey = key };
	struct ib_wc wc;

	if (post(c, 0, &wr))
		return -1;
	wc = poll_wc(c, 0);
	if (wc.status == IB_WC_SUCCESS && wc.opcode != IB_WC_LOCAL_INV)
		return -1;
	return wc.status;
}

static void unmap_sg(struct ctx *c)
{
	ib_dma_unmap_sg(c->ibdev, c->sg, 2, DMA_BIDIRECTIONAL);
}

#define RW (IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_READ)

/* ib_alloc_pd's DMA MR (local_dma_lkey) as source and sink of a 3-packet SEND. */
static void dma_mr_send_recv(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_sge rs = { .addr = c->dma[0], .length = BUF, .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .sg_list = &rs, .num_sge = 1, .wr_id = 7 };
	struct ib_sge ss = { .addr = c->dma[1] + 100, .length = 3000, .lkey = c->pd->local_dma_lkey };
	struct ib_send_wr swr = { .opcode = IB_WR_SEND, .sg_list = &ss, .num_sge = 1,
				  .send_flags = IB_SEND_SIGNALED };
	struct ib_wc wc;

	memset(c->buf[1], 0x5a, BUF);
	KUNIT_ASSERT_EQ(test, ib_post_recv(c->qp[0], &rwr, NULL), 0);
	KUNIT_ASSERT_EQ(test, post(c, 1, &swr), 0);
	KUNIT_EXPECT_EQ(test, poll_wc(c, 1).status, IB_WC_SUCCESS);
	wc = poll_wc(c, 0);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.byte_len, 3000);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 7);
	KUNIT_EXPECT_NULL(test, memchr_inv(c->buf[0], 0x5a, 3000));
	KUNIT_EXPECT_NULL(test, memchr_inv(c->buf[0] + 3000, 0, BUF - 3000));
}

/* Inline data from two kernel buffers travels in the WQE; an atomic lands in a fast MR. */
static void inline_send_and_atomic(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr = map_frmr(test, c);
	struct ib_sge rs = { .addr = c->dma[0], .length = 64, .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .sg_list = &rs, .num_sge = 1 };
	char *src = c->buf[1];
	struct ib_sge ss[2] = {
		{ .addr = c->dma[1], .length = 10 },
		{ .addr = c->dma[1] + 100, .length = 6 },
	};
	struct ib_send_wr swr = { .opcode = IB_WR_SEND, .sg_list = ss, .num_sge = 2,
				  .send_flags = IB_SEND_SIGNALED | IB_SEND_INLINE };
	struct ib_sge as = { .addr = c->dma[1] + 256, .length = 8, .lkey = c->pd->local_dma_lkey };
	struct ib_atomic_wr awr = {
		.wr = { .opcode = IB_WR_ATOMIC_FETCH_AND_ADD, .sg_list = &as, .num_sge = 1,
			.send_flags = IB_SEND_SIGNALED },
		.rkey = mr->rkey, .remote_addr = mr->iova + PAGE_SIZE - 512, .compare_add = 5,
	};
	struct ib_wc wc;

	memcpy(src, "0123456789", 10);
	memcpy(src + 100, "abcdef", 6);
	KUNIT_ASSERT_EQ(test, ib_post_recv(c->qp[0], &rwr, NULL), 0);
	KUNIT_ASSERT_EQ(test, post(c, 1, &swr), 0);
	/* The WQE holds its own copy: the buffer may change at once. */
	memset(src, 0, 128);
	KUNIT_EXPECT_EQ(test, poll_wc(c, 1).status, IB_WC_SUCCESS);
	wc = poll_wc(c, 0);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.byte_len, 16);
	KUNIT_EXPECT_EQ(test, memcmp(c->buf[0], "0123456789abcdef", 16), 0);

	KUNIT_ASSERT_EQ(test, reg_mr(c, mr, RW | IB_ACCESS_REMOTE_ATOMIC), IB_WC_SUCCESS);
	*(u64 *)page_address(c->pages[1]) = 37;
	KUNIT_ASSERT_EQ(test, post(c, 1, &awr.wr), 0);
	KUNIT_EXPECT_EQ(test, poll_wc(c, 1).status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, *(u64 *)(c->buf[1] + 256), 37);
	KUNIT_EXPECT_EQ(test, *(u64 *)page_address(c->pages[1]), 42);
	unmap_sg(c);
}

/* REG_MR, then WRITE and READ across the MR's page boundary. */
static void frmr_write_read(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr = map_frmr(test, c);
	u32 len = mr->length;

	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	KUNIT_ASSERT_EQ(test, reg_mr(c, mr, RW), IB_WC_SUCCESS);
	memset(c->buf[1], 0xa5, BUF);
	KUNIT_EXPECT_EQ(test, rdma(c, IB_WR_RDMA_WRITE, mr->rkey, mr->iova, len), IB_WC_SUCCESS);
	KUNIT_EXPECT_NULL(test, memchr_inv(page_address(c->pages[0]), 0, 512));
	KUNIT_EXPECT_NULL(test, memchr_inv(page_address(c->pages[0]) + 512, 0xa5, PAGE_SIZE - 512));
	KUNIT_EXPECT_NULL(test, memchr_inv(page_address(c->pages[1]), 0xa5, PAGE_SIZE));
	memset(page_address(c->pages[1]), 0x3c, PAGE_SIZE);
	memset(c->buf[1], 0, BUF);
	KUNIT_EXPECT_EQ(test, rdma(c, IB_WR_RDMA_READ, mr->rkey, mr->iova, len), IB_WC_SUCCESS);
	KUNIT_EXPECT_NULL(test, memchr_inv(c->buf[1], 0xa5, PAGE_SIZE - 512));
	KUNIT_EXPECT_NULL(test, memchr_inv(c->buf[1] + PAGE_SIZE - 512, 0x3c, PAGE_SIZE));
	/* One byte past the end: REM_ACCESS_ERR. */
	KUNIT_EXPECT_EQ(test, rdma(c, IB_WR_RDMA_READ, mr->rkey, mr->iova + 1, len),
			IB_WC_REM_ACCESS_ERR);
	unmap_sg(c);
}

/*
 * The iova a client sets between ib_map_mr_sg and REG_MR is the MR's:
 * NFS/RDMA puts its XID in the high 32 bits (frwr_map), RDS makes it zero
 * (ib_map_mr_sg_zbva). REG_MR used the iova of the mapping, and every peer
 * access at the advertised address got REM_ACCESS_ERR.
 */
static void frmr_iova_set_after_map(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr = map_frmr(test, c);
	u64 mapped = mr->iova;
	u32 len = mr->length;

	mr->iova = 0x5eed0000ULL << 32 | (mapped & 0xffffffff);
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	KUNIT_ASSERT_EQ(test, reg_mr(c, mr, RW), IB_WC_SUCCESS);
	memset(c->buf[1], 0x6b, BUF);
	KUNIT_EXPECT_EQ(test, rdma(c, IB_WR_RDMA_WRITE, mr->rkey, mr->iova + 100, len - 100),
			IB_WC_SUCCESS);
	KUNIT_EXPECT_NULL(test, memchr_inv(page_address(c->pages[0]), 0, 612));
	KUNIT_EXPECT_NULL(test, memchr_inv(page_address(c->pages[0]) + 612, 0x6b,
					   PAGE_SIZE - 612));
	KUNIT_EXPECT_NULL(test, memchr_inv(page_address(c->pages[1]), 0x6b, PAGE_SIZE));
	/* Zero-based, as RDS registers. */
	KUNIT_ASSERT_EQ(test, local_inv(c, mr->rkey), IB_WC_SUCCESS);
	mr->iova = 0;
	ib_update_fast_reg_key(mr, ib_inc_rkey(mr->rkey));
	KUNIT_ASSERT_EQ(test, reg_mr(c, mr, RW), IB_WC_SUCCESS);
	memset(page_address(c->pages[1]), 0x3c, PAGE_SIZE);
	memset(c->buf[1], 0, BUF);
	KUNIT_EXPECT_EQ(test, rdma(c, IB_WR_RDMA_READ, mr->rkey, PAGE_SIZE - 512, 64),
			IB_WC_SUCCESS);
	KUNIT_EXPECT_NULL(test, memchr_inv(c->buf[1], 0x3c, 64));
	unmap_sg(c);
}

/*
 * IB_WR_ATOMIC_WRITE from a kernel QP (an ib_rdma_wr whose one SGE holds the
 * 8 bytes, copied into the WQE at post time): placed at once into the fast
 * MR, IB_WC_ATOMIC_WRITE; 4 bytes is EINVAL at post time, and so is a
 * FLUSH.
 */
static void frmr_atomic_write(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr = map_frmr(test, c);
	struct ib_sge sge = { .addr = c->dma[1], .length = 8, .lkey = c->pd->local_dma_lkey };
	struct ib_rdma_wr wr = {
		.wr = { .opcode = IB_WR_ATOMIC_WRITE, .sg_list = &sge, .num_sge = 1,
			.send_flags = IB_SEND_SIGNALED },
		.remote_addr = mr->iova + 8, .rkey = mr->rkey,
	};
	u64 *dst = page_address(c->pages[0]) + 512 + 8;
	struct ib_wc wc;

	KUNIT_ASSERT_EQ(test, reg_mr(c, mr, RW), IB_WC_SUCCESS);
	*(u64 *)c->buf[1] = 0x0102030405060708ULL;
	KUNIT_ASSERT_EQ(test, post(c, 1, &wr.wr), 0);
	wc = poll_wc(c, 1);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.opcode, IB_WC_ATOMIC_WRITE);
	KUNIT_EXPECT_EQ(test, *dst, 0x0102030405060708ULL);
	KUNIT_EXPECT_EQ(test, dst[1], 0);
	sge.length = 4;
	KUNIT_EXPECT_EQ(test, post(c, 1, &wr.wr), -EINVAL);
	/* No kernel WR carries FLUSH's range, type and level: refused. */
	wr.wr.opcode = IB_WR_FLUSH;
	KUNIT_EXPECT_EQ(test, post(c, 1, &wr.wr), -EINVAL);
	unmap_sg(c);
}

/* After LOCAL_INV the rkey is dead, and the memory stays untouched. */
static void frmr_local_inv(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr = map_frmr(test, c);

	KUNIT_ASSERT_EQ(test, reg_mr(c, mr, RW), IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, local_inv(c, mr->rkey), IB_WC_SUCCESS);
	memset(c->buf[1], 0xee, BUF);
	KUNIT_EXPECT_EQ(test, rdma(c, IB_WR_RDMA_WRITE, mr->rkey, mr->iova, 64),
			IB_WC_REM_ACCESS_ERR);
	KUNIT_EXPECT_NULL(test, memchr_inv(page_address(c->pages[0]), 0, PAGE_SIZE));
	unmap_sg(c);
}

/* SEND_WITH_INV invalidates the responder's MR and reports the rkey. */
static void frmr_send_with_inv(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr = map_frmr(test, c);
	struct ib_sge rs = { .addr = c->dma[0], .length = 64, .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .sg_list = &rs, .num_sge = 1 };
	struct ib_sge ss = { .addr = c->dma[1], .length = 16, .lkey = c->pd->local_dma_lkey };
	struct ib_send_wr swr = { .opcode = IB_WR_SEND_WITH_INV, .sg_list = &ss, .num_sge = 1,
				  .send_flags = IB_SEND_SIGNALED };
	struct ib_wc wc;

	KUNIT_ASSERT_EQ(test, reg_mr(c, mr, RW), IB_WC_SUCCESS);
	swr.ex.invalidate_rkey = mr->rkey;
	KUNIT_ASSERT_EQ(test, ib_post_recv(c->qp[0], &rwr, NULL), 0);
	KUNIT_ASSERT_EQ(test, post(c, 1, &swr), 0);
	KUNIT_EXPECT_EQ(test, poll_wc(c, 1).status, IB_WC_SUCCESS);
	wc = poll_wc(c, 0);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_TRUE(test, wc.wc_flags & IB_WC_WITH_INVALIDATE);
	KUNIT_EXPECT_EQ(test, wc.ex.invalidate_rkey, mr->rkey);
	KUNIT_EXPECT_EQ(test, rdma(c, IB_WR_RDMA_WRITE, mr->rkey, mr->iova, 64),
			IB_WC_REM_ACCESS_ERR);
	unmap_sg(c);
}

/* SEND_WITH_INV of a key that names no fast MR: REM_INV_REQ_ERR. */
static void send_with_inv_bad_key(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_sge rs = { .addr = c->dma[0], .length = 64, .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .sg_list = &rs, .num_sge = 1 };
	struct ib_sge ss = { .addr = c->dma[1], .length = 16, .lkey = c->pd->local_dma_lkey };
	struct ib_send_wr swr = { .opcode = IB_WR_SEND_WITH_INV, .sg_list = &ss, .num_sge = 1,
				  .send_flags = IB_SEND_SIGNALED };

	/* The PD's DMA MR: valid, but not invalidatable. */
	swr.ex.invalidate_rkey = c->pd->local_dma_lkey;
	KUNIT_ASSERT_EQ(test, ib_post_recv(c->qp[0], &rwr, NULL), 0);
	KUNIT_ASSERT_EQ(test, post(c, 1, &swr), 0);
	KUNIT_EXPECT_EQ(test, poll_wc(c, 1).status, IB_WC_REM_INV_REQ_ERR);
}

/* A new key after re-registration: the old tag no longer opens the MR. */
static void frmr_stale_key(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr = map_frmr(test, c);
	u32 old;

	KUNIT_ASSERT_EQ(test, reg_mr(c, mr, RW), IB_WC_SUCCESS);
	old = mr->rkey;
	KUNIT_ASSERT_EQ(test, local_inv(c, old), IB_WC_SUCCESS);
	ib_update_fast_reg_key(mr, ib_inc_rkey(old));
	KUNIT_ASSERT_EQ(test, ib_map_mr_sg(mr, c->sg, 2, NULL, PAGE_SIZE), 2);
	KUNIT_ASSERT_EQ(test, reg_mr(c, mr, RW), IB_WC_SUCCESS);
	KUNIT_EXPECT_NE(test, mr->rkey, old);
	KUNIT_EXPECT_EQ(test, rdma(c, IB_WR_RDMA_WRITE, mr->rkey, mr->iova, 64), IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, rdma(c, IB_WR_RDMA_WRITE, old, mr->iova, 64), IB_WC_REM_ACCESS_ERR);
	unmap_sg(c);
}

/* REG_MR of a valid MR, LOCAL_INV of a DMA MR or a wrong tag: LOC_QP_OP_ERR. */
static void local_op_errors(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr = map_frmr(test, c);

	KUNIT_EXPECT_EQ(test, local_inv(c, c->pd->local_dma_lkey), IB_WC_LOC_QP_OP_ERR);
	unmap_sg(c);
	/* The QP is in error now: flushed from here on. */
	KUNIT_EXPECT_EQ(test, reg_mr(c, mr, RW), IB_WC_WR_FLUSH_ERR);
}

/*
 * A local operation that fails moves the QP to ERR, and what was posted
 * after it is flushed: a REG_MR chained behind a failing LOCAL_INV is not
 * run. The send task took both in one turn and ran the REG_MR in the state
 * the turn started in (RTS); local_op_errors saw it when its REG_MR came
 * while the turn of the LOCAL_INV was still going.
 */
static void local_op_error_flushes_the_chain(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr = map_frmr(test, c);
	struct ib_reg_wr reg = {
		.wr = { .opcode = IB_WR_REG_MR, .send_flags = IB_SEND_SIGNALED },
		.mr = mr, .key = mr->rkey, .access = RW,
	};
	struct ib_send_wr inv = { .opcode = IB_WR_LOCAL_INV, .send_flags = IB_SEND_SIGNALED,
				  .ex.invalidate_rkey = c->pd->local_dma_lkey, .next = &reg.wr };

	KUNIT_ASSERT_EQ(test, post(c, 0, &inv), 0);
	KUNIT_EXPECT_EQ(test, poll_wc(c, 0).status, IB_WC_LOC_QP_OP_ERR);
	KUNIT_EXPECT_EQ(test, poll_wc(c, 0).status, IB_WC_WR_FLUSH_ERR);
	unmap_sg(c);
}

static void reg_mr_twice(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr = map_frmr(test, c);

	KUNIT_ASSERT_EQ(test, reg_mr(c, mr, RW), IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, reg_mr(c, mr, RW), IB_WC_LOC_QP_OP_ERR);
	unmap_sg(c);
}

static void local_inv_wrong_tag(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr = map_frmr(test, c);

	KUNIT_ASSERT_EQ(test, reg_mr(c, mr, RW), IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, local_inv(c, ib_inc_rkey(mr->rkey)), IB_WC_LOC_QP_OP_ERR);
	unmap_sg(c);
}

/*
 * ULPs post and poll from softirq context (IB_POLL_SOFTIRQ completion
 * handlers) and under their own spinlocks: nothing of oxe's may sleep there.
 * The debug flavour's DEBUG_ATOMIC_SLEEP and lockdep watch this case.
 */
static void post_poll_atomic(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_sge rs = { .addr = c->dma[0], .length = 64, .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .sg_list = &rs, .num_sge = 1, .wr_id = 3 };
	struct ib_sge ss = { .addr = c->dma[1], .length = 64, .lkey = c->pd->local_dma_lkey };
	struct ib_send_wr swr = { .opcode = IB_WR_SEND, .sg_list = &ss, .num_sge = 1,
				  .send_flags = IB_SEND_SIGNALED };
	unsigned long end = jiffies + 30 * HZ, flags;
	struct ib_wc wc[2];
	int got = 0, ret;

	local_bh_disable();
	ret = ib_post_recv(c->qp[0], &rwr, NULL);
	local_bh_enable();
	KUNIT_ASSERT_EQ(test, ret, 0);
	local_irq_save(flags);
	ret = ib_post_send(c->qp[1], &swr, NULL);
	local_irq_restore(flags);
	KUNIT_ASSERT_EQ(test, ret, 0);
	while (got < 2 && time_before(jiffies, end)) {
		local_bh_disable();
		got += ib_poll_cq(c->cq[got == 0 ? 1 : 0], 1, &wc[got]);
		local_bh_enable();
		usleep_range(100, 1000);
	}
	KUNIT_ASSERT_EQ(test, got, 2);
	KUNIT_EXPECT_EQ(test, wc[0].status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc[1].status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc[1].wr_id, 3);
}

/*
 * Every ULP drains a QP before destroying it (ib_drain_qp: the QP to ERR,
 * then one more send and receive, whose flush it waits for). A receive
 * posted in ERR must be flushed then and there: before, only those posted
 * before the QP failed were, and nvme-rdma's and nvmet-rdma's drains hung.
 */
static void recv_posted_in_err_is_flushed(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_qp_attr a = { .qp_state = IB_QPS_ERR };
	struct ib_sge rs = { .addr = c->dma[0], .length = 64, .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .sg_list = &rs, .num_sge = 1, .wr_id = 7 };
	struct ib_wc wc;

	KUNIT_ASSERT_EQ(test, ib_modify_qp(c->qp[0], &a, IB_QP_STATE), 0);
	KUNIT_ASSERT_EQ(test, ib_post_recv(c->qp[0], &rwr, NULL), 0);
	wc = poll_wc(c, 0);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_WR_FLUSH_ERR);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 7);
	/* The core's own drain (a DIRECT CQ: it polls for its completions),
	 * which would wait forever where the flush above failed. */
	if (wc.status == IB_WC_WR_FLUSH_ERR)
		ib_drain_qp(c->qp[1]);
}

/*
 * A ULP whose CQ overflowed still drains its QP: the overflow moved the QP to
 * ERR, the ULP polls what is there, and ib_drain_qp's flush completions fit.
 * The CQ stayed in error after an overflow before, and this drain waited
 * forever (uninterruptibly: a ULP's teardown hung).
 */
static void drain_after_cq_overflow(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_qp_init_attr ia = {
		.qp_type = IB_QPT_RC, .sq_sig_type = IB_SIGNAL_ALL_WR,
		.cap = { .max_send_wr = 8, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ib_sge rs = { .addr = c->dma[1], .length = 64, .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .sg_list = &rs, .num_sge = 1 };
	struct ib_send_wr wr = { .opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED };
	struct ib_qp_attr a = { .qp_state = IB_QPS_RESET };
	unsigned long end = jiffies + 30 * HZ;
	struct ib_wc wc;
	union ib_gid gid;
	struct ib_qp *qp;
	struct ib_cq *cq;
	int i, gi;

	cq = ib_alloc_cq(c->ibdev, NULL, 1, 0, IB_POLL_DIRECT);
	KUNIT_ASSERT_FALSE(test, IS_ERR(cq));
	ia.send_cq = ia.recv_cq = cq;
	qp = ib_create_qp(c->pd, &ia);
	KUNIT_ASSERT_FALSE(test, IS_ERR(qp));
	gi = roce_gid(c->ibdev, &gid);
	KUNIT_ASSERT_EQ(test, ib_modify_qp(c->qp[1], &a, IB_QP_STATE), 0);
	KUNIT_ASSERT_EQ(test, connect_qp(c->qp[1], qp->qp_num, gi, &gid), 0);
	KUNIT_ASSERT_EQ(test, connect_qp(qp, c->qp[1]->qp_num, gi, &gid), 0);
	for (i = 0; i < 8; i++) {
		KUNIT_ASSERT_EQ(test, ib_post_recv(c->qp[1], &rwr, NULL), 0);
		KUNIT_ASSERT_EQ(test, ib_post_send(qp, &wr, NULL), 0);
	}
	/* Eight completions for a CQ of one: the QP fails. */
	while (time_before(jiffies, end)) {
		KUNIT_ASSERT_EQ(test, ib_query_qp(qp, &a, IB_QP_STATE, &ia), 0);
		if (a.qp_state == IB_QPS_ERR)
			break;
		usleep_range(1000, 2000);
	}
	KUNIT_ASSERT_EQ(test, a.qp_state, IB_QPS_ERR);
	/* These have no ib_cqe: polled here, not by the drain. */
	while (ib_poll_cq(cq, 1, &wc) == 1)
		;
	ib_drain_qp(qp);
	ib_destroy_qp(qp);
	ib_free_cq(cq);
}

/* Limits: no more pages than max_num_sg; too large a page list is refused. */
static void frmr_limits(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_mr *mr;

	mr = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, c->ibdev->attrs.max_fast_reg_page_list_len + 1);
	KUNIT_EXPECT_EQ(test, PTR_ERR_OR_ZERO(mr), -EINVAL);
	if (!IS_ERR(mr))
		ib_dereg_mr(mr);
	c->mr = ib_alloc_mr(c->pd, IB_MR_TYPE_MEM_REG, 1);
	KUNIT_ASSERT_FALSE(test, IS_ERR(c->mr));
	sg_init_table(c->sg, 2);
	sg_set_page(&c->sg[0], c->pages[0], PAGE_SIZE, 0);
	sg_set_page(&c->sg[1], c->pages[1], PAGE_SIZE, 0);
	KUNIT_ASSERT_EQ(test, ib_dma_map_sg(c->ibdev, c->sg, 2, DMA_BIDIRECTIONAL), 2);
	KUNIT_EXPECT_EQ(test, ib_map_mr_sg(c->mr, c->sg, 2, NULL, PAGE_SIZE), 1);
	/* Pages smaller than the CPU's are refused. */
	KUNIT_EXPECT_EQ(test, ib_map_mr_sg(c->mr, c->sg, 1, NULL, 512), -EINVAL);
	unmap_sg(c);
}

/* Kernel WRs with more SGEs than the device allows: EINVAL, and bad_wr names the WR. */
static void post_too_many_sges(struct kunit *test)
{
	struct ctx *c = test->priv;
	int n = c->ibdev->attrs.max_send_sge + 1;
	struct ib_sge *sg = kunit_kcalloc(test, n, sizeof(*sg), GFP_KERNEL);
	struct ib_send_wr swr = { .opcode = IB_WR_SEND, .sg_list = sg, .num_sge = n };
	struct ib_recv_wr rwr = { .sg_list = sg, .num_sge = n };
	const struct ib_send_wr *bad_s = NULL;
	const struct ib_recv_wr *bad_r = NULL;

	KUNIT_ASSERT_NOT_NULL(test, sg);
	KUNIT_EXPECT_EQ(test, ib_post_send(c->qp[0], &swr, &bad_s), -EINVAL);
	KUNIT_EXPECT_PTR_EQ(test, bad_s, (const struct ib_send_wr *)&swr);
	KUNIT_EXPECT_EQ(test, ib_post_recv(c->qp[0], &rwr, &bad_r), -EINVAL);
	KUNIT_EXPECT_PTR_EQ(test, bad_r, (const struct ib_recv_wr *)&rwr);
}

/* An RC QP on @srq, connected to QP 1 of the context (which talks to it). */
static struct ib_qp *srq_qp(struct kunit *test, struct ib_srq *srq)
{
	struct ctx *c = test->priv;
	struct ib_qp_init_attr ia = {
		.qp_type = IB_QPT_RC, .sq_sig_type = IB_SIGNAL_ALL_WR,
		.cap = { .max_send_wr = 4, .max_send_sge = 1 },
		.send_cq = c->cq[0], .recv_cq = c->cq[0], .srq = srq,
	};
	union ib_gid gid;
	int gi = roce_gid(c->ibdev, &gid);
	struct ib_qp *qp = ib_create_qp(c->pd, &ia);

	KUNIT_ASSERT_FALSE(test, IS_ERR(qp));
	KUNIT_ASSERT_EQ(test, ib_modify_qp(c->qp[1], &(struct ib_qp_attr){ .qp_state = IB_QPS_RESET },
					   IB_QP_STATE), 0);
	KUNIT_ASSERT_EQ(test, connect_qp(c->qp[1], qp->qp_num, gi, &gid), 0);
	KUNIT_ASSERT_EQ(test, connect_qp(qp, c->qp[1]->qp_num, gi, &gid), 0);
	return qp;
}

/*
 * A kernel SRQ: post_srq_recv fills it, a QP created on it takes a SEND's
 * receive from it, and its own post_recv is refused (it has no RQ).
 */
static void srq_send_recv(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct ib_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ib_sge rs = { .addr = c->dma[0], .length = 4096, .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .sg_list = &rs, .num_sge = 1, .wr_id = 11 };
	struct ib_sge ss = { .addr = c->dma[1], .length = 2000, .lkey = c->pd->local_dma_lkey };
	struct ib_send_wr swr = { .opcode = IB_WR_SEND, .sg_list = &ss, .num_sge = 1,
				  .send_flags = IB_SEND_SIGNALED };
	struct ib_srq *srq;
	struct ib_qp *qp;
	struct ib_wc wc;

	srq = ib_create_srq(c->pd, &sa);
	KUNIT_ASSERT_FALSE(test, IS_ERR(srq));
	qp = srq_qp(test, srq);
	KUNIT_EXPECT_EQ(test, ib_post_recv(qp, &rwr, NULL), -EINVAL);
	KUNIT_ASSERT_EQ(test, ib_post_srq_recv(srq, &rwr, NULL), 0);
	memset(c->buf[1], 0x6b, 2000);
	KUNIT_ASSERT_EQ(test, post(c, 1, &swr), 0);
	KUNIT_EXPECT_EQ(test, poll_wc(c, 1).status, IB_WC_SUCCESS);
	wc = poll_wc(c, 0);
	KUNIT_EXPECT_EQ(test, wc.status, IB_WC_SUCCESS);
	KUNIT_EXPECT_EQ(test, wc.wr_id, 11);
	KUNIT_EXPECT_EQ(test, wc.byte_len, 2000);
	KUNIT_EXPECT_PTR_EQ(test, wc.qp, qp);
	KUNIT_EXPECT_NULL(test, memchr_inv(c->buf[0], 0x6b, 2000));
	ib_destroy_qp(qp);
	ib_destroy_srq(srq);
}

struct rearm {
	atomic_t events;
	int err;
};

/* Arms the limit again at 1, as a consumer refilling in steps would. */
static void srq_rearm(struct ib_event *ev, void *context)
{
	struct rearm *r = context;

	if (ev->event != IB_EVENT_SRQ_LIMIT_REACHED)
		return;
	atomic_inc(&r->events);
	r->err = ib_modify_srq(ev->element.srq, &(struct ib_srq_attr){ .srq_limit = 1 },
			       IB_SRQ_LIMIT);
}

/*
 * IB_EVENT_SRQ_LIMIT_REACHED's handler may arm the limit again: two
 * receives posted, the limit armed at 2; the first SEND leaves one (an
 * event, whose handler arms 1), the second none (another). oxe used to
 * raise the event holding the SRQ's lock, which ib_modify_srq takes: the
 * QP's task hung.
 */
static void srq_limit_rearmed_by_its_handler(struct kunit *test)
{
	struct ctx *c = test->priv;
	struct rearm r = { .events = ATOMIC_INIT(0), .err = -1 };
	struct ib_srq_init_attr sa = {
		.event_handler = srq_rearm, .srq_context = &r,
		.attr = { .max_wr = 16, .max_sge = 1 },
	};
	struct ib_sge rs = { .addr = c->dma[0], .length = 4096, .lkey = c->pd->local_dma_lkey };
	struct ib_recv_wr rwr = { .sg_list = &rs, .num_sge = 1 };
	struct ib_sge ss = { .addr = c->dma[1], .length = 64, .lkey = c->pd->local_dma_lkey };
	struct ib_send_wr swr = { .opcode = IB_WR_SEND, .sg_list = &ss, .num_sge = 1,
				  .send_flags = IB_SEND_SIGNALED };
	struct ib_srq *srq;
	struct ib_qp *qp;

	srq = ib_create_srq(c->pd, &sa);
	KUNIT_ASSERT_FALSE(test, IS_ERR(srq));
	qp = srq_qp(test, srq);
	KUNIT_ASSERT_EQ(test, ib_post_srq_recv(srq, &rwr, NULL), 0);
	KUNIT_ASSERT_EQ(test, ib_post_srq_recv(srq, &rwr, NULL), 0);
	KUNIT_ASSERT_EQ(test, ib_modify_srq(srq, &(struct ib_srq_attr){ .srq_limit = 2 },
					    IB_SRQ_LIMIT), 0);
	for (int i = 0; i < 2; i++) {
		KUNIT_ASSERT_EQ(test, post(c, 1, &swr), 0);
		KUNIT_EXPECT_EQ(test, poll_wc(c, 1).status, IB_WC_SUCCESS);
		KUNIT_EXPECT_EQ(test, poll_wc(c, 0).status, IB_WC_SUCCESS);
		KUNIT_EXPECT_EQ(test, atomic_read(&r.events), i + 1);
		KUNIT_EXPECT_EQ(test, r.err, 0);
	}
	ib_destroy_qp(qp);
	ib_destroy_srq(srq);
}

static struct kunit_case oxe_kverbs_cases[] = {
	KUNIT_CASE(dma_mr_send_recv),
	KUNIT_CASE(frmr_write_read),
	KUNIT_CASE(frmr_iova_set_after_map),
	KUNIT_CASE(frmr_atomic_write),
	KUNIT_CASE(inline_send_and_atomic),
	KUNIT_CASE(frmr_local_inv),
	KUNIT_CASE(frmr_send_with_inv),
	KUNIT_CASE(send_with_inv_bad_key),
	KUNIT_CASE(frmr_stale_key),
	KUNIT_CASE(local_op_errors),
	KUNIT_CASE(local_op_error_flushes_the_chain),
	KUNIT_CASE(reg_mr_twice),
	KUNIT_CASE(local_inv_wrong_tag),
	KUNIT_CASE(frmr_limits),
	KUNIT_CASE(post_poll_atomic),
	KUNIT_CASE(post_too_many_sges),
	KUNIT_CASE(srq_send_recv),
	KUNIT_CASE(srq_limit_rearmed_by_its_handler),
	KUNIT_CASE(recv_posted_in_err_is_flushed),
	KUNIT_CASE(drain_after_cq_overflow),
	{}
};

static struct kunit_suite oxe_kverbs_suite = {
	.name = "oxe_kverbs",
	.suite_init = suite_init,
	.suite_exit = suite_exit,
	.init = ctx_init,
	.exit = ctx_exit,
	.test_cases = oxe_kverbs_cases,
};
kunit_test_suite(oxe_kverbs_suite);

MODULE_DESCRIPTION("KUnit tests of oxe's kernel verbs: DMA MR, fast registration, invalidation");
MODULE_LICENSE("GPL");
