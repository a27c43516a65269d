// SPDX-License-Identifier: GPL-2.0

//! oxe's tracepoints (include/oxe_trace.h): `perf list 'oxe:*'`,
//! `trace-cmd record -e oxe`, or tracefs's events/oxe. Each call costs a
//! function call and the event's static-key test while it is off; they are
//! made on slow paths only.

use kernel::prelude::*;

use crate::bindings as b;

/// An MR was registered (`kind`: what backs it).
pub(crate) fn mr_reg(
    lkey: u32,
    rkey: u32,
    iova: u64,
    length: u64,
    access: u32,
    pinned: u64,
    kind: &CStr,
) {
    // SAFETY: plain values and a NUL-terminated string the event copies.
    unsafe { b::oxe_trace_mr_reg(lkey, rkey, iova, length, access, pinned, kind.as_char_ptr()) }
}

/// An MR was deregistered, releasing `pinned` pages.
pub(crate) fn mr_dereg(lkey: u32, pinned: u64) {
    // SAFETY: plain values.
    unsafe { b::oxe_trace_mr_dereg(lkey, pinned) }
}

/// A QP went from state `from` to `to` (`enum ib_qp_state`).
pub(crate) fn qp_state(qpn: u32, from: u32, to: u32) {
    // SAFETY: plain values.
    unsafe { b::oxe_trace_qp_state(qpn, from as i32, to as i32) }
}

/// A requester goes back to send again from `psn` (`tries`: the count
/// its limit is checked against).
pub(crate) fn retransmit(qpn: u32, psn: u32, why: &CStr, tries: u8) {
    // SAFETY: plain values and a NUL-terminated string the event copies.
    unsafe { b::oxe_trace_retransmit(qpn, psn, why.as_char_ptr(), tries.into()) }
}

/// A READ asked for again slowed the QP's READ responses to `rate` bytes
/// per ms (KB/s).
pub(crate) fn paced(qpn: u32, psn: u32, rate: u32) {
    // SAFETY: plain values.
    unsafe { b::oxe_trace_read_pace(qpn, psn, rate) }
}

/// A packet was dropped (`qpn` 0 when it reached no QP).
pub(crate) fn drop_pkt(qpn: u32, psn: u32, why: &CStr) {
    // SAFETY: plain values and a NUL-terminated string the event copies.
    unsafe { b::oxe_trace_drop(qpn, psn, why.as_char_ptr()) }
}

/// A work completion with an error status.
pub(crate) fn cqe_error(qpn: u32, wr_id: u64, status: u32, opcode: u32) {
    // SAFETY: plain values.
    unsafe { b::oxe_trace_cqe_error(qpn, wr_id, status, opcode) }
}
