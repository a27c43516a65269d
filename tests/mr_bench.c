// SPDX-License-Identifier: GPL-2.0
/*
 * Registration benchmark: reg_mr + dereg_mr of 4 KiB .. 1 GiB buffers, backed
 * by 4 KiB pages and by THP, on $OXE_DEV (oxe0, or rxe0 in the reference
 * boot). With gup_test in debugfs it also times the floor: plain
 * pin_user_pages(FOLL_LONGTERM) + unpin of the same buffer, in the kernel.
 * Then the same sizes registered on demand (IBV_ACCESS_ON_DEMAND, 4 KiB
 * pages): nothing is pinned, so the cost should not grow with the size.
 *
 * Prints one line per case: "mr <backing> <bytes> <iters> <us/op> <floor us/op>".
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
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "mm/gup_test.h"
#include "oxe_test.h"

#define KiB 1024UL
#define MiB (1024 * KiB)

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of n values (sorts them). */
static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static char *buffer(size_t len, int thp)
{
	char *raw = mmap(NULL, len + 2 * MiB, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char *p;

	if (raw == MAP_FAILED)
		return NULL;
	p = (char *)(((uintptr_t)raw + 2 * MiB - 1) & ~(2 * MiB - 1));
	madvise(p, len, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
	memset(p, 1, len);
	return p;
}

int main(void)
{
	struct ibv_context *ctx = open_dev();
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	int gup = open("/sys/kernel/debug/gup_test", O_RDWR);
	size_t sizes[] = { 4 * KiB, 64 * KiB, 1 * MiB, 16 * MiB, 256 * MiB, 1024 * MiB };

	if (!ctx) {
		fprintf(stderr, "no device\n");
		return 1;
	}
	struct ibv_pd *pd = ibv_alloc_pd(ctx);

	/*
	 * The core's own share of a verb round trip: alloc_pd + dealloc_pd does
	 * the same uobject work as reg_mr + dereg_mr around a trivial driver op.
	 */
	{
		int iters = 2000;
		double t0 = now_us();

		for (int i = 0; i < iters; i++)
			ibv_dealloc_pd(ibv_alloc_pd(ctx));
		printf("pd - 0 %d %.2f -1\n", iters, (now_us() - t0) / iters);
	}

	/*
	 * The driver's share of a 4 KiB reg+dereg: the same round trip minus
	 * alloc_pd + dealloc_pd. Two figures measured seconds apart drift with
	 * the host by more than their difference, so blocks of each alternate
	 * here, each share is a reg block minus the pd block beside it, and the
	 * median of the shares is printed:
	 * "share 4096 <blocks> <reg us> <pd us> <share us>" (medians).
	 */
	{
		enum { BLOCKS = 31, OPS = 100 };
		double reg[BLOCKS], pdt[BLOCKS], share[BLOCKS];
		char *buf = buffer(4 * KiB, 0);

		if (!buf) {
			fprintf(stderr, "no memory for the share\n");
			return 1;
		}
		ibv_dereg_mr(ibv_reg_mr(pd, buf, 4 * KiB, access));
		for (int b = 0; b < BLOCKS; b++) {
			double t0 = now_us();

			for (int i = 0; i < OPS; i++)
				ibv_dealloc_pd(ibv_alloc_pd(ctx));
			pdt[b] = (now_us() - t0) / OPS;
			t0 = now_us();
			for (int i = 0; i < OPS; i++) {
				struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4 * KiB, access);

				if (!mr) {
					fprintf(stderr, "reg_mr 4096: %s\n", strerror(errno));
					return 1;
				}
				ibv_dereg_mr(mr);
			}
			reg[b] = (now_us() - t0) / OPS;
			share[b] = reg[b] - pdt[b];
		}
		printf("share 4096 %d %.2f %.2f %.2f\n", BLOCKS, median(reg, BLOCKS),
		       median(pdt, BLOCKS), median(share, BLOCKS));
		munmap(buf, 4 * KiB);
	}

	/* thp: 0 4 KiB pages, 1 THP, 2 ODP (4 KiB pages, registered on demand). */
	for (int thp = 0; thp <= 2; thp++) {
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t len = sizes[s];
			/* About 256 MiB of registrations per case, 3..2000 operations. */
			int iters = 256 * MiB / len;
			char *buf;
			double t0, reg_us, floor_us = -1;

			if (iters > 2000)
				iters = 2000;
			if (iters < 3)
				iters = 3;
			int acc = thp == 2 ? access | IBV_ACCESS_ON_DEMAND : access;

			if (thp == 1 && len < 2 * MiB)
				continue;
			buf = buffer(len, thp == 1);
			if (!buf) {
				fprintf(stderr, "no memory for %zu bytes\n", len);
				return 1;
			}
			/* Warm up: first registration faults in page tables. */
			ibv_dereg_mr(ibv_reg_mr(pd, buf, len, acc));
			t0 = now_us();
			for (int i = 0; i < iters; i++) {
				struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, acc);

				if (!mr) {
					fprintf(stderr, "reg_mr %zu: %s\n", len, strerror(errno));
					return 1;
				}
				ibv_dereg_mr(mr);
			}
			reg_us = (now_us() - t0) / iters;
			if (gup >= 0 && thp < 2) {
				struct gup_test g = {
					.addr = (uintptr_t)buf, .size = len,
					.nr_pages_per_call = 512, .gup_flags = 1 /* FOLL_WRITE */,
				};

				t0 = now_us();
				for (int i = 0; i < iters; i++)
					if (ioctl(gup, PIN_LONGTERM_BENCHMARK, &g)) {
						perror("gup_test");
						break;
					}
				floor_us = (now_us() - t0) / iters;
			}
			printf("mr %s %zu %d %.2f %.2f\n", thp == 2 ? "odp" : thp ? "thp" : "4k", len,
			       iters, reg_us, floor_us);
			fflush(stdout);
			munmap(buf, len);
		}
	}
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
