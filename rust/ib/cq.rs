// SPDX-License-Identifier: GPL-2.0

//! What a CQ touches of the core's `ib_cq`: its `cqe` count, its
//! completion handler and event; and the `ib_wc` formats.

use kernel::ffi::c_int;

use super::{from_ib, ib_ptr};
use crate::bindings as b;
use crate::cq::{Cqe, OxeCq};

impl OxeCq {
    /// # Safety
    ///
    /// `ib` must be a live oxe CQ.
    pub(crate) unsafe fn from_ib<'a>(ib: *mut b::ib_cq) -> &'a OxeCq {
        // SAFETY: per the function's contract; `create_cq` initialised it.
        unsafe { from_ib(ib) }
    }

    pub(crate) fn ib(&self) -> *mut b::ib_cq {
        ib_ptr(self)
    }

    /// Tells the core the ring's usable entries (`ib_cq.cqe`), after a
    /// resize. The core reads it only in the verbs of this CQ.
    pub(crate) fn publish_cqe(&self, n: u32) {
        // SAFETY: a live CQ; an aligned int the core reads only in the CQ's
        // verbs, after they return.
        unsafe { (*self.ib()).cqe = n as c_int };
    }

    /// Runs the consumer's completion handler.
    pub(crate) fn comp_handler(&self) {
        // SAFETY: a live CQ; called with none of its locks held.
        unsafe { b::oxe_cq_comp_handler(self.ib()) };
    }

    /// Reports an asynchronous event to the consumer.
    pub(crate) fn event(&self, ty: b::ib_event_type) {
        // SAFETY: a live CQ; called with none of its locks held.
        unsafe { b::oxe_cq_event(self.ib(), ty) };
    }
}

/// `cqe` as user CQs carry it: `struct ib_uverbs_wc`.
pub(crate) fn uverbs_wc(cqe: &Cqe) -> b::ib_uverbs_wc {
    let mut wc: b::ib_uverbs_wc = pin_init::zeroed();
    wc.wr_id = cqe.wr_id;
    wc.status = cqe.status;
    wc.opcode = cqe.opcode;
    wc.byte_len = cqe.byte_len;
    // SAFETY: writing a plain integer member of the union.
    unsafe { *wc.ex.imm_data.as_mut() = cqe.ex };
    wc.qp_num = cqe.qp_num;
    wc.src_qp = cqe.src_qp;
    wc.wc_flags = cqe.wc_flags;
    wc.port_num = 1;
    wc
}

/// `cqe` as kernel CQs carry it: `struct ib_wc`.
pub(crate) fn kernel_wc(cqe: &Cqe) -> b::ib_wc {
    let mut wc: b::ib_wc = pin_init::zeroed();
    // SAFETY: writing plain integer members of the unions.
    unsafe {
        *wc.__bindgen_anon_1.wr_id.as_mut() = cqe.wr_id;
        *wc.ex.imm_data.as_mut() = cqe.ex;
    }
    wc.status = cqe.status;
    wc.opcode = cqe.opcode;
    wc.byte_len = cqe.byte_len;
    wc.qp = cqe.qp;
    wc.src_qp = cqe.src_qp;
    wc.wc_flags = cqe.wc_flags as c_int;
    wc.port_num = 1;
    wc
}
