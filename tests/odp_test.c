// SPDX-License-Identifier: GPL-2.0
/*
 * On-demand paging on one oxe device, through the stock libibverbs and
 * librxe: MRs registered with IBV_ACCESS_ON_DEMAND pin nothing, the data
 * path faults their pages in, and the MR follows the process's mapping:
 * every byte of WRITE, READ, SEND and the atomics checked (rdma_rxe's ODP
 * completed a 256 KiB WRITE with only its first packet placed), pages never
 * touched before, munmap and mprotect after registration (remote access
 * errors, not stale pages), a new mapping at the same address, fork's
 * copy-on-write, THP collapse and split and page migration under traffic,
 * advise_mr, implicit ODP, and the data path's errors. kselftest harness: KTAP
 * output, one forked child per case.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_ioctl_cmds.h>
#include <rdma/ib_user_ioctl_verbs.h>
#include <rdma/rdma_user_ioctl_cmds.h>

#include "kselftest_harness.h"
#include "oxe_test.h"

#define BUF (256 << 10)
#define ODP (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE)
#define REM (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

/* qp[0] of the loop is the requester, qp[1] the responder. */
FIXTURE(odp) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct loop l;
	char *src, *dst;
	struct ibv_mr *src_mr, *dst_mr;
	long pin0;
};

static char *anon(size_t len)
{
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void pattern(char *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char)(i * 7 + seed + (i >> 12));
}

FIXTURE_SETUP(odp)
{
	struct ibv_device_attr_ex attr = {};

	self->ctx = open_dev();
	ASSERT_NE(NULL, self->ctx);
	ASSERT_EQ(0, ibv_query_device_ex(self->ctx, NULL, &attr));
	ASSERT_TRUE(attr.odp_caps.general_caps & IBV_ODP_SUPPORT);
	ASSERT_TRUE(attr.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE);
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	/*
	 * The responder faults pages in where it stands, in its task (as
	 * rdma_rxe does), and answers nothing meanwhile: on a KASAN kernel a
	 * fault can outlast the requester's usual 8 x 67 ms of ACK timeouts
	 * (seen, RETRY_EXC_ERR: while the mm collapses, splits and compacts
	 * THPs; an implicit MR's 600th chunk). A NIC with ODP sends RNR NAKs
	 * while it faults; oxe does not yet. These QPs wait 8 x 4.3 s.
	 */
	ASSERT_EQ(0, loop_open_timeout(self->ctx, self->pd, &self->l, 20));
	self->pin0 = vmpin_kb();
	/* Never touched: no page behind either until the data path needs one. */
	self->src = anon(BUF);
	self->dst = anon(BUF);
	ASSERT_NE(NULL, self->src);
	ASSERT_NE(NULL, self->dst);
	self->src_mr = ibv_reg_mr(self->pd, self->src, BUF, ODP);
	self->dst_mr = ibv_reg_mr(self->pd, self->dst, BUF, ODP | REM);
	ASSERT_NE(NULL, self->src_mr);
	ASSERT_NE(NULL, self->dst_mr);
}

FIXTURE_TEARDOWN(odp)
{
	/* Process exit releases everything; leaks are checked by the suite. */
}

#define OP(op, laddr, len, lkey, raddr, rkey) \
	loop_op(&self->l, op, laddr, len, lkey, (uintptr_t)(raddr), rkey)

TEST_F(odp, write_read_send_of_every_byte_and_nothing_pinned)
{
	char *back = anon(BUF);
	struct ibv_mr *back_mr = ibv_reg_mr(self->pd, back, BUF, ODP);
	struct ibv_sge sge = { .addr = (uintptr_t)back, .length = BUF, .lkey = back_mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1 }, *bad;
	struct ibv_wc wc;

	ASSERT_NE(NULL, back_mr);
	pattern(self->src, BUF, 1);
	/* 256 KiB: 256 packets, each one's bytes where they belong. */
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->src, BUF, self->src_mr->lkey,
				     self->dst, self->dst_mr->rkey));
	ASSERT_EQ(0, memcmp(self->src, self->dst, BUF));
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, back, BUF, back_mr->lkey,
				     self->dst, self->dst_mr->rkey));
	ASSERT_EQ(0, memcmp(self->src, back, BUF));
	/* A SEND into an ODP receive buffer whose pages went away meanwhile. */
	ASSERT_EQ(0, madvise(back, BUF, MADV_DONTNEED));
	ASSERT_EQ(0, ibv_post_recv(self->l.qp[1], &rwr, &bad));
	pattern(self->src, BUF, 2);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_SEND, self->src, BUF, self->src_mr->lkey, 0, 0));
	ASSERT_EQ(1, wait_wc(self->l.cq[1], &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(BUF, wc.byte_len);
	ASSERT_EQ(0, memcmp(self->src, back, BUF));
	ASSERT_EQ(self->pin0, vmpin_kb());
}

TEST_F(odp, atomics_on_a_page_never_touched)
{
	uint64_t *old = (uint64_t *)self->src;
	uint64_t *word = (uint64_t *)(self->dst + BUF - 8);
	struct ibv_sge sge = { .addr = (uintptr_t)old, .length = 8, .lkey = self->src_mr->lkey };
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;

	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_ATOMIC_FETCH_AND_ADD, old, 8, self->src_mr->lkey,
				     word, self->dst_mr->rkey));
	ASSERT_EQ(0, *old);
	ASSERT_EQ(0, *word);	/* the add was 0 (librxe's compare_add) */
	wr.wr.atomic.remote_addr = (uintptr_t)word;
	wr.wr.atomic.rkey = self->dst_mr->rkey;
	wr.wr.atomic.compare_add = 0;
	wr.wr.atomic.swap = 0x1122334455667788ULL;
	ASSERT_EQ(0, ibv_post_send(self->l.qp[0], &wr, &bad));
	ASSERT_EQ(1, wait_wc(self->l.cq[0], &wc));
	ASSERT_EQ(IBV_WC_SUCCESS, wc.status);
	ASSERT_EQ(0, *old);
	ASSERT_EQ(0x1122334455667788ULL, *word);
}

TEST_F(odp, after_munmap_a_remote_write_is_a_remote_access_error)
{
	pattern(self->src, BUF, 3);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->src, 4096, self->src_mr->lkey,
				     self->dst, self->dst_mr->rkey));
	ASSERT_EQ(0, munmap(self->dst, BUF));
	ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, OP(IBV_WR_RDMA_WRITE, self->src, 4096,
					    self->src_mr->lkey, self->dst, self->dst_mr->rkey));
}

TEST_F(odp, a_local_sge_no_longer_mapped_is_a_local_protection_error)
{
	ASSERT_EQ(0, munmap(self->src, BUF));
	ASSERT_EQ(IBV_WC_LOC_PROT_ERR, OP(IBV_WR_RDMA_WRITE, self->src, 4096, self->src_mr->lkey,
					  self->dst, self->dst_mr->rkey));
}

TEST_F(odp, after_mprotect_read_only_a_write_fails_and_a_read_works)
{
	char *back = anon(4096);
	struct ibv_mr *back_mr = ibv_reg_mr(self->pd, back, 4096, ODP);

	ASSERT_NE(NULL, back_mr);
	pattern(self->dst, BUF, 4);
	ASSERT_EQ(0, mprotect(self->dst, BUF, PROT_READ));
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, back, 4096, back_mr->lkey,
				     self->dst + 8192, self->dst_mr->rkey));
	ASSERT_EQ(0, memcmp(back, self->dst + 8192, 4096));
	pattern(self->src, 4096, 5);
	ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, OP(IBV_WR_RDMA_WRITE, self->src, 4096,
					    self->src_mr->lkey, self->dst, self->dst_mr->rkey));
	pattern(back, 4096, 4);
	ASSERT_EQ(0, memcmp(back, self->dst, 4096));	/* untouched */
}

TEST_F(odp, a_new_mapping_at_the_same_address_is_what_the_mr_reaches)
{
	char *back = anon(4096);
	struct ibv_mr *back_mr = ibv_reg_mr(self->pd, back, 4096, ODP);

	ASSERT_NE(NULL, back_mr);
	pattern(self->dst, BUF, 6);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, back, 4096, back_mr->lkey,
				     self->dst, self->dst_mr->rkey));
	ASSERT_EQ(0, memcmp(back, self->dst, 4096));
	/* What realloc does when it moves a buffer: new pages at the address. */
	ASSERT_EQ(self->dst, mmap(self->dst, BUF, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0));
	pattern(self->dst, BUF, 7);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, back, 4096, back_mr->lkey,
				     self->dst, self->dst_mr->rkey));
	ASSERT_EQ(0, memcmp(back, self->dst, 4096));
	pattern(self->src, 4096, 8);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->src, 4096, self->src_mr->lkey,
				     self->dst + 4096, self->dst_mr->rkey));
	ASSERT_EQ(0, memcmp(self->src, self->dst + 4096, 4096));
}

TEST_F(odp, after_mremap_the_mr_reaches_the_buffer_moved_there)
{
	char *other = anon(BUF);

	ASSERT_NE(NULL, other);
	pattern(self->src, BUF, 13);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->src, BUF, self->src_mr->lkey,
				     self->dst, self->dst_mr->rkey));
	/* What realloc does with a large buffer: mremap another one there. */
	pattern(other, BUF, 14);
	ASSERT_EQ(self->dst, mremap(other, BUF, BUF, MREMAP_MAYMOVE | MREMAP_FIXED, self->dst));
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, self->src, BUF, self->src_mr->lkey,
				     self->dst, self->dst_mr->rkey));
	ASSERT_EQ(0, memcmp(self->src, self->dst, BUF));
	pattern(self->src, 4096, 15);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->src, 4096, self->src_mr->lkey,
				     self->dst + 8192, self->dst_mr->rkey));
	ASSERT_EQ(0, memcmp(self->src, self->dst + 8192, 4096));
}

TEST_F(odp, after_fork_writes_reach_the_parent_and_not_the_child)
{
	int pipefd[2];
	pid_t pid;
	char c;
	int st;

	pattern(self->dst, BUF, 9);
	ASSERT_EQ(0, pipe(pipefd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		char *want = anon(BUF);

		pattern(want, BUF, 9);
		/* Wait for the parent's WRITE, then check our copy kept its bytes. */
		if (read(pipefd[0], &c, 1) != 1)
			_exit(2);
		_exit(memcmp(want, self->dst, BUF) ? 1 : 0);
	}
	/* The parent writes its copy first (copy-on-write gives it new pages). */
	self->dst[0] ^= 1;
	pattern(self->src, BUF, 10);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->src, BUF, self->src_mr->lkey,
				     self->dst, self->dst_mr->rkey));
	ASSERT_EQ(0, memcmp(self->src, self->dst, BUF));
	ASSERT_EQ(1, write(pipefd[1], "x", 1));
	ASSERT_EQ(pid, waitpid(pid, &st, 0));
	ASSERT_TRUE(WIFEXITED(st));
	ASSERT_EQ(0, WEXITSTATUS(st));
}

TEST_F(odp, out_of_range_and_odp_rights_are_checked_as_for_pinned_mrs)
{
	struct ibv_mr *ro = ibv_reg_mr(self->pd, self->dst, 4096,
				       IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_READ);

	ASSERT_NE(NULL, ro);
	ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, OP(IBV_WR_RDMA_WRITE, self->src, 4096,
					    self->src_mr->lkey, self->dst, ro->rkey));
	loop_close(&self->l);
	ASSERT_EQ(0, loop_open_timeout(self->ctx, self->pd, &self->l, 20));
	ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, OP(IBV_WR_RDMA_WRITE, self->src, 4096,
					    self->src_mr->lkey, self->dst + BUF - 100,
					    self->dst_mr->rkey));
}

/*
 * The kernel reshapes and moves the pages under traffic: a thread collapses
 * the MR's range into huge pages (MADV_COLLAPSE), splits their mappings
 * again (a page of it mprotect-ed to RWX and back, which keeps it writable)
 * and has the kernel compact memory (migrating movable pages), while WRITEs
 * and READs run. Each invalidation makes the data path fault again; no byte
 * may come out wrong.
 */
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25	/* Linux 6.1; glibc 2.36 has no name for it */
#endif

struct reshaper {
	char *area;
	size_t len;
	volatile int stop;
	volatile int collapsed, split, compacted;
};

static void *reshape(void *arg)
{
	struct reshaper *r = arg;

	while (!r->stop) {
		int fd = open("/proc/sys/vm/compact_memory", O_WRONLY);

		if (!madvise(r->area, r->len, MADV_COLLAPSE))
			r->collapsed++;
		if (!mprotect(r->area + 4096, 4096, PROT_READ | PROT_WRITE | PROT_EXEC) &&
		    !mprotect(r->area + 4096, 4096, PROT_READ | PROT_WRITE))
			r->split++;
		if (fd >= 0) {
			if (write(fd, "1", 1) == 1)
				r->compacted++;
			close(fd);
		}
		usleep(5000);
	}
	return NULL;
}

TEST_F(odp, thp_collapse_split_and_migration_under_traffic)
{
	size_t len = 4UL << 20;
	char *raw = anon(len + (2UL << 20));
	char *area = (char *)(((uintptr_t)raw + (2UL << 20) - 1) & ~((2UL << 20) - 1));
	struct reshaper r = { .area = area, .len = len };
	struct ibv_mr *mr;
	pthread_t t;

	ASSERT_NE(NULL, raw);
	ASSERT_EQ(0, madvise(area, len, MADV_HUGEPAGE));
	memset(area, 0x5a, len);
	mr = ibv_reg_mr(self->pd, area, len, ODP | REM);
	ASSERT_NE(NULL, mr);
	ASSERT_EQ(0, pthread_create(&t, NULL, reshape, &r));
	/* Traffic starts once the reshaping has, so that they overlap. */
	for (int i = 0; i < 100000 && !r.split; i++)
		usleep(100);
	for (unsigned int i = 0; i < 60; i++) {
		size_t off = (i * 3 * 4096 + i * 8) % (len - BUF);

		pattern(self->src, BUF, 100 + i);
		ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->src, BUF, self->src_mr->lkey,
					     area + off, mr->rkey));
		ASSERT_EQ(0, memcmp(self->src, area + off, BUF));
		ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, self->dst, BUF, self->dst_mr->lkey,
					     area + off, mr->rkey));
		ASSERT_EQ(0, memcmp(self->src, self->dst, BUF));
	}
	r.stop = 1;
	pthread_join(t, NULL);
	TH_LOG("collapses %d, splits %d, compactions %d", r.collapsed, r.split, r.compacted);
	ASSERT_LT(0, r.split);
	ASSERT_LT(0, r.compacted);
	ASSERT_EQ(self->pin0, vmpin_kb());
}

/*
 * ibv_advise_mr's ADVISE_MR method, sent as the ioctl libibverbs would send:
 * librxe has no advise_mr, so ibv_advise_mr stops in user space. 0 or
 * -errno.
 */
static int advise(struct ibv_pd *pd, int advice, int flags, void *addr, uint32_t len,
		  uint32_t lkey)
{
	struct ib_uverbs_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct {
		struct ib_uverbs_ioctl_hdr hdr;
		struct ib_uverbs_attr attrs[4];
	} cmd = {
		.hdr = {
			.length = sizeof(cmd),
			.object_id = UVERBS_OBJECT_MR,
			.method_id = UVERBS_METHOD_ADVISE_MR,
			.num_attrs = 4,
			.driver_id = RDMA_DRIVER_RXE,
		},
		.attrs = {
			{ .attr_id = UVERBS_ATTR_ADVISE_MR_PD_HANDLE, .data = pd->handle },
			{ .attr_id = UVERBS_ATTR_ADVISE_MR_ADVICE, .len = 8, .data = advice },
			{ .attr_id = UVERBS_ATTR_ADVISE_MR_FLAGS, .len = 4, .data = flags },
			{ .attr_id = UVERBS_ATTR_ADVISE_MR_SGE_LIST, .len = sizeof(sge),
			  .data = (uintptr_t)&sge },
		},
	};

	return ioctl(pd->context->cmd_fd, RDMA_VERBS_IOCTL, &cmd) ? -errno : 0;
}

/* Pages of [p, p + len) resident in the process. */
static size_t resident(void *p, size_t len)
{
	size_t pages = (len + 4095) / 4096, n = 0;
	unsigned char *v = malloc(pages);

	if (!v || mincore(p, len, v)) {
		free(v);
		return (size_t)-1;
	}
	for (size_t i = 0; i < pages; i++)
		n += v[i] & 1;
	free(v);
	return n;
}

TEST_F(odp, advise_mr_prefetches_pages_in)
{
	const int flush = IB_UVERBS_ADVISE_MR_FLAG_FLUSH;

	ASSERT_EQ(0, resident(self->dst, BUF));
	/* NO_FAULT takes only what is there: nothing. */
	ASSERT_EQ(0, advise(self->pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, flush,
			    self->dst, BUF, self->dst_mr->lkey));
	ASSERT_EQ(0, resident(self->dst, BUF));
	ASSERT_EQ(0, advise(self->pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE, flush,
			    self->dst, BUF / 2, self->dst_mr->lkey));
	ASSERT_EQ(BUF / 2 / 4096, resident(self->dst, BUF));
	/* Without FLUSH the answer does not wait for the pages (oxe's does). */
	ASSERT_EQ(0, advise(self->pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH, 0,
			    self->dst + BUF / 2, BUF / 2, self->dst_mr->lkey));
	ASSERT_EQ(self->pin0, vmpin_kb());
	/* Prefetched pages are the process's: a WRITE lands in them. */
	pattern(self->src, BUF, 11);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->src, BUF, self->src_mr->lkey,
				     self->dst, self->dst_mr->rkey));
	ASSERT_EQ(0, memcmp(self->src, self->dst, BUF));
}

TEST_F(odp, advise_mr_errors)
{
	const int flush = IB_UVERBS_ADVISE_MR_FLAG_FLUSH;
	char *pinned = anon(4096);
	struct ibv_mr *pmr = ibv_reg_mr(self->pd, pinned, 4096, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_pd *pd2 = ibv_alloc_pd(self->ctx);

	ASSERT_NE(NULL, pmr);
	ASSERT_NE(NULL, pd2);
	/* Not an ODP MR, no MR at all, another PD's, past the MR's end. */
	ASSERT_EQ(-EINVAL, advise(self->pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH, flush,
				  pinned, 4096, pmr->lkey));
	ASSERT_EQ(-EINVAL, advise(self->pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH, flush,
				  self->dst, 4096, self->dst_mr->lkey ^ 0x80));
	ASSERT_EQ(-EINVAL, advise(pd2, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH, flush,
				  self->dst, 4096, self->dst_mr->lkey));
	ASSERT_EQ(-EINVAL, advise(self->pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH, flush,
				  self->dst + BUF - 4096, 8192, self->dst_mr->lkey));
	/* A write prefetch of an MR with no write right; a read one works. */
	struct ibv_mr *ro = ibv_reg_mr(self->pd, self->dst, BUF,
				       IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_READ);

	ASSERT_NE(NULL, ro);
	ASSERT_EQ(-EACCES, advise(self->pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE, flush,
				  self->dst, 4096, ro->lkey));
	ASSERT_EQ(0, advise(self->pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH, flush,
			    self->dst, 4096, ro->lkey));
	ASSERT_EQ(0, ibv_dereg_mr(ro));
	/* Memory gone: an error when asked to wait, silence otherwise. */
	ASSERT_EQ(0, munmap(self->dst, BUF));
	ASSERT_EQ(-EFAULT, advise(self->pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH, flush,
				  self->dst, 4096, self->dst_mr->lkey));
	ASSERT_EQ(0, advise(self->pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH, 0,
			    self->dst, 4096, self->dst_mr->lkey));
}

/* An implicit ODP MR of the fixture's PD: the whole address space. */
static struct ibv_mr *implicit(struct ibv_pd *pd)
{
	return ibv_reg_mr(pd, NULL, SIZE_MAX, ODP | REM);
}

TEST_F(odp, implicit_mr_reaches_every_buffer_by_its_address)
{
	struct ibv_device_attr_ex attr = {};
	struct ibv_mr *all;
	size_t len = 4UL << 20;
	/* Two buffers far apart; the second crosses 2 MiB chunk boundaries. */
	char *far = anon(len);
	uint64_t *word = (uint64_t *)self->src;

	ASSERT_EQ(0, ibv_query_device_ex(self->ctx, NULL, &attr));
	ASSERT_TRUE(attr.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT);
	ASSERT_NE(NULL, far);
	all = implicit(self->pd);
	ASSERT_NE(NULL, all);
	pattern(self->src, BUF, 12);
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->src, BUF, self->src_mr->lkey,
				     far + len / 2 - BUF / 2, all->rkey));
	ASSERT_EQ(0, memcmp(self->src, far + len / 2 - BUF / 2, BUF));
	/* The implicit MR as the local side too: READ into a pinned-free buffer. */
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, self->dst, BUF, all->lkey,
				     far + len / 2 - BUF / 2, all->rkey));
	ASSERT_EQ(0, memcmp(self->src, self->dst, BUF));
	*(uint64_t *)(far + len - 8) = 40;
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_ATOMIC_FETCH_AND_ADD, word, 8, all->lkey,
				     far + len - 8, all->rkey));
	ASSERT_EQ(40, *word);
	ASSERT_EQ(self->pin0, vmpin_kb());
	/* Memory gone: the implicit MR reaches nothing there. */
	ASSERT_EQ(0, munmap(far, len));
	ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, OP(IBV_WR_RDMA_WRITE, self->src, 4096, self->src_mr->lkey,
					    far, all->rkey));
}

TEST_F(odp, implicit_mr_over_more_chunks_than_it_keeps)
{
	/* 600 chunks of 2 MiB touched, more than the 512 an implicit MR keeps:
	 * the oldest go, and come back when touched again. */
	size_t chunk = 2UL << 20, n = 600, len = n * chunk;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	struct ibv_mr *all = implicit(self->pd);

	ASSERT_NE(MAP_FAILED, p);
	ASSERT_NE(NULL, all);
	for (size_t i = 0; i < n; i++) {
		*(uint64_t *)self->src = i + 1;
		ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_WRITE, self->src, 8, self->src_mr->lkey,
					     p + i * chunk + 64, all->rkey));
	}
	for (size_t i = 0; i < n; i++)
		ASSERT_EQ(i + 1, *(uint64_t *)(p + i * chunk + 64));
	ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, self->dst, 8, self->dst_mr->lkey,
				     p + 64, all->rkey));
	ASSERT_EQ(1, *(uint64_t *)self->dst);
	ASSERT_EQ(self->pin0, vmpin_kb());
}

TEST_F(odp, implicit_mr_advise_and_errors)
{
	struct ibv_mr *all = implicit(self->pd);
	char *q = anon(BUF);

	ASSERT_NE(NULL, all);
	ASSERT_NE(NULL, q);
	ASSERT_EQ(0, resident(q, BUF));
	ASSERT_EQ(0, advise(self->pd, IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE,
			    IB_UVERBS_ADVISE_MR_FLAG_FLUSH, q, BUF, all->lkey));
	ASSERT_EQ(BUF / 4096, resident(q, BUF));
	/* Only the whole address space at iova 0 is implicit. */
	errno = 0;
	ASSERT_EQ(NULL, ibv_reg_mr_iova2(self->pd, NULL, SIZE_MAX, 4096, ODP));
	ASSERT_EQ(EINVAL, errno);
	/* Kernel addresses are not the process's. */
	ASSERT_EQ(IBV_WC_REM_ACCESS_ERR, OP(IBV_WR_RDMA_WRITE, self->src, 8, self->src_mr->lkey,
					    0xffff888000000000UL, all->rkey));
}

/*
 * Reclaim while registered: a file's pages (a clean page cache can be
 * reclaimed without swap) mapped read-only and registered on demand, read
 * by RDMA, then paged out (MADV_PAGEOUT: the reclaim path, which unmaps
 * them and tells the MR's notifier); the next READs fault them back with
 * the file's bytes. OXE_ODP_FILE names the file (the suite passes the
 * guest kernel's vmlinux).
 */
TEST_F(odp, file_pages_reclaimed_while_registered_come_back_right)
{
	const char *path = getenv("OXE_ODP_FILE");
	size_t len = 16UL << 20, at;
	char *map, *want, *back;
	struct ibv_mr *mr, *back_mr;
	struct stat st;
	int fd;

	if (!path)
		SKIP(return, "OXE_ODP_FILE names no file to map");
	fd = open(path, O_RDONLY);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, fstat(fd, &st));
	if ((size_t)st.st_size < len)
		len = st.st_size & ~4095UL;
	ASSERT_LT(0, len);
	map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
	want = malloc(len);
	back = malloc(len);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_NE(NULL, want);
	ASSERT_NE(NULL, back);
	ASSERT_EQ((ssize_t)len, pread(fd, want, len, 0));
	mr = ibv_reg_mr(self->pd, map, len, IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_READ);
	back_mr = ibv_reg_mr(self->pd, back, len, ODP);
	ASSERT_NE(NULL, mr);
	ASSERT_NE(NULL, back_mr);
	for (int round = 0; round < 2; round++) {
		memset(back, 0, len);
		for (at = 0; at < len; at += 1 << 20)
			ASSERT_EQ(IBV_WC_SUCCESS, OP(IBV_WR_RDMA_READ, back + at, 1 << 20,
						     back_mr->lkey, map + at, mr->rkey));
		ASSERT_EQ(0, memcmp(want, back, len));
		ASSERT_EQ(len / 4096, resident(map, len));
		if (round == 0) {
			/* Reclaimed: most of the pages leave the page cache. */
			ASSERT_EQ(0, madvise(map, len, MADV_PAGEOUT));
			TH_LOG("resident after MADV_PAGEOUT: %zu of %zu pages",
			       resident(map, len), len / 4096);
			ASSERT_GT(len / 4096 / 2, resident(map, len));
		}
	}
	ASSERT_EQ(self->pin0, vmpin_kb());
}

/*
 * Memory pressure: a registered buffer twice its memory cgroup's limit
 * (OXE_MEMCG, set up by 26-odp.sh with swap on zram). Writing it pushes most
 * of its pages to swap while registered; RDMA READs fault them back with the
 * bytes written, and RDMA WRITEs over it land where the CPU then reads them.
 */
static long status_swap_kb(void)
{
	return status_kb("VmSwap");
}

/* Swap on TCG is slow (KASAN: several times more): a timeout of its own. */
TEST_F_TIMEOUT(odp, anonymous_pages_swapped_out_under_a_memcg_limit_come_back_right, 300)
{
	const char *cg = getenv("OXE_MEMCG");
	size_t len = 24UL << 20, chunk = 1UL << 20, at;
	char path[256], pid[32], *buf, *want, *io;
	struct ibv_mr *mr, *io_mr;
	struct loop l;
	long swapped;
	int fd;

	if (!cg)
		SKIP(return, "OXE_MEMCG names no memory cgroup (no swap in this guest)");
	/* Long ACK timeouts: the responder may wait on swap-ins. */
	ASSERT_EQ(0, loop_open_timeout(self->ctx, self->pd, &l, 20));
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	fd = open(path, O_WRONLY);
	ASSERT_LE(0, fd);
	snprintf(pid, sizeof(pid), "%d", getpid());
	ASSERT_LT(0, write(fd, pid, strlen(pid)));
	close(fd);
	buf = anon(len);
	want = anon(chunk);
	io = anon(chunk);
	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, want);
	ASSERT_NE(NULL, io);
	mr = ibv_reg_mr(self->pd, buf, len, ODP | REM);
	io_mr = ibv_reg_mr(self->pd, io, chunk, ODP);
	ASSERT_NE(NULL, mr);
	ASSERT_NE(NULL, io_mr);
	pattern(buf, len, 3);
	swapped = status_swap_kb();
	TH_LOG("swapped out after writing %zu MiB: %ld KiB", len >> 20, swapped);
	ASSERT_LT((long)(len >> 10) / 4, swapped);
	/* Faulted back by the responder, every byte as written. */
	for (at = 0; at < len; at += chunk) {
		memset(io, 0, chunk);
		ASSERT_EQ(IBV_WC_SUCCESS, loop_op(&l, IBV_WR_RDMA_READ, io, chunk, io_mr->lkey,
						  (uintptr_t)(buf + at), mr->rkey));
		for (size_t i = 0; i < chunk; i++)
			want[i] = (char)((at + i) * 7 + 3 + ((at + i) >> 12));
		ASSERT_EQ(0, memcmp(want, io, chunk));
	}
	/* Written over by the responder, pages coming and going meanwhile. */
	for (at = 0; at < len; at += chunk) {
		for (size_t i = 0; i < chunk; i++)
			io[i] = (char)((at + i) * 5 + 1);
		ASSERT_EQ(IBV_WC_SUCCESS, loop_op(&l, IBV_WR_RDMA_WRITE, io, chunk, io_mr->lkey,
						  (uintptr_t)(buf + at), mr->rkey));
	}
	for (at = 0; at < len; at++)
		if (buf[at] != (char)(at * 5 + 1))
			break;
	ASSERT_EQ(len, at);
	TH_LOG("swapped out at the end: %ld KiB", status_swap_kb());
	ASSERT_EQ(self->pin0, vmpin_kb());
}

/* Twice the guest's memory, registered on demand: nothing is touched. */
TEST(odp_registration_larger_than_memory_pins_nothing)
{
	struct ibv_context *ctx = open_dev();
	long total_kb = 0;
	char line[128];
	FILE *f = fopen("/proc/meminfo", "r");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %ld kB", &total_kb) == 1)
			break;
	if (f)
		fclose(f);
	ASSERT_LT(0, total_kb);

	size_t len = 2UL * total_kb * 1024;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	long pin0;
	char *p;

	ASSERT_NE(NULL, ctx);
	len = (len + (2UL << 20)) & ~((2UL << 20) - 1);
	pd = ibv_alloc_pd(ctx);
	ASSERT_NE(NULL, pd);
	pin0 = vmpin_kb();
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		 -1, 0);
	ASSERT_NE(MAP_FAILED, p);
	mr = ibv_reg_mr(pd, p, len, ODP | REM);
	ASSERT_NE(NULL, mr);
	ASSERT_EQ(pin0, vmpin_kb());
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	ASSERT_EQ(0, munmap(p, len));
}

TEST_HARNESS_MAIN
