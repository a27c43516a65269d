// SPDX-License-Identifier: GPL-2.0
/* oxe's tracepoints (oxe_trace.h), and the calls Rust makes to fire them. */
#include <rdma/ib_verbs.h>
#include "oxe_helpers.h"

#define CREATE_TRACE_POINTS
#include "oxe_trace.h"

void oxe_trace_mr_reg(u32 lkey, u32 rkey, u64 iova, u64 length, u32 access, u64 pinned,
		      const char *kind)
{
	trace_oxe_mr_reg(lkey, rkey, iova, length, access, pinned, kind);
}

void oxe_trace_mr_dereg(u32 lkey, u64 pinned)
{
	trace_oxe_mr_dereg(lkey, pinned);
}

void oxe_trace_qp_state(u32 qpn, int from, int to)
{
	trace_oxe_qp_state(qpn, from, to);
}

void oxe_trace_retransmit(u32 qpn, u32 psn, const char *why, u32 tries)
{
	trace_oxe_retransmit(qpn, psn, why, tries);
}

void oxe_trace_read_pace(u32 qpn, u32 psn, u32 rate)
{
	trace_oxe_read_pace(qpn, psn, rate);
}

void oxe_trace_drop(u32 qpn, u32 psn, const char *why)
{
	trace_oxe_drop(qpn, psn, why);
}

void oxe_trace_cqe_error(u32 qpn, u64 wr_id, u32 status, u32 opcode)
{
	trace_oxe_cqe_error(qpn, wr_id, status, opcode);
}
