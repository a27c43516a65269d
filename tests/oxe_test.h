/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Helpers shared by oxe's in-guest test programs: open the device under test
 * ($OXE_DEV, default oxe0), read the process's pinned memory, connect an RC
 * QP to a destination QP on the same device, a connected pair of them, and
 * post one WR and wait for its completion.
 */
#ifndef OXE_TEST_H
#define OXE_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/rdma_user_rxe.h>

static inline struct ibv_context *open_dev(void)
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

/* A field of /proc/self/status, in kB (-1 if absent). */
static inline long status_kb(const char *field)
{
	char line[256];
	size_t n = strlen(field);
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, n) && line[n] == ':')
			v = strtol(line + n + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

static inline long vmpin_kb(void)
{
	return status_kb("VmPin");
}

/* The GID index of the port's IPv4 address (RoCE v2), as perftest picks it. */
static inline int gid_index(struct ibv_context *ctx)
{
	union ibv_gid gid;

	for (int i = 0; i < 16; i++)
		if (!ibv_query_gid(ctx, 1, i, &gid) && gid.raw[10] == 0xff && gid.raw[11] == 0xff)
			return i;
	return 0;
}

/*
 * RESET -> INIT -> RTR towards QP @dest of this device, MTU 1024, PSN 100;
 * an RC QP (@rc) also gets its responder's read depth (@dest_rd) and RNR
 * timer.
 */
static inline int connect_to_rtr_rd(struct ibv_context *ctx, struct ibv_qp *qp, uint32_t dest,
				    int access, int rc, int dest_rd)
{
	int gi = gid_index(ctx);
	union ibv_gid gid;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = access,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	ibv_query_gid(ctx, 1, gi, &gid);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = dest_rd;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = gi;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     (rc ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0));
}

static inline int connect_to_rtr(struct ibv_context *ctx, struct ibv_qp *qp, uint32_t dest,
				 int access, int rc)
{
	return connect_to_rtr_rd(ctx, qp, dest, access, rc, 16);
}

/*
 * RESET -> INIT -> RTR -> RTS towards QP @dest of this device, MTU 1024, with
 * the requester's ACK timeout (4.096 us << @timeout) and @retry_cnt.
 */
static inline int connect_rc_timeout(struct ibv_context *ctx, struct ibv_qp *qp, uint32_t dest,
				     int access, int rnr_retry, int timeout, int retry_cnt)
{
	struct ibv_qp_attr a = {};

	if (connect_to_rtr(ctx, qp, dest, access, 1))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = rnr_retry;
	a.sq_psn = 100;
	a.max_rd_atomic = 16;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* A UC QP: as connect_rc_timeout, with nothing of RC's reliability. */
static inline int connect_uc(struct ibv_context *ctx, struct ibv_qp *qp, uint32_t dest,
			     int access)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTS, .sq_psn = 100 };

	if (connect_to_rtr(ctx, qp, dest, access, 0))
		return -1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* As connect_rc_timeout, with the usual timeout 14 (67 ms) and 7 retries. */
static inline int connect_rc(struct ibv_context *ctx, struct ibv_qp *qp, uint32_t dest,
			     int access, int rnr_retry)
{
	return connect_rc_timeout(ctx, qp, dest, access, rnr_retry, 14, 7);
}

/*
 * Points a connected QP at another peer (RESET, then connect_rc): an RC
 * responder answers its connected QP only, so a test that sends to an
 * existing QP from a new one must reconnect it to the new one first.
 */
static inline int reconnect_rc(struct ibv_context *ctx, struct ibv_qp *qp, uint32_t dest,
			       int access, int rnr_retry)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	return connect_rc(ctx, qp, dest, access, rnr_retry);
}

/* A counter of port 1 of the test's device (hw_counters), -1 if unreadable. */
static inline long port_counter(struct ibv_context *ctx, const char *name)
{
	char path[256];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s",
		 ibv_get_device_name(ctx->device), name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fscanf(f, "%ld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/*
 * Driver attribute @name (printed `drv_@name`) of the line of
 * `rdma -dd res show @obj` that contains @match, or -1 if there is none.
 */
static inline long res_attr(const char *obj, const char *match, const char *name)
{
	char cmd[64], line[2048], attr[64];
	long v = -1;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "rdma -dd res show %s 2>/dev/null", obj);
	snprintf(attr, sizeof(attr), " drv_%s ", name);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p)) {
		char *a = strstr(line, attr);

		if (strstr(line, match) && a)
			v = strtol(a + strlen(attr), NULL, 10);
	}
	pclose(p);
	return v;
}

/* Driver attribute @name of QP @qpn of the test's device (fill_res_qp_entry). */
static inline long qp_res(struct ibv_context *ctx, uint32_t qpn, const char *name)
{
	char match[64];

	snprintf(match, sizeof(match), "link %s/1 lqpn %u ", ibv_get_device_name(ctx->device),
		 qpn);
	return res_attr("qp", match, name);
}

/* QP @qpn's counter @name once it reached @want (bounded, 10 s): the
 * receiver's task takes a packet after the sender's completion. */
static inline long qp_res_reaches(struct ibv_context *ctx, uint32_t qpn, const char *name,
				  long want)
{
	long v = qp_res(ctx, qpn, name);

	for (int i = 0; i < 200 && v < want; i++) {
		usleep(50000);
		v = qp_res(ctx, qpn, name);
	}
	return v;
}

/* Lines of `rdma -dd res show @obj` that contain both @a and @b. */
static inline int res_lines(const char *obj, const char *a, const char *b)
{
	char cmd[64], line[2048];
	int n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "rdma -dd res show %s 2>/dev/null", obj);
	p = popen(cmd, "r");
	if (!p)
		return -1;
	while (fgets(line, sizeof(line), p))
		n += strstr(line, a) && strstr(line, b);
	pclose(p);
	return n;
}

/* Waits for one completion on @cq (bounded). */
static inline int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (int i = 0; i < 2000000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
		if (i > 1000)
			usleep(10);
	}
	return 0;
}

/* Posts one signaled WR of @op with one SGE. */
static inline int post(struct ibv_qp *qp, enum ibv_wr_opcode op, void *laddr, uint32_t len,
		       uint32_t lkey, uint64_t raddr, uint32_t rkey, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD || op == IBV_WR_ATOMIC_CMP_AND_SWP) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
	} else if (op == IBV_WR_SEND_WITH_INV) {
		wr.invalidate_rkey = rkey;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/*
 * Two RC QPs of @pd, each with a CQ of its own, connected to each other
 * (qp[0] -> qp[1] and back) with every remote right and ACK timeout
 * @timeout (4.096 us << @timeout, 7 retries, RNR retries forever). loop_close() takes down
 * what loop_open() made, also after a failure half way.
 */
struct loop {
	struct ibv_cq *cq[2];
	struct ibv_qp *qp[2];
};

static inline void loop_close(struct loop *l)
{
	for (int i = 0; i < 2; i++)
		if (l->qp[i])
			ibv_destroy_qp(l->qp[i]);
	for (int i = 0; i < 2; i++)
		if (l->cq[i])
			ibv_destroy_cq(l->cq[i]);
	memset(l, 0, sizeof(*l));
}

static inline int loop_open_timeout(struct ibv_context *ctx, struct ibv_pd *pd, struct loop *l,
				    int timeout)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		     IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

	memset(l, 0, sizeof(*l));
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr qia = {
			.qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};

		l->cq[i] = ibv_create_cq(ctx, 64, NULL, NULL, 0);
		if (!l->cq[i])
			return -1;
		qia.send_cq = qia.recv_cq = l->cq[i];
		l->qp[i] = ibv_create_qp(pd, &qia);
		if (!l->qp[i])
			return -1;
	}
	if (connect_rc_timeout(ctx, l->qp[0], l->qp[1]->qp_num, access, 7, timeout, 7) ||
	    connect_rc_timeout(ctx, l->qp[1], l->qp[0]->qp_num, access, 7, timeout, 7))
		return -1;
	return 0;
}

/* loop_open_timeout with the usual ACK timeout (14: 67 ms). */
static inline int loop_open(struct ibv_context *ctx, struct ibv_pd *pd, struct loop *l)
{
	return loop_open_timeout(ctx, pd, l, 14);
}

/*
 * One signaled WR of @op on qp[0] of @l; returns its completion status, or
 * -1 if it could not be posted or never completed.
 */
static inline int loop_op(struct loop *l, enum ibv_wr_opcode op, void *laddr, uint32_t len,
			  uint32_t lkey, uint64_t raddr, uint32_t rkey)
{
	struct ibv_wc wc;

	if (post(l->qp[0], op, laddr, len, lkey, raddr, rkey, 1))
		return -1;
	if (wait_wc(l->cq[0], &wc) != 1)
		return -1;
	return wc.status;
}

/*
 * REREG_MR sent as a uverbs command: librxe has no rereg_mr, so
 * ibv_rereg_mr stops in user space. 0 or -errno; the new rkey in *rkey.
 */
static inline int rereg(struct ibv_mr *mr, int flags, struct ibv_pd *pd, int access, uint32_t *rkey)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_rereg_mr cmd;
	} req = {
		.hdr = { .command = IB_USER_VERBS_CMD_REREG_MR, .in_words = sizeof(req) / 4,
			 .out_words = sizeof(struct ib_uverbs_rereg_mr_resp) / 4 },
	};
	struct ib_uverbs_rereg_mr_resp resp = {};

	req.cmd.response = (uintptr_t)&resp;
	req.cmd.mr_handle = mr->handle;
	req.cmd.flags = flags;
	req.cmd.start = (uintptr_t)mr->addr;
	req.cmd.length = mr->length;
	req.cmd.hca_va = (uintptr_t)mr->addr;
	req.cmd.pd_handle = pd ? pd->handle : 0;
	req.cmd.access_flags = access;
	if (write(mr->context->cmd_fd, &req, sizeof(req)) != sizeof(req))
		return -errno;
	if (rkey)
		*rkey = resp.rkey;
	return 0;
}

/* FLUSH (IBA 1.5): the kernel's uapi values, newer than Debian's headers. */
#define UAPI_DEVICE_FLUSH_GLOBAL (1ULL << 38)
#define UAPI_DEVICE_FLUSH_PERSISTENT (1ULL << 39)
#define UAPI_ACCESS_FLUSH_GLOBAL (1 << 8)
#define UAPI_ACCESS_FLUSH_PERSISTENT (1 << 9)
#define UAPI_WR_FLUSH 14
#define UAPI_WC_FLUSH 8
#define FLUSH_TYPE_GLOBAL 1
#define FLUSH_TYPE_PERSISTENT 2
#define FLUSH_LEVEL_RANGE 0
#define FLUSH_LEVEL_MR 1

/*
 * librxe v44 has no ibv_wr_flush (rdma-core v45 added it). Its other wr_*
 * builders write a WQE at the SQ ring's cur_index and ibv_wr_complete()
 * publishes them and rings the doorbell: a FLUSH WQE is written the same
 * way, as rdma-core v46's wr_flush writes it, through librxe's private QP
 * layout (providers/rxe/rxe.h of v44), checked against the ring before
 * use. The WQE is rxe's user ABI from the kernel's rdma_user_rxe.h (its
 * `flush` member is newer than Debian's copy of the header: offsets).
 */
struct librxe_wq {
	struct rxe_queue_buf *queue;
	pthread_spinlock_t lock;
	unsigned int max_sge;
	unsigned int max_inline;
};

struct librxe_qp {
	struct {
		union {
			struct ibv_qp qp;
			struct ibv_qp_ex qp_ex;
		};
		uint32_t comp_mask;
		void *xrcd;
	} vqp;
	struct mminfo rq_mmap_info;
	struct librxe_wq rq;
	struct mminfo sq_mmap_info;
	struct librxe_wq sq;
	unsigned int ssn;
	uint32_t cur_index;
	int err;
};

/*
 * Between ibv_wr_start and ibv_wr_complete, after other wr_* or none; -1 if
 * the layout is not v44's or the SQ is full.
 */
static inline int librxe_wr_flush(struct ibv_qp_ex *qpx, uint32_t rkey, uint64_t addr,
				  uint32_t len, uint8_t type, uint8_t level)
{
	struct librxe_qp *q = (struct librxe_qp *)qpx;
	struct rxe_queue_buf *ring = q->sq.queue;
	struct rxe_send_wqe *wqe;
	uint8_t *f;

	if (!ring || (1u << ring->log2_elem_size) < sizeof(*wqe) ||
	    sizeof(*ring) + (((size_t)ring->index_mask + 1) << ring->log2_elem_size) >
	    q->sq_mmap_info.size ||
	    q->cur_index > ring->index_mask)
		return -1;
	/* Full: librxe's own builders fail the batch the same way. */
	if (((q->cur_index + 1 - __atomic_load_n(&ring->consumer_index, __ATOMIC_ACQUIRE)) &
	     ring->index_mask) == 0)
		return -1;
	wqe = (void *)(ring->data + ((q->cur_index & ring->index_mask) << ring->log2_elem_size));
	memset(wqe, 0, sizeof(*wqe));
	wqe->wr.wr_id = qpx->wr_id;
	wqe->wr.opcode = UAPI_WR_FLUSH;
	wqe->wr.send_flags = qpx->wr_flags;
	/* As rdma-core v46's wr_flush: the length in dma, not in wr.flush. */
	f = (uint8_t *)&wqe->wr.wr;
	memcpy(f, &addr, 8);
	memcpy(f + 12, &rkey, 4);
	f[16] = type;
	f[17] = level;
	wqe->dma.length = len;
	wqe->dma.resid = len;
	wqe->iova = addr;
	wqe->ssn = q->ssn++;
	q->cur_index = (q->cur_index + 1) & ring->index_mask;
	return 0;
}

#endif
