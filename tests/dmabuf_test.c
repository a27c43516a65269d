// SPDX-License-Identifier: GPL-2.0
/*
 * dma-buf MRs on one oxe device: memory exported by udmabuf (a memfd's
 * pages as a dma-buf) registered with the REG_DMABUF_MR method (sent as the
 * ioctl libibverbs would send: librxe has no reg_dmabuf_mr), then WRITE,
 * READ, SEND and an atomic into and out of it, every byte checked through
 * the memfd's own mapping; an offset into the buffer and an iova of the
 * user's choosing; the errors (not a dma-buf, a range past its end, rights
 * the MR lacks); dereg, and the buffer freed once its last user lets go.
 * kselftest harness: KTAP output, one forked child per case.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/udmabuf.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include "kselftest_harness.h"
#include "oxe_test.h"

#define LEN (1 << 20)
#define REM (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | \
	     IBV_ACCESS_REMOTE_ATOMIC)

/* A dma-buf of @len bytes from udmabuf; its pages mapped at *@view too. */
static int udmabuf(size_t len, char **view)
{
	int memfd = memfd_create("oxe-dmabuf", MFD_ALLOW_SEALING);
	struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC, .size = len };
	int dev, fd;

	if (memfd < 0 || ftruncate(memfd, len) || fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK))
		return -1;
	*view = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (*view == MAP_FAILED)
		return -1;
	dev = open("/dev/udmabuf", O_RDWR);
	if (dev < 0)
		return -1;
	c.memfd = memfd;
	fd = ioctl(dev, UDMABUF_CREATE, &c);
	close(dev);
	close(memfd);
	return fd;
}

struct dmr {
	uint32_t handle, lkey, rkey;
};

/*
 * REG_DMABUF_MR: [@offset, @offset + @len) of dma-buf @fd at @iova. 0 or
 * -errno.
 */
static int reg_dmabuf(struct ibv_pd *pd, int fd, uint64_t offset, uint64_t len, uint64_t iova,
		      int access, struct dmr *mr)
{
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[9];
	} cmd = {
		.hdr = {
			.length = sizeof(cmd),
			.object_id = UVERBS_OBJECT_MR,
			.method_id = UVERBS_METHOD_REG_DMABUF_MR,
			.num_attrs = 9,
			.driver_id = RDMA_DRIVER_RXE,
		},
		.attrs = {
			{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_HANDLE },
			{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_PD_HANDLE, .data = pd->handle },
			{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_OFFSET, .len = 8, .data = offset },
			{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_LENGTH, .len = 8, .data = len },
			{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_IOVA, .len = 8, .data = iova },
			{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_FD, .len = 4, .data = (uint32_t)fd },
			{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_ACCESS_FLAGS, .len = 4, .data = access },
			{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_RESP_LKEY, .len = 4,
			  .data = (uintptr_t)&mr->lkey },
			{ .attr_id = UVERBS_ATTR_REG_DMABUF_MR_RESP_RKEY, .len = 4,
			  .data = (uintptr_t)&mr->rkey },
		},
	};

	if (ioctl(pd->context->cmd_fd, RDMA_VERBS_IOCTL, &cmd))
		return -errno;
	mr->handle = cmd.attrs[0].data;
	return 0;
}

/* DEREG_MR of an MR known by its handle. 0 or -errno. */
static int dereg(struct ibv_context *ctx, uint32_t handle)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_dereg_mr cmd;
	} req = {
		.hdr = { .command = IB_USER_VERBS_CMD_DEREG_MR, .in_words = sizeof(req) / 4 },
		.cmd = { .mr_handle = handle },
	};

	return write(ctx->cmd_fd, &req, sizeof(req)) == sizeof(req) ? 0 : -errno;
}

/* qp[0] of the loop is the requester, the dma-buf MR the responder's. */
FIXTURE(dmabuf) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct loop l;
	char *view, *buf;
	int fd;
	struct ibv_mr *buf_mr;
	struct dmr mr;
};

static void pattern(char *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char)(i * 13 + seed + (i >> 12));
}

FIXTURE_SETUP(dmabuf)
{
	self->ctx = open_dev();
	ASSERT_NE(NULL, self->ctx);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	ASSERT_EQ(0, loop_open(self->ctx, self->pd, &self->l));
	self->fd = udmabuf(LEN, &self->view);
	ASSERT_LE(0, self->fd) TH_LOG("udmabuf: %s", strerror(errno));
	self->buf = malloc(LEN);
	ASSERT_NE(NULL, self->buf);
	self->buf_mr = ibv_reg_mr(self->pd, self->buf, LEN, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, self->buf_mr);
	ASSERT_EQ(0, reg_dmabuf(self->pd, self->fd, 0, LEN, 0x10000000, REM, &self->mr));
}

FIXTURE_TEARDOWN(dmabuf)
{
	/* Process exit releases everything; leaks are checked by the suite. */
}

#define OP(op, laddr, len, lkey, raddr, rkey) \
	loop_op(&self->l, op, laddr, len, lkey, raddr, rkey)

TEST_F(dmabuf, write_read_and_atomic_through_the_exporters_pages)
{
	uint64_t *old = (uint64_t *)self->buf;

	pattern(self->buf, LEN, 1);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->buf, LEN, self->buf_mr->lkey,
				     0x10000000, self->mr.rkey));
	ASSERT_EQ(0, memcmp(self->buf, self->view, LEN));
	pattern(self->view, LEN, 2);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, self->buf, LEN, self->buf_mr->lkey,
				     0x10000000, self->mr.rkey));
	ASSERT_EQ(0, memcmp(self->buf, self->view, LEN));
	*(uint64_t *)(self->view + 4096) = 7;
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_ATOMIC_FETCH_AND_ADD, old, 8, self->buf_mr->lkey,
				     0x10000000 + 4096, self->mr.rkey));
	ASSERT_EQ(7, *old);
}

TEST_F(dmabuf, the_dmabuf_mr_as_local_buffer_of_send_and_recv)
{
	struct ibv_sge sge = { .addr = (uintptr_t)self->buf, .length = LEN,
			       .lkey = self->buf_mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1 }, *bad;
	struct ibv_wc wc;

	/* SEND from the dma-buf (lkey, iova) into a plain buffer. */
	pattern(self->view, LEN, 3);
	memset(self->buf, 0, LEN);
	ASSERT_EQ(0, ibv_post_recv(self->l.qp[1], &rwr, &bad));
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_SEND, (void *)0x10000000, LEN, self->mr.lkey, 0, 0));
	ASSERT_EQ(1, wait_wc(self->l.cq[1], &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(0, memcmp(self->buf, self->view, LEN));
}

TEST_F(dmabuf, an_offset_into_the_buffer)
{
	struct dmr part;

	/* The second half, not page aligned, at an iova with the same offset. */
	ASSERT_EQ(0, reg_dmabuf(self->pd, self->fd, LEN / 2 + 100, LEN / 4, 0x20000064,
				IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &part));
	pattern(self->buf, LEN / 4, 4);
	memset(self->view, 0, LEN);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->buf, LEN / 4, self->buf_mr->lkey,
				     0x20000064, part.rkey));
	ASSERT_EQ(0, memcmp(self->buf, self->view + LEN / 2 + 100, LEN / 4));
	ASSERT_EQ(0, self->view[LEN / 2 + 99]);
	/* One byte past its end: refused, nothing written. */
	ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, OP(IBV_WR_RDMA_WRITE, self->buf, 2, self->buf_mr->lkey,
					    0x20000064 + LEN / 4 - 1, part.rkey));
	ASSERT_EQ(0, self->view[LEN / 2 + 100 + LEN / 4]);
}

TEST_F(dmabuf, registration_errors)
{
	struct dmr x;
	int notbuf = memfd_create("plain", 0);

	ASSERT_LE(0, notbuf);
	/* Not a dma-buf, no file at all, past the end, an empty range. */
	ASSERT_EQ(-EINVAL, reg_dmabuf(self->pd, notbuf, 0, 4096, 0, REM, &x));
	ASSERT_EQ(-EBADF, reg_dmabuf(self->pd, 1000, 0, 4096, 0, REM, &x));
	ASSERT_EQ(-EINVAL, reg_dmabuf(self->pd, self->fd, LEN - 4096, 8192, 0, REM, &x));
	ASSERT_EQ(-EINVAL, reg_dmabuf(self->pd, self->fd, 0, 0, 0, REM, &x));
	/* Offset and iova must share their place in the page (the core's check). */
	ASSERT_EQ(-EINVAL, reg_dmabuf(self->pd, self->fd, 0, 4096, 100, REM, &x));
	/* Remote write without local write. */
	ASSERT_EQ(-EINVAL, reg_dmabuf(self->pd, self->fd, 0, 4096, 0,
				      IBV_ACCESS_REMOTE_WRITE, &x));
}

TEST_F(dmabuf, rights_and_dereg)
{
	struct dmr ro;

	ASSERT_EQ(0, reg_dmabuf(self->pd, self->fd, 0, LEN, 0, IBV_ACCESS_REMOTE_READ, &ro));
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, self->buf, 4096, self->buf_mr->lkey,
				     0, ro.rkey));
	ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, OP(IBV_WR_RDMA_WRITE, self->buf, 4096,
					    self->buf_mr->lkey, 0, ro.rkey));
	loop_close(&self->l);
	ASSERT_EQ(0, loop_open(self->ctx, self->pd, &self->l));
	/* After dereg its key is dead; the buffer lives on for its other users. */
	ASSERT_EQ(0, dereg(self->ctx, self->mr.handle));
	ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, OP(IBV_WR_RDMA_WRITE, self->buf, 4096,
					    self->buf_mr->lkey, 0x10000000, self->mr.rkey));
	/* The read-only MR still holds the buffer after its fd is closed. */
	loop_close(&self->l);
	ASSERT_EQ(0, loop_open(self->ctx, self->pd, &self->l));
	close(self->fd);
	pattern(self->view, 4096, 5);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, self->buf, 4096, self->buf_mr->lkey,
				     0, ro.rkey));
	ASSERT_EQ(0, memcmp(self->buf, self->view, 4096));
}

TEST_HARNESS_MAIN
