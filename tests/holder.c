// SPDX-License-Identifier: GPL-2.0
/*
 * A process that holds an oxe device busy, for the stress tests:
 *   holder traffic SECONDS  - a 64 MiB MR and a QP looped back to itself,
 *                             posting RDMA WRITEs and polling, until the time
 *                             is up or the device goes away
 *   holder churn SECONDS    - creates and destroys CQs and QPs in a loop
 * Prints "ready" once set up, and at the end "done <operations> <errors>".
 * traffic also says, before that, what its errors were:
 *   "errors post <P> first <S> then <T>"
 * P: posts refused; S: the status of the first completion that failed
 * ("none", "retry_exc", "flush", or "status<N>"); T: completions after it
 * other than IBV_WC_WR_FLUSH_ERR. Which errors a scenario may see is the
 * test's to say (tests/guest/60-stress.sh).
 * Exits 0 unless setup failed: losing the device half way (rmmod, link
 * delete) is what the tests do to it.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "oxe_test.h"

#define LEN (64 << 20)

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "traffic";
	int seconds = argc > 2 ? atoi(argv[2]) : 10;
	time_t end = time(NULL) + seconds;
	struct ibv_context *ctx = open_dev();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	long ops = 0, errors = 0, post_errors = 0, then = 0;
	int first = -1;

	if (!pd)
		return 1;
	if (!strcmp(mode, "churn")) {
		printf("ready\n");
		fflush(stdout);
		/* Its SECONDS from here: setting up took a while on KASAN. */
		end = time(NULL) + seconds;
		while (time(NULL) < end) {
			struct ibv_cq *cq = ibv_create_cq(ctx, 1 + rand() % 256, NULL, NULL, 0);
			struct ibv_qp_init_attr qia = {
				.qp_type = IBV_QPT_RC,
				.cap = { .max_send_wr = 1 + rand() % 128, .max_recv_wr = 1 + rand() % 128,
					 .max_send_sge = 1 + rand() % 4, .max_recv_sge = 1 },
			};
			struct ibv_qp *qp;

			if (!cq) {
				errors++;
				usleep(1000);
				continue;
			}
			qia.send_cq = qia.recv_cq = cq;
			qp = ibv_create_qp(pd, &qia);
			if (qp && rand() % 2)
				connect_rc(ctx, qp, qp->qp_num, IBV_ACCESS_REMOTE_WRITE, 7);
			if (!qp || ibv_destroy_qp(qp))
				errors++;
			if (ibv_destroy_cq(cq))
				errors++;
			ops++;
		}
	} else {
		char *buf = mmap(NULL, LEN, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		struct ibv_mr *mr = ibv_reg_mr(pd, buf, LEN, IBV_ACCESS_LOCAL_WRITE |
					       IBV_ACCESS_REMOTE_WRITE);
		struct ibv_cq *cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
		struct ibv_qp_init_attr qia = {
			.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};
		struct ibv_qp *qp = cq ? ibv_create_qp(pd, &qia) : NULL;
		int outstanding = 0;

		if (!mr || !qp || connect_rc(ctx, qp, qp->qp_num, IBV_ACCESS_REMOTE_WRITE, 7))
			return 1;
		printf("ready\n");
		fflush(stdout);
		/* Its SECONDS from here: setting up took a while on KASAN. */
		end = time(NULL) + seconds;
		while (time(NULL) < end) {
			struct ibv_wc wc[16];
			struct ibv_sge sge = { (uintptr_t)buf, 1 << 20, mr->lkey };
			struct ibv_send_wr wr = {
				.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
				.send_flags = IBV_SEND_SIGNALED,
			}, *bad;
			int n;

			wr.wr.rdma.remote_addr = (uintptr_t)buf + (32 << 20);
			wr.wr.rdma.rkey = mr->rkey;
			if (outstanding < 32) {
				if (ibv_post_send(qp, &wr, &bad)) {
					errors++;
					post_errors++;
					usleep(10000);
				} else {
					outstanding++;
				}
			}
			n = ibv_poll_cq(cq, 16, wc);
			for (int i = 0; i < n; i++) {
				if (first >= 0 && wc[i].status != IBV_WC_WR_FLUSH_ERR)
					then++;
				if (wc[i].status == IBV_WC_SUCCESS)
					continue;
				errors++;
				if (first < 0)
					first = wc[i].status;
			}
			if (n > 0) {
				outstanding -= n;
				ops += n;
			}
		}
		printf("errors post %ld first ", post_errors);
		if (first < 0)
			printf("none");
		else if (first == IBV_WC_RETRY_EXC_ERR)
			printf("retry_exc");
		else if (first == IBV_WC_WR_FLUSH_ERR)
			printf("flush");
		else
			printf("status%d", first);
		printf(" then %ld\n", then);
	}
	printf("done %ld %ld\n", ops, errors);
	return 0;
}
