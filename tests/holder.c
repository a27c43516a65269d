// SPDX-License-Identifier: GPL-2.0
/*
 * A process that holds an oxe device busy, for the stress tests:
 *   holder traffic SECONDS  - a 64 MiB MR and a QP looped back to itself,
 *                             posting RDMA WRITEs and polling, until the time
 *                             is up or the device goes away
 *   holder churn SECONDS    - creates and destroys CQs and QPs in a loop
 * Prints "ready" once set up, and at the end "done <operations> <errors>".
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

#define LEN (64 << 20)

static struct ibv_context *open_dev(void)
{
	const char *want = getenv("OXE_DEV") ? getenv("OXE_DEV") : "oxe0";
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), want))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	return ctx;
}

static int loop_qp(struct ibv_context *ctx, struct ibv_qp *qp)
{
	union ibv_gid gid;
	int gi = 0;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE };

	for (int i = 0; i < 16; i++)
		if (!ibv_query_gid(ctx, 1, i, &gid) && gid.raw[10] == 0xff) {
			gi = i;
			break;
		}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qp->qp_num;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = gi;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "traffic";
	int seconds = argc > 2 ? atoi(argv[2]) : 10;
	time_t end = time(NULL) + seconds;
	struct ibv_context *ctx = open_dev();
	struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	long ops = 0, errors = 0;

	if (!pd)
		return 1;
	if (!strcmp(mode, "churn")) {
		printf("ready\n");
		fflush(stdout);
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
				loop_qp(ctx, qp);
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

		if (!mr || !qp || loop_qp(ctx, qp))
			return 1;
		printf("ready\n");
		fflush(stdout);
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
					usleep(10000);
				} else {
					outstanding++;
				}
			}
			n = ibv_poll_cq(cq, 16, wc);
			for (int i = 0; i < n; i++)
				if (wc[i].status != IBV_WC_SUCCESS)
					errors++;
			if (n > 0) {
				outstanding -= n;
				ops += n;
			}
		}
	}
	printf("done %ld %ld\n", ops, errors);
	return 0;
}
