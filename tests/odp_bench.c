// SPDX-License-Identifier: GPL-2.0
/*
 * What on-demand paging costs the data path, on $OXE_DEV (oxe0 or rxe0):
 * a 4 KiB RDMA WRITE into each page of an ODP MR, first into pages never
 * touched (the responder faults each in) and then again into the same,
 * now present, pages; the same WRITEs into a pinned MR. Prints
 * "pt odp/first-touch <us> us" (the fault's share per page: first pass
 * minus second, per page), "pt odp/write-4k <us> us" and
 * "pt pinned/write-4k <us> us" (per WRITE, pages present).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <infiniband/verbs.h>

#include "oxe_test.h"

#define PAGES 4096
#define PAGE 4096

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* us per 4 KiB WRITE into each page of [dst, dst + PAGES pages); -1 on an error. */
static double pass(struct loop *l, char *src, uint32_t lkey, char *dst, uint32_t rkey)
{
	double t0 = now_us();

	for (int i = 0; i < PAGES; i++)
		if (loop_op(l, IBV_WR_RDMA_WRITE, src, PAGE, lkey, (uintptr_t)(dst + (size_t)i * PAGE),
			    rkey) != IBV_WC_SUCCESS)
			return -1;
	return (now_us() - t0) / PAGES;
}

int main(void)
{
	size_t len = (size_t)PAGES * PAGE;
	int rem = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	struct ibv_context *ctx = open_dev();
	struct ibv_mr *src_mr, *odp_mr, *pin_mr;
	double first, again, pinned;
	char *src, *odp, *pin;
	struct ibv_pd *pd;
	struct loop l;

	if (!ctx) {
		fprintf(stderr, "no device\n");
		return 1;
	}
	pd = ibv_alloc_pd(ctx);
	src = aligned_alloc(PAGE, PAGE);
	odp = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	pin = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!pd || !src || odp == MAP_FAILED || pin == MAP_FAILED ||
	    loop_open_timeout(ctx, pd, &l, 20)) {
		fprintf(stderr, "setup failed\n");
		return 1;
	}
	/* No THP: one fault per 4 KiB page, as the figure says. */
	madvise(odp, len, MADV_NOHUGEPAGE);
	memset(src, 0x5a, PAGE);
	src_mr = ibv_reg_mr(pd, src, PAGE, IBV_ACCESS_LOCAL_WRITE);
	odp_mr = ibv_reg_mr(pd, odp, len, rem | IBV_ACCESS_ON_DEMAND);
	pin_mr = ibv_reg_mr(pd, pin, len, rem);
	if (!src_mr || !odp_mr || !pin_mr) {
		fprintf(stderr, "reg_mr failed (ODP: %s)\n", odp_mr ? "yes" : "no");
		return 1;
	}
	first = pass(&l, src, src_mr->lkey, odp, odp_mr->rkey);
	again = pass(&l, src, src_mr->lkey, odp, odp_mr->rkey);
	pinned = pass(&l, src, src_mr->lkey, pin, pin_mr->rkey);
	if (first < 0 || again < 0 || pinned < 0) {
		fprintf(stderr, "a WRITE failed\n");
		return 1;
	}
	printf("pt odp/first-touch %.2f us\n", first - again);
	printf("pt odp/write-4k %.2f us\n", again);
	printf("pt pinned/write-4k %.2f us\n", pinned);
	ibv_dereg_mr(src_mr);
	ibv_dereg_mr(odp_mr);
	ibv_dereg_mr(pin_mr);
	loop_close(&l);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}
