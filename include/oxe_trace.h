/* SPDX-License-Identifier: GPL-2.0 */
/*
 * oxe's tracepoints (events/oxe in tracefs; perf and trace-cmd list them as
 * oxe:*). Rust reaches them through the oxe_trace_*() wrappers of
 * oxe_trace.c: each is an ordinary call, then the tracepoint's static key,
 * and every event is on a slow path (registration, a state change, a
 * retransmit, a drop, an error completion).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM oxe

#if !defined(_OXE_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _OXE_TRACE_H

#include <linux/tracepoint.h>
#include <rdma/ib_cm.h>
#include <trace/misc/rdma.h>

#define OXE_QP_STATES				\
	{ 0, "RESET" }, { 1, "INIT" }, { 2, "RTR" },	\
	{ 3, "RTS" }, { 4, "SQD" }, { 5, "SQE" }, { 6, "ERR" }

TRACE_EVENT(oxe_mr_reg,
	TP_PROTO(u32 lkey, u32 rkey, u64 iova, u64 length, u32 access, u64 pinned,
		 const char *kind),
	TP_ARGS(lkey, rkey, iova, length, access, pinned, kind),
	TP_STRUCT__entry(
		__field(u32, lkey)
		__field(u32, rkey)
		__field(u64, iova)
		__field(u64, length)
		__field(u32, access)
		__field(u64, pinned)
		__string(kind, kind)
	),
	TP_fast_assign(
		__entry->lkey = lkey;
		__entry->rkey = rkey;
		__entry->iova = iova;
		__entry->length = length;
		__entry->access = access;
		__entry->pinned = pinned;
		__assign_str(kind);
	),
	TP_printk("%s lkey=0x%08x rkey=0x%08x iova=0x%llx length=%llu access=0x%x pinned=%llu",
		  __get_str(kind), __entry->lkey, __entry->rkey, __entry->iova,
		  __entry->length, __entry->access, __entry->pinned)
);

TRACE_EVENT(oxe_mr_dereg,
	TP_PROTO(u32 lkey, u64 pinned),
	TP_ARGS(lkey, pinned),
	TP_STRUCT__entry(
		__field(u32, lkey)
		__field(u64, pinned)
	),
	TP_fast_assign(
		__entry->lkey = lkey;
		__entry->pinned = pinned;
	),
	TP_printk("lkey=0x%08x unpinned=%llu", __entry->lkey, __entry->pinned)
);

TRACE_EVENT(oxe_qp_state,
	TP_PROTO(u32 qpn, int from, int to),
	TP_ARGS(qpn, from, to),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(int, from)
		__field(int, to)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->from = from;
		__entry->to = to;
	),
	TP_printk("qpn=%u %s -> %s", __entry->qpn,
		  __print_symbolic(__entry->from, OXE_QP_STATES),
		  __print_symbolic(__entry->to, OXE_QP_STATES))
);

TRACE_EVENT(oxe_retransmit,
	TP_PROTO(u32 qpn, u32 psn, const char *why, u32 tries),
	TP_ARGS(qpn, psn, why, tries),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u32, psn)
		__string(why, why)
		__field(u32, tries)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->psn = psn;
		__assign_str(why);
		__entry->tries = tries;
	),
	TP_printk("qpn=%u from psn=%u (%s) try=%u", __entry->qpn, __entry->psn,
		  __get_str(why), __entry->tries)
);

TRACE_EVENT(oxe_read_pace,
	TP_PROTO(u32 qpn, u32 psn, u32 rate),
	TP_ARGS(qpn, psn, rate),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u32, psn)
		__field(u32, rate)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->psn = psn;
		__entry->rate = rate;
	),
	TP_printk("qpn=%u READ again from psn=%u: responses at %u KB/s", __entry->qpn,
		  __entry->psn, __entry->rate)
);

TRACE_EVENT(oxe_drop,
	TP_PROTO(u32 qpn, u32 psn, const char *why),
	TP_ARGS(qpn, psn, why),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u32, psn)
		__string(why, why)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->psn = psn;
		__assign_str(why);
	),
	TP_printk("qpn=%u psn=%u: %s", __entry->qpn, __entry->psn, __get_str(why))
);

TRACE_EVENT(oxe_cqe_error,
	TP_PROTO(u32 qpn, u64 wr_id, u32 status, u32 opcode),
	TP_ARGS(qpn, wr_id, status, opcode),
	TP_STRUCT__entry(
		__field(u32, qpn)
		__field(u64, wr_id)
		__field(u32, status)
		__field(u32, opcode)
	),
	TP_fast_assign(
		__entry->qpn = qpn;
		__entry->wr_id = wr_id;
		__entry->status = status;
		__entry->opcode = opcode;
	),
	TP_printk("qpn=%u wr_id=0x%llx status=%u (%s) opcode=%u", __entry->qpn,
		  __entry->wr_id, __entry->status,
		  rdma_show_wc_status(__entry->status), __entry->opcode)
);

#endif /* _OXE_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE oxe_trace
#include <trace/define_trace.h>
