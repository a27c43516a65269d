// SPDX-License-Identifier: GPL-2.0
/*
 * Memory registration on an oxe device, through the stock libibverbs and
 * librxe, with the kernel's kselftest harness (KTAP output, one forked child
 * per case). Every case ends with the process's VmPin back at zero.
 *
 * Usage: mr_test [harness options]; the device is $OXE_DEV (default oxe0).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <linux/capability.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "kselftest_harness.h"
#include "oxe_test.h"

#define KiB 1024UL
#define MiB (1024 * KiB)
#define GiB (1024 * MiB)
#define PAGE 4096UL

#define ACC_ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static long vmpin_pages(void)
{
	return vmpin_kb() * KiB / PAGE;
}

static long vmstat(const char *name)
{
	char key[64];
	long v, found = -1;
	FILE *f = fopen("/proc/vmstat", "r");

	if (!f)
		return -1;
	while (fscanf(f, "%63s %ld", key, &v) == 2)
		if (!strcmp(key, name))
			found = v;
	fclose(f);
	return found;
}

/* Pages pinned system-wide right now (9p pins a few while it reads files). */
static long global_pins(void)
{
	return vmstat("nr_foll_pin_acquired") - vmstat("nr_foll_pin_released");
}

/* oxe's own view of an MR, from `rdma -dd res show mr`. */
static int mr_res(uint32_t lkey, long *pages, long *entries)
{
	char match[32];

	snprintf(match, sizeof(match), "lkey 0x%x ", lkey);
	*pages = res_attr("mr", match, "pages_pinned");
	*entries = res_attr("mr", match, "mtt_entries");
	return *pages < 0 || *entries < 0 ? -1 : 0;
}

/* MRs that `rdma res show mr` lists. */
static int count_mrs(void)
{
	char line[1024];
	int n = 0;
	FILE *p = popen("rdma res show mr 2>/dev/null", "r");

	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		n += strstr(line, "lkey ") != NULL;
	pclose(p);
	return n;
}

static void *map(size_t len, int prot, int flags)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* A 2 MiB-aligned, THP-backed anonymous area of @len bytes, touched. */
static void *map_thp(size_t len)
{
	char *raw = map(len + 2 * MiB, PROT_READ | PROT_WRITE, 0);
	char *p;

	if (!raw)
		return NULL;
	p = (char *)(((uintptr_t)raw + 2 * MiB - 1) & ~(2 * MiB - 1));
	madvise(p, len, MADV_HUGEPAGE);
	memset(p, 1, len);
	return p;
}

static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	return syscall(SYS_capset, &h, d);
}

FIXTURE(mr) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
};

FIXTURE_SETUP(mr)
{
	self->ctx = open_dev();
	ASSERT_NE(NULL, self->ctx) TH_LOG("no device %s", getenv("OXE_DEV") ?: "oxe0");
	self->pd = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	ASSERT_EQ(0, vmpin_pages());
}

FIXTURE_TEARDOWN(mr)
{
	if (self->pd)
		ibv_dealloc_pd(self->pd);
	if (self->ctx)
		ibv_close_device(self->ctx);
	/* Whatever the case did, nothing stays pinned. */
	EXPECT_EQ(0, vmpin_pages());
}

TEST_F(mr, reg_dereg_pins_and_unpins)
{
	size_t len = 1 * MiB;
	char *buf = map(len, PROT_READ | PROT_WRITE, 0);
	struct ibv_mr *mr;
	long pages, entries;

	ASSERT_NE(NULL, buf);
	mr = ibv_reg_mr(self->pd, buf, len, ACC_ALL);
	ASSERT_NE(NULL, mr) TH_LOG("reg_mr: %s", strerror(errno));
	EXPECT_EQ(mr->lkey, mr->rkey);
	EXPECT_NE(0, mr->lkey >> 8);
	EXPECT_EQ(len / PAGE, vmpin_pages());
	ASSERT_EQ(0, mr_res(mr->lkey, &pages, &entries));
	EXPECT_EQ(len / PAGE, pages);
	EXPECT_GE(entries, 1);
	EXPECT_LE(entries, len / PAGE);
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	EXPECT_EQ(0, vmpin_pages());
}

TEST_F(mr, read_only_mr_of_read_only_mapping)
{
	char *buf = map(64 * KiB, PROT_READ, MAP_POPULATE);
	struct ibv_mr *mr;

	ASSERT_NE(NULL, buf);
	mr = ibv_reg_mr(self->pd, buf, 64 * KiB, IBV_ACCESS_REMOTE_READ);
	ASSERT_NE(NULL, mr) TH_LOG("reg_mr: %s", strerror(errno));
	EXPECT_EQ(16, vmpin_pages());
	ASSERT_EQ(0, ibv_dereg_mr(mr));
}

/* The pool pattern: one 64 MiB registration, sub-buffers under its keys. */
TEST_F(mr, pool_64mib_one_registration)
{
	size_t len = 64 * MiB;
	char *buf = map(len, PROT_READ | PROT_WRITE, 0);
	struct ibv_mr *mr;
	long pages, entries;

	ASSERT_NE(NULL, buf);
	memset(buf, 0, len);
	mr = ibv_reg_mr(self->pd, buf, len, ACC_ALL | IBV_ACCESS_RELAXED_ORDERING);
	ASSERT_NE(NULL, mr) TH_LOG("reg_mr: %s", strerror(errno));
	EXPECT_EQ(len / PAGE, vmpin_pages());
	ASSERT_EQ(0, mr_res(mr->lkey, &pages, &entries));
	EXPECT_EQ(len / PAGE, pages);
	TH_LOG("64 MiB of 4 KiB pages: %ld MTT entries", entries);
	/* Sub-buffers are addressed as mr->addr + offset under the same keys. */
	EXPECT_EQ(buf, mr->addr);
	EXPECT_EQ(len, mr->length);
	ASSERT_EQ(0, ibv_dereg_mr(mr));
}

TEST_F(mr, unaligned_buffer)
{
	char *raw = map(4 * PAGE, PROT_READ | PROT_WRITE, MAP_POPULATE);
	struct ibv_mr *mr;

	ASSERT_NE(NULL, raw);
	/* 4100 bytes starting 3 bytes before a page boundary: 3 pages. */
	mr = ibv_reg_mr(self->pd, raw + PAGE - 3, PAGE + 4, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, mr) TH_LOG("reg_mr: %s", strerror(errno));
	EXPECT_EQ(3, vmpin_pages());
	EXPECT_EQ(raw + PAGE - 3, mr->addr);
	ASSERT_EQ(0, ibv_dereg_mr(mr));
}

TEST_F(mr, iova_other_than_address)
{
	char *buf = map(8 * PAGE, PROT_READ | PROT_WRITE, MAP_POPULATE);
	struct ibv_mr *mr;

	ASSERT_NE(NULL, buf);
	mr = ibv_reg_mr_iova2(self->pd, buf + 100, 5 * PAGE, 0x7000000000ULL + 100, ACC_ALL);
	ASSERT_NE(NULL, mr) TH_LOG("reg_mr_iova2: %s", strerror(errno));
	EXPECT_EQ(6, vmpin_pages());
	ASSERT_EQ(0, ibv_dereg_mr(mr));
}

/* The offset of the first byte of @p[0..n) that is not @c, or -1. */
static long differs(const char *p, int c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (char)c)
			return i;
	return -1;
}

/*
 * realloc() after registration: the MR keeps the pages it pinned; it does
 * not follow the address it was given. Checked through the MR itself, with
 * RDMA READ and WRITE at its iova (the buffer's old address) from a
 * connected QP pair.
 *
 * glibc serves a 256 KiB malloc() above the (fixed) 128 KiB mmap threshold
 * as a mapping of its own, and realloc() moves that mapping with mremap():
 * the pinned pages themselves move to the new address and the old range is
 * left unmapped. Other pages (0xcc) are then mapped at the old address, and
 * the moved buffer is overwritten (0xbb): READ through the MR must return
 * 0xbb, the pinned pages, and a WRITE through the MR must land in them and
 * leave the old address's new pages alone. A driver that translated the
 * iova through the process's page tables at access time would read 0xcc
 * (or fail); one that lost its pages when they moved would fail.
 */
TEST_F(mr, realloc_keeps_the_old_pages)
{
	size_t len = 256 * KiB, span;
	char *buf, *moved, *start, *guard, *there, *dst;
	struct ibv_mr *mr, *dmr;
	struct loop l = {};
	long pinned, at;

	ASSERT_EQ(1, mallopt(M_MMAP_THRESHOLD, 128 * KiB));
	buf = malloc(len);
	ASSERT_NE(NULL, buf);
	memset(buf, 0xaa, len);
	/* The pages that hold buf[0..len); the MR pins them. */
	start = (char *)((uintptr_t)buf & ~(PAGE - 1));
	span = (((uintptr_t)buf + len + PAGE - 1) & ~(PAGE - 1)) - (uintptr_t)start;
	/* Something right after them, so that realloc() cannot grow in place. */
	guard = mmap(start + span, PAGE, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (guard == MAP_FAILED)
		guard = NULL; /* EEXIST: something is there already */
	dst = map(len, PROT_READ | PROT_WRITE, MAP_POPULATE);
	ASSERT_NE(NULL, dst);
	mr = ibv_reg_mr(self->pd, buf, len, ACC_ALL);
	ASSERT_NE(NULL, mr) TH_LOG("reg_mr: %s", strerror(errno));
	dmr = ibv_reg_mr(self->pd, dst, len, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, dmr) TH_LOG("reg_mr: %s", strerror(errno));
	ASSERT_EQ(0, loop_open(self->ctx, self->pd, &l));
	/* Before the move the READ sees the buffer. */
	ASSERT_EQ(IBV_WC_SUCCESS, loop_op(&l, IBV_WR_RDMA_READ, dst, len, dmr->lkey,
					  (uintptr_t)buf, mr->rkey));
	ASSERT_EQ(-1, differs(dst, 0xaa, len));
	pinned = vmpin_pages();

	uintptr_t old = (uintptr_t)buf;

	moved = realloc(buf, 64 * MiB);
	ASSERT_NE(NULL, moved);
	ASSERT_NE(old, (uintptr_t)moved) TH_LOG("realloc did not move the buffer");
	/* The old range was vacated; other pages take the old address. */
	there = mmap(start, span, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	ASSERT_EQ(start, there) TH_LOG("old range still mapped: %s", strerror(errno));
	memset(there, 0xcc, span);
	memset(moved, 0xbb, len);
	/* The old buffer is gone from its address, yet its pages stay pinned. */
	EXPECT_EQ(pinned, vmpin_pages());

	memset(dst, 0, len);
	EXPECT_EQ(IBV_WC_SUCCESS, loop_op(&l, IBV_WR_RDMA_READ, dst, len, dmr->lkey, old,
					  mr->rkey));
	at = differs(dst, 0xbb, len);
	EXPECT_EQ(-1, at) TH_LOG("READ through the MR: 0x%02x at offset %ld, not the pinned "
				 "pages' 0xbb", dst[at] & 0xff, at);

	memset(dst, 0xdd, len);
	EXPECT_EQ(IBV_WC_SUCCESS, loop_op(&l, IBV_WR_RDMA_WRITE, dst, len, dmr->lkey, old,
					  mr->rkey));
	EXPECT_EQ(-1, differs(moved, 0xdd, len)) TH_LOG("WRITE did not reach the pinned pages");
	EXPECT_EQ(-1, differs(there, 0xcc, span)) TH_LOG("WRITE went to the old address");

	loop_close(&l);
	ASSERT_EQ(0, ibv_dereg_mr(dmr));
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	munmap(there, span);
	if (guard)
		munmap(guard, PAGE);
	munmap(dst, len);
	free(moved);
}

struct bad_case {
	const char *what;
	uintptr_t addr;
	size_t len;
	uint64_t iova;
	unsigned int access;
	int err;
};

TEST_F(mr, bad_input_errnos)
{
	char *buf = map(16 * PAGE, PROT_READ | PROT_WRITE, MAP_POPULATE);
	char *none = map(4 * PAGE, PROT_NONE, 0);
	char *ro = map(4 * PAGE, PROT_READ, MAP_POPULATE);
	char *gone = map(4 * PAGE, PROT_READ | PROT_WRITE, 0);

	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, none);
	ASSERT_NE(NULL, ro);
	ASSERT_NE(NULL, gone);
	munmap(gone, 4 * PAGE);

	struct bad_case cases[] = {
		{ "remote write without local write", (uintptr_t)buf, PAGE, (uintptr_t)buf,
		  IBV_ACCESS_REMOTE_WRITE, EINVAL },
		{ "remote atomic without local write", (uintptr_t)buf, PAGE, (uintptr_t)buf,
		  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_REMOTE_READ, EINVAL },
		{ "unknown access bit", (uintptr_t)buf, PAGE, (uintptr_t)buf, 1u << 12, EINVAL },
		/*
		 * IB_ACCESS_FLUSH_PERSISTENT (libibverbs v44 has no name for
		 * it): no guest page is persistent memory, so the device does
		 * not offer it (FLUSH_GLOBAL is offered: dp.flush).
		 */
		{ "FLUSH_PERSISTENT is not offered", (uintptr_t)buf, PAGE, (uintptr_t)buf,
		  (1u << 9) | IBV_ACCESS_LOCAL_WRITE, EOPNOTSUPP },
		{ "zero length", (uintptr_t)buf, 0, (uintptr_t)buf, 0, EINVAL },
		{ "start + length past the top of u64", UINTPTR_MAX - PAGE + 1, 2 * PAGE,
		  UINTPTR_MAX - PAGE + 1, 0, EINVAL },
		{ "iova + length past the top of u64", (uintptr_t)buf, 2 * PAGE,
		  UINT64_MAX - PAGE + 1, IBV_ACCESS_LOCAL_WRITE, EINVAL },
		{ "unmapped range", (uintptr_t)gone, 4 * PAGE, (uintptr_t)gone, 0, EFAULT },
		{ "PROT_NONE range", (uintptr_t)none, 4 * PAGE, (uintptr_t)none, 0, EFAULT },
		{ "write access to a read-only mapping", (uintptr_t)ro, 4 * PAGE, (uintptr_t)ro,
		  IBV_ACCESS_LOCAL_WRITE, EFAULT },
		{ "range running off the end of a mapping", (uintptr_t)buf + 12 * PAGE, 8 * PAGE,
		  (uintptr_t)buf + 12 * PAGE, IBV_ACCESS_LOCAL_WRITE, EFAULT },
		{ "kernel address", 0xffff888000000000UL, PAGE, 0xffff888000000000UL, 0, EFAULT },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct bad_case *c = &cases[i];
		struct ibv_mr *mr;

		errno = 0;
		mr = ibv_reg_mr_iova2(self->pd, (void *)c->addr, c->len, c->iova, c->access);
		EXPECT_EQ(NULL, mr) TH_LOG("%s: registered", c->what);
		EXPECT_EQ(c->err, errno) TH_LOG("%s: errno %d (%s), expected %d", c->what,
						errno, strerror(errno), c->err);
		if (mr)
			ibv_dereg_mr(mr);
		EXPECT_EQ(0, vmpin_pages()) TH_LOG("%s: pages left pinned", c->what);
	}
}

TEST_F(mr, over_memlock_limit_is_enomem)
{
	size_t len = 2 * MiB;
	char *buf = map(len, PROT_READ | PROT_WRITE, MAP_POPULATE);
	struct rlimit rl = { 1 * MiB, 1 * MiB };
	struct ibv_mr *mr;

	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, drop_ipc_lock());
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &rl));
	mr = ibv_reg_mr(self->pd, buf, 512 * KiB, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, mr) TH_LOG("under the limit: %s", strerror(errno));
	errno = 0;
	EXPECT_EQ(NULL, ibv_reg_mr(self->pd, buf + 512 * KiB, 1 * MiB, IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(128, vmpin_pages());
	ASSERT_EQ(0, ibv_dereg_mr(mr));
}

static void huge_case(struct __test_metadata *_metadata, struct ibv_pd *pd, char *buf,
		      size_t len, const char *kind)
{
	struct timespec t0, t1;
	struct ibv_mr *mr;
	long pages, entries;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	mr = ibv_reg_mr(pd, buf, len, ACC_ALL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ASSERT_NE(NULL, mr) TH_LOG("reg_mr: %s", strerror(errno));
	EXPECT_EQ(len / PAGE, vmpin_pages());
	ASSERT_EQ(0, mr_res(mr->lkey, &pages, &entries));
	EXPECT_EQ(len / PAGE, pages);
	/* At most one entry per 2 MiB page (fewer where they are adjacent). */
	EXPECT_LE(entries, len / (2 * MiB));
	TH_LOG("%s: %zu MiB in %ld MTT entries (flat: %zu), reg %.1f ms", kind, len / MiB,
	       entries, len / PAGE,
	       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
	ASSERT_EQ(0, ibv_dereg_mr(mr));
}

TEST_F_TIMEOUT(mr, thp_1gib_compresses, 600)
{
	size_t len = 1 * GiB;
	char *buf = map_thp(len);
	long thp_kb;

	ASSERT_NE(NULL, buf);
	thp_kb = status_kb("RssAnon");
	TH_LOG("RssAnon %ld kB", thp_kb);
	huge_case(_metadata, self->pd, buf, len, "THP");
	munmap(buf, len);
}

TEST_F_TIMEOUT(mr, hugetlbfs_1gib_compresses, 600)
{
	size_t len = 1 * GiB;
	char *buf = map(len, PROT_READ | PROT_WRITE, MAP_HUGETLB | MAP_POPULATE);

	if (!buf)
		SKIP(return, "no 2 MiB hugetlb pages reserved (vm.nr_hugepages): %s",
		     strerror(errno));
	huge_case(_metadata, self->pd, buf, len, "hugetlbfs");
	munmap(buf, len);
}

/*
 * 100k MRs of 256 bytes, 16 to a page ($OXE_MANY_MRS overrides the count:
 * 20-mr asks for 20k on KASAN, where each registration costs ~0.5 ms; the
 * key table's xarray has the same depth at both counts).
 */
TEST_F_TIMEOUT(mr, many_small_mrs_100k, 900)
{
	const int n = getenv("OXE_MANY_MRS") ? atoi(getenv("OXE_MANY_MRS")) : 100000;
	char *buf = map((n + 15) / 16 * PAGE, PROT_READ | PROT_WRITE, MAP_POPULATE);
	struct ibv_mr **mrs = calloc(n, sizeof(*mrs));
	int ok = 1;

	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, mrs);
	/* 16 MRs share each page: pins are counted per MR. */
	for (int i = 0; i < n && ok; i++) {
		mrs[i] = ibv_reg_mr(self->pd, buf + (i / 16) * PAGE + (i % 16) * 256, 256,
				    IBV_ACCESS_LOCAL_WRITE);
		ok = mrs[i] != NULL;
		if (!ok)
			TH_LOG("MR %d: %s", i, strerror(errno));
	}
	EXPECT_EQ(1, ok);
	if (ok)
		EXPECT_EQ(n, vmpin_pages());
	/* Keys are distinct. */
	for (int i = 1; i < n && ok; i++)
		if (mrs[i]->lkey == mrs[i - 1]->lkey)
			ok = 0;
	EXPECT_EQ(1, ok);
	for (int i = 0; i < n; i++)
		if (mrs[i])
			EXPECT_EQ(0, ibv_dereg_mr(mrs[i]));
	free(mrs);
}

/* XArray nodes in use, once freed ones are back in their slabs. */
static long xa_nodes(void)
{
	char name[64], line[512];
	long active = -1, v;
	ssize_t w;
	FILE *f;
	int fd;

	/* Freed nodes wait out an RCU grace period, then sit in per-CPU caches
	 * (and KASAN's quarantine) until the cache is shrunk. */
	usleep(200 * 1000);
	fd = open("/sys/kernel/slab/radix_tree_node/shrink", O_WRONLY);
	if (fd >= 0) {
		/* Best effort: unshrunk, the count only reads higher. */
		w = write(fd, "1", 1);
		(void)w;
		close(fd);
	}
	f = fopen("/proc/slabinfo", "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%63s %ld", name, &v) == 2 && !strcmp(name, "radix_tree_node"))
			active = v;
	fclose(f);
	return active;
}

/*
 * Deregistration leaves nothing of a key behind. Freed slots of the key
 * table's XArray once kept their last tag, so every index ever handed out
 * kept its place: a node per 64 registrations, never freed until the
 * device went (72 MB after 2^23 registrations). $OXE_CHURN registrations
 * (20-mr asks for fewer on KASAN) must leave the XArray's node count where
 * it was, give or take a quarter of what keeping them would cost.
 */
TEST_F_TIMEOUT(mr, churn_leaves_no_key_behind, 600)
{
	const long n = getenv("OXE_CHURN") ? atol(getenv("OXE_CHURN")) : 131072;
	char *buf = map(PAGE, PROT_READ | PROT_WRITE, MAP_POPULATE);
	long before, after = -1;

	ASSERT_NE(NULL, buf);
	before = xa_nodes();
	if (before < 0)
		SKIP(return, "no radix_tree_node in /proc/slabinfo");
	for (long i = 0; i < n; i++) {
		struct ibv_mr *mr = ibv_reg_mr(self->pd, buf, PAGE, IBV_ACCESS_LOCAL_WRITE);

		ASSERT_NE(NULL, mr) TH_LOG("registration %ld: %s", i, strerror(errno));
		ASSERT_EQ(0, ibv_dereg_mr(mr));
	}
	/* RCU may take a while to free the last ones. */
	for (int tries = 0; tries < 25; tries++) {
		after = xa_nodes();
		if (after - before < n / 256)
			break;
		usleep(200000);
	}
	TH_LOG("%ld registrations: XArray nodes %ld -> %ld (a kept slot per key: +%ld or more)",
	       n, before, after, n / 64);
	EXPECT_LT(after - before, n / 256);
	munmap(buf, PAGE);
}

/*
 * Keys are index << 8 | tag, and only the whole key opens an MR: a key kept
 * after deregistration must not open the index's next tenant. oxe hands
 * MR indices out cyclically over 2^23 - 1 slots (the other half is the
 * memory windows'), so an index comes back only
 * after that many registrations (mr.reused_index_gets_a_new_tag runs on a
 * table of 100 slots, rdma_oxe mr_keys=100); on a full-size table, what a
 * run's budget can check is that keys do not repeat and
 * that a live MR's index under any other tag (what a stale key of a former
 * tenant looks like) is refused, as an rkey and as an lkey, with the memory
 * untouched. A lookup by index alone would accept it.
 */
static uint32_t forged(uint32_t key, int d)
{
	return (key & ~0xffu) | ((key + d) & 0xffu);
}

TEST_F(mr, keys_never_repeat_and_other_tags_are_refused)
{
	char *buf = map(2 * PAGE, PROT_READ | PROT_WRITE, MAP_POPULATE);
	char *src = buf + PAGE;
	uint32_t *keys = calloc(2000, sizeof(*keys));
	const int tags[] = { 1, -1, 0x80 };
	struct ibv_mr *mr, *smr;
	struct loop l;

	ASSERT_NE(NULL, buf);
	ASSERT_NE(NULL, keys);
	for (int i = 0; i < 2000; i++) {
		mr = ibv_reg_mr(self->pd, buf, PAGE, 0);
		ASSERT_NE(NULL, mr);
		keys[i] = mr->lkey;
		ASSERT_EQ(0, ibv_dereg_mr(mr));
	}
	for (int i = 0; i < 2000; i++)
		for (int j = i + 1; j < 2000; j++)
			ASSERT_NE(keys[i], keys[j]);
	free(keys);

	mr = ibv_reg_mr(self->pd, buf, PAGE, ACC_ALL);
	ASSERT_NE(NULL, mr);
	smr = ibv_reg_mr(self->pd, src, PAGE, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, smr);
	memset(src, 'f', PAGE);
	/* The true keys work (the QPs are fine). */
	ASSERT_EQ(0, loop_open(self->ctx, self->pd, &l));
	EXPECT_EQ(IBV_WC_SUCCESS, loop_op(&l, IBV_WR_RDMA_WRITE, src, 64, smr->lkey,
					  (uintptr_t)buf, mr->rkey));
	EXPECT_EQ('f', buf[63]);
	loop_close(&l);
	memset(buf, 0, PAGE);
	/* Each refusal puts the QP in error: a fresh pair for each. */
	for (int i = 0; i < 3; i++) {
		uint32_t rkey = forged(mr->rkey, tags[i]), lkey = forged(smr->lkey, tags[i]);

		ASSERT_EQ(0, loop_open(self->ctx, self->pd, &l));
		EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
			  loop_op(&l, IBV_WR_RDMA_WRITE, src, 64, smr->lkey, (uintptr_t)buf, rkey))
			TH_LOG("rkey 0x%x of live MR 0x%x", rkey, mr->rkey);
		loop_close(&l);
		ASSERT_EQ(0, loop_open(self->ctx, self->pd, &l));
		EXPECT_EQ(IBV_WC_LOC_PROT_ERR,
			  loop_op(&l, IBV_WR_RDMA_WRITE, src, 64, lkey, (uintptr_t)buf, mr->rkey))
			TH_LOG("lkey 0x%x of live MR 0x%x", lkey, smr->lkey);
		loop_close(&l);
		EXPECT_EQ(-1, differs(buf, 0, PAGE)) TH_LOG("tag %+d wrote the MR", tags[i]);
	}
	ASSERT_EQ(0, ibv_dereg_mr(smr));
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	munmap(buf, 2 * PAGE);
}

/*
 * The device's MR key slots: max_mr, which oxe sets to the size of its key
 * table when the module parameter mr_keys makes it small (20-mr runs the
 * cases below so, with 100 slots).
 */
#define SMALL_KEY_TABLE 4096
static int key_slots(struct ibv_context *ctx)
{
	struct ibv_device_attr a;

	return ibv_query_device(ctx, &a) ? -1 : a.max_mr;
}

/*
 * An index that comes back comes back under a new tag, and its former
 * tenant's key (kept after deregistration) is refused while the new key
 * works. Cycling through every MR index takes 2^23 - 1 registrations (about
 * 3 minutes on the plain guest at ~20 us each, far longer on KASAN), so the
 * case runs on a small key table (rdma_oxe mr_keys=100, as 20-mr does), or
 * with OXE_KEY_WRAP=1 on a full one. It ends as soon as the index is back.
 */
TEST_F_TIMEOUT(mr, reused_index_gets_a_new_tag, 7200)
{
	char *buf = map(2 * PAGE, PROT_READ | PROT_WRITE, MAP_POPULATE);
	char *src = buf + PAGE;
	struct ibv_mr *mr, *smr;
	uint32_t stale;
	long n = 0;
	struct loop l;

	if (!getenv("OXE_KEY_WRAP") && key_slots(self->ctx) > SMALL_KEY_TABLE)
		SKIP(return, "2^23 registrations: load rdma_oxe with mr_keys=100, or set OXE_KEY_WRAP=1");
	ASSERT_NE(NULL, buf);
	smr = ibv_reg_mr(self->pd, src, PAGE, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, smr);
	mr = ibv_reg_mr(self->pd, buf, PAGE, ACC_ALL);
	ASSERT_NE(NULL, mr);
	stale = mr->rkey;
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	for (mr = NULL; n < (1L << 23) + 16; n++) {
		mr = ibv_reg_mr(self->pd, buf, PAGE, ACC_ALL);
		ASSERT_NE(NULL, mr) TH_LOG("registration %ld: %s", n, strerror(errno));
		if (mr->rkey >> 8 == stale >> 8)
			break;
		ASSERT_EQ(0, ibv_dereg_mr(mr));
		mr = NULL;
	}
	ASSERT_NE(NULL, mr) TH_LOG("index 0x%x did not come back in %ld registrations",
				   stale >> 8, n);
	TH_LOG("index 0x%x back after %ld registrations: key 0x%x, was 0x%x", stale >> 8, n,
	       mr->rkey, stale);
	EXPECT_NE(stale, mr->rkey);

	memset(buf, 0, PAGE);
	memset(src, 's', PAGE);
	ASSERT_EQ(0, loop_open(self->ctx, self->pd, &l));
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR,
		  loop_op(&l, IBV_WR_RDMA_WRITE, src, 64, smr->lkey, (uintptr_t)buf, stale));
	loop_close(&l);
	EXPECT_EQ(-1, differs(buf, 0, PAGE)) TH_LOG("the stale key wrote the new tenant");
	ASSERT_EQ(0, loop_open(self->ctx, self->pd, &l));
	EXPECT_EQ(IBV_WC_SUCCESS,
		  loop_op(&l, IBV_WR_RDMA_WRITE, src, 64, smr->lkey, (uintptr_t)buf, mr->rkey));
	loop_close(&l);
	EXPECT_EQ('s', buf[63]);
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	ASSERT_EQ(0, ibv_dereg_mr(smr));
	munmap(buf, 2 * PAGE);
}

/*
 * A full key table: the registration past the last slot fails with ENOSPC
 * and leaves nothing behind (each round fills as many slots as the first); a slot freed anywhere is found again (the
 * allocator goes around, and sweeps the freed slots it keeps near its
 * cursor); rounds of filling and emptying the table keep working, each
 * key new. With 2^23 - 1 slots, only on a small table (mr_keys).
 */
TEST_F(mr, a_full_key_table_says_enospc)
{
	char *buf = map(PAGE, PROT_READ | PROT_WRITE, MAP_POPULATE);
	int slots = key_slots(self->ctx), n = 0, avail = 0;
	struct ibv_mr **mrs;
	uint32_t freed;

	if (slots > SMALL_KEY_TABLE)
		SKIP(return, "a full table is 2^23 - 1 MRs: load rdma_oxe with mr_keys=100");
	ASSERT_NE(NULL, buf);
	ASSERT_LT(0, slots);
	mrs = calloc(slots + 1, sizeof(*mrs));
	ASSERT_NE(NULL, mrs);
	for (int round = 0; round < 3; round++) {
		for (n = 0; n <= slots; n++) {
			mrs[n] = ibv_reg_mr(self->pd, buf, PAGE, IBV_ACCESS_REMOTE_READ);
			if (!mrs[n])
				break;
		}
		/* The kernel's own MRs (the MAD layer's PD) hold a few. */
		if (!round)
			avail = n;
		ASSERT_LT(0, n);
		ASSERT_GE(slots, n);
		ASSERT_EQ(avail, n) TH_LOG("round %d: %d of %d slots", round, n, slots);
		EXPECT_EQ(ENOSPC, errno) TH_LOG("round %d: %s", round, strerror(errno));
		/* Keys are unique among the live MRs. */
		for (int i = 0; i < n; i++)
			for (int j = i + 1; j < n; j++)
				ASSERT_NE(mrs[i]->rkey, mrs[j]->rkey);
		/* A slot freed in the middle is the one taken next, under a new key. */
		freed = mrs[n / 2]->rkey;
		ASSERT_EQ(0, ibv_dereg_mr(mrs[n / 2]));
		mrs[n / 2] = ibv_reg_mr(self->pd, buf, PAGE, IBV_ACCESS_REMOTE_READ);
		ASSERT_NE(NULL, mrs[n / 2]) TH_LOG("round %d: %s", round, strerror(errno));
		EXPECT_EQ(freed >> 8, mrs[n / 2]->rkey >> 8);
		EXPECT_NE(freed, mrs[n / 2]->rkey);
		EXPECT_EQ(NULL, ibv_reg_mr(self->pd, buf, PAGE, 0));
		for (int i = 0; i < n; i++)
			ASSERT_EQ(0, ibv_dereg_mr(mrs[i]));
	}
	free(mrs);
	munmap(buf, PAGE);
}

struct churn {
	struct ibv_pd *pd;
	char *buf;
	int seconds;
	long regs, fails;
	unsigned int seed;
};

static void *churn_thread(void *arg)
{
	struct churn *c = arg;
	time_t end = time(NULL) + c->seconds;
	struct ibv_mr *held[8] = {};

	while (time(NULL) < end) {
		int slot = rand_r(&c->seed) % 8;
		size_t pages = 1 + rand_r(&c->seed) % 64;
		size_t off = (rand_r(&c->seed) % 64) * PAGE + rand_r(&c->seed) % 100;

		if (held[slot]) {
			if (ibv_dereg_mr(held[slot]))
				c->fails++;
			held[slot] = NULL;
		} else {
			held[slot] = ibv_reg_mr(c->pd, c->buf + off, pages * PAGE, ACC_ALL);
			if (held[slot])
				c->regs++;
			else
				c->fails++;
		}
	}
	for (int i = 0; i < 8; i++)
		if (held[i] && ibv_dereg_mr(held[i]))
			c->fails++;
	return NULL;
}

TEST_F_TIMEOUT(mr, eight_threads_reg_dereg, 120)
{
	char *buf = map(129 * PAGE, PROT_READ | PROT_WRITE, MAP_POPULATE);
	struct churn c[8];
	pthread_t t[8];
	long regs = 0, fails = 0;

	ASSERT_NE(NULL, buf);
	for (int i = 0; i < 8; i++) {
		c[i] = (struct churn){ .pd = self->pd, .buf = buf, .seconds = 3, .seed = i + 1 };
		ASSERT_EQ(0, pthread_create(&t[i], NULL, churn_thread, &c[i]));
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		regs += c[i].regs;
		fails += c[i].fails;
	}
	TH_LOG("%ld registrations by 8 threads in 3 s", regs);
	EXPECT_EQ(0, fails);
	EXPECT_LT(0, regs);
}

/* Processes that never deregister: exit and kill -9 release every pin. */
static void exit_case(struct __test_metadata *_metadata, int nmrs, int kill9)
{
	long before = global_pins();
	int pfd[2];
	pid_t pid;
	char c;

	ASSERT_EQ(0, pipe(pfd));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		struct ibv_context *ctx = open_dev();
		struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
		char *buf = map(nmrs * PAGE, PROT_READ | PROT_WRITE, MAP_POPULATE);
		int n = 0;

		for (int i = 0; pd && buf && i < nmrs; i++)
			n += ibv_reg_mr(pd, buf + i * PAGE, PAGE, ACC_ALL) != NULL;
		c = n == nmrs && vmpin_pages() == nmrs ? 'y' : 'n';
		if (write(pfd[1], &c, 1) != 1)
			_exit(2);
		if (kill9)
			pause();
		_exit(0); /* no dereg, no close */
	}
	close(pfd[1]);
	ASSERT_EQ(1, read(pfd[0], &c, 1));
	EXPECT_EQ('y', c);
	if (kill9)
		kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	/* The 9p root pins and unpins a few pages on its own: allow that noise. */
	long after = global_pins();
	EXPECT_LT(after - before, 64) TH_LOG("pins before %ld after %ld", before, after);
	EXPECT_EQ(0, count_mrs());
}

TEST_F(mr, exit_without_dereg_releases_pins)
{
	exit_case(_metadata, 100, 0);
}

TEST_F_TIMEOUT(mr, kill9_with_1000_mrs_releases_pins, 300)
{
	exit_case(_metadata, 1000, 1);
}

TEST_HARNESS_MAIN
