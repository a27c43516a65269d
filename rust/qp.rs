// SPDX-License-Identifier: GPL-2.0

//! RC queue pairs: creation with rxe's shared SQ and RQ rings, the state
//! machine (modify/query), the post_send doorbell, kernel posting, flushing
//! and destruction. The transport itself is in `req.rs` and `resp.rs`.

use core::mem::size_of;
use core::ptr;

use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::sync::{Arc, Mutex};
use kernel::workqueue::{self, Work, WorkItem};
use kernel::xarray::{AllocKind, XArray};

use crate::access::PdId;
use crate::bindings as b;
use crate::cq::{Cqe, OxeCq};
use crate::device::{OxeDevice, OxeUcontext};
use crate::irqlock::{new_irq_spinlock, IrqSpinLock};
use crate::params;
use crate::pd;
use crate::queue::{self, Queue, SharedBuf};
use crate::wqe::{self, Sge};

pub(crate) const STATE_RESET: u32 = b::ib_qp_state_IB_QPS_RESET;
pub(crate) const STATE_RTR: u32 = b::ib_qp_state_IB_QPS_RTR;
pub(crate) const STATE_RTS: u32 = b::ib_qp_state_IB_QPS_RTS;
pub(crate) const STATE_SQD: u32 = b::ib_qp_state_IB_QPS_SQD;
pub(crate) const STATE_SQE: u32 = b::ib_qp_state_IB_QPS_SQE;
pub(crate) const STATE_ERR: u32 = b::ib_qp_state_IB_QPS_ERR;

/// Negotiated attributes, copied out as a snapshot by the transport.
#[derive(Clone, Copy)]
pub(crate) struct Attrs {
    pub(crate) state: u32,
    pub(crate) path_mtu: u32,
    pub(crate) mtu_enum: u32,
    pub(crate) dest_qpn: u32,
    pub(crate) access: u32,
    pub(crate) max_rd_atomic: u8,
    pub(crate) max_dest_rd_atomic: u8,
    pub(crate) min_rnr_timer: u8,
    pub(crate) timeout: u8,
    pub(crate) retry_cnt: u8,
    pub(crate) rnr_retry: u8,
    pub(crate) sq_psn: u32,
    pub(crate) rq_psn: u32,
    pub(crate) pkey_index: u16,
    pub(crate) port: u8,
    pub(crate) qkey: u32,
    /// The address vector, kept as bytes (bindgen's type is not `Copy`).
    pub(crate) ah: [u8; AH_SIZE],
}

const AH_SIZE: usize = size_of::<b::rdma_ah_attr>();

/// The send side: the SQ ring and the requester's state.
pub(crate) struct SendSide {
    pub(crate) queue: Queue,
    /// Next PSN to send.
    pub(crate) psn: u32,
    /// Scratch: a private copy of the WQE being executed.
    pub(crate) wqe: KVec<u8>,
    /// Scratch: one packet's payload.
    pub(crate) payload: KVec<u8>,
    /// RNR NAKs met by the current WQE.
    pub(crate) rnr_tries: u8,
    /// The QP whose receive completion waits for this WQE's completion.
    pub(crate) notify: Option<Arc<Qp>>,
}

/// The receive side: the RQ ring and the responder's state.
pub(crate) struct RecvSide {
    pub(crate) queue: Queue,
    /// Next PSN expected.
    pub(crate) epsn: u32,
    pub(crate) wqe: KVec<u8>,
    /// A multi-packet SEND or WRITE in progress.
    pub(crate) progress: Option<crate::resp::Progress>,
    /// Scratch for READ responses.
    pub(crate) payload: KVec<u8>,
    /// A receive completion held back until the sender has completed its
    /// WQE (see `resp::post_deferred`).
    pub(crate) deferred: Option<(Cqe, bool)>,
}

#[pin_data]
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    pub(crate) ib: *mut b::ib_qp,
    pub(crate) dev: *const OxeDevice,
    pub(crate) pd: PdId,
    pub(crate) scq: *const OxeCq,
    pub(crate) rcq: *const OxeCq,
    pub(crate) sq_sig_all: bool,
    /// A user QP: its WQEs come from user memory, and may not use the
    /// kernel-only opcodes (REG_MR).
    pub(crate) user: bool,
    pub(crate) max_send_sge: u32,
    pub(crate) max_inline: u32,
    pub(crate) max_recv_sge: u32,
    #[pin]
    pub(crate) attr: IrqSpinLock<Attrs>,
    #[pin]
    pub(crate) sq: Mutex<SendSide>,
    #[pin]
    pub(crate) rq: Mutex<RecvSide>,
    /// Kernel QPs: the producer ends of the SQ and RQ, which kernel clients
    /// post to from any context (the rings' consumer, under `sq` and `rq`,
    /// may sleep). None for user QPs, which write their rings themselves.
    #[pin]
    ksq: IrqSpinLock<Option<Queue>>,
    #[pin]
    krq: IrqSpinLock<Option<Queue>>,
    #[pin]
    work: Work<Qp>,
    /// Set by destroy, before it takes the SQ and RQ locks: no more work is
    /// queued, and nothing posts to the CQs (checked under those locks).
    pub(crate) dead: Atomic<i32>,
}

// The raw pointers name objects the core keeps alive while the QP exists
// (the device) or until destroy_qp returns (the CQs; see `teardown`).
// SAFETY: all mutable state is behind locks.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}

kernel::impl_has_work! {
    impl HasWork<Self> for Qp { self.work }
}

impl WorkItem for Qp {
    type Pointer = Arc<Qp>;

    fn run(qp: Arc<Qp>) {
        crate::req::run(&qp);
    }
}

impl Qp {
    pub(crate) fn attrs(&self) -> Attrs {
        *self.attr.lock()
    }

    pub(crate) fn dev(&self) -> &OxeDevice {
        // SAFETY: the device outlives its QPs.
        unsafe { &*self.dev }
    }

    /// The send CQ. Only for the verbs, which the core never runs alongside
    /// destroy, and for the transport holding the SQ or RQ lock with the QP
    /// seen alive under it: destroy takes both after marking it dead, and
    /// the core frees the CQs only after destroy.
    pub(crate) fn scq(&self) -> &OxeCq {
        // SAFETY: the QP is not destroyed yet, per the above.
        unsafe { &*self.scq }
    }

    /// The receive CQ, as for [`Qp::scq`].
    pub(crate) fn rcq(&self) -> &OxeCq {
        // SAFETY: as for `scq`.
        unsafe { &*self.rcq }
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(ordering::Acquire) != 0
    }

    /// Runs the requester soon.
    pub(crate) fn schedule(self: &Arc<Self>) {
        if !self.is_dead() {
            // SAFETY: system_dfl_wq (the unbound system workqueue) lives as long as the kernel.
            let wq = unsafe { workqueue::Queue::from_raw(b::system_dfl_wq) };
            let _ = wq.enqueue(self.clone());
        }
    }

    /// Moves the QP to ERR. Every way into ERR comes here (modify_qp, and
    /// the errors of the requester, completer and responder), with the RQ
    /// lock held: the posted receives are flushed and the message in
    /// progress is dropped with its MR references, which `dereg_mr` would
    /// otherwise wait for as long as the QP lives. The state changes under
    /// the RQ lock, which `receive` checks it under, so no packet starts a
    /// new message afterwards. The SQ is flushed by the requester, which
    /// does so whenever it runs in ERR.
    pub(crate) fn set_error(&self, rq: &mut RecvSide) {
        self.attr.lock().state = STATE_ERR;
        self.flush_rq(rq);
    }

    pub(crate) fn cqe(&self, wr_id: u64, status: u32, opcode: u32, byte_len: u32) -> Cqe {
        Cqe {
            wr_id,
            status,
            opcode,
            byte_len,
            ex: 0,
            wc_flags: 0,
            qp: self.ib,
            qp_num: self.qpn,
            src_qp: 0,
        }
    }

    /// Completes every posted receive with WR_FLUSH_ERR, after a receive
    /// completion still held back, so that completions stay in RQ order.
    /// One pass over at most the ring's capacity: user space may keep
    /// posting meanwhile, and what it posts after the flush began is not the
    /// flush's business.
    fn flush_rq(&self, rq: &mut RecvSide) {
        if let Some((cqe, solicited)) = rq.deferred.take() {
            let _ = self.rcq().post(&cqe, solicited);
        }
        for _ in 0..rq.queue.capacity() {
            if !rq.queue.peek_into(&mut rq.wqe) {
                break;
            }
            let w = wqe::RecvWqe::parse(&rq.wqe).unwrap_or_default();
            let cqe = self.cqe(
                w.wr_id,
                b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
                b::ib_wc_opcode_IB_WC_RECV,
                0,
            );
            if self.rcq().post(&cqe, false).is_err() {
                break;
            }
            rq.queue.advance_consumer();
        }
        rq.progress = None;
    }

    /// Completes the posted sends with WR_FLUSH_ERR: one pass over at most
    /// the ring's capacity, since user space may keep posting meanwhile.
    /// True if that pass ended with WQEs left, which the caller has the
    /// requester flush on its next run (as rxe requeues its task).
    pub(crate) fn flush_sq(&self, sq: &mut SendSide) -> bool {
        for _ in 0..sq.queue.capacity() {
            if !sq.queue.peek_into(&mut sq.wqe) {
                return false;
            }
            let w = wqe::SendWqe::parse(&sq.wqe).unwrap_or_default();
            let cqe = self.cqe(
                w.wr_id,
                b::ib_wc_status_IB_WC_WR_FLUSH_ERR,
                crate::req::wc_opcode(w.opcode),
                0,
            );
            if self.scq().post(&cqe, false).is_err() {
                // The CQ is in error: nothing more can be completed.
                return false;
            }
            sq.queue.advance_consumer();
        }
        !sq.queue.is_empty()
    }
}

/// QPN -> QP, for delivering packets. QPNs start at 16, as rxe's.
#[pin_data]
pub(crate) struct QpTable {
    #[pin]
    xa: XArray<Arc<Qp>>,
    #[pin]
    next: Mutex<u32>,
}

impl QpTable {
    pub(crate) fn new() -> impl PinInit<Self, Error> {
        try_pin_init!(QpTable {
            xa <- XArray::new(AllocKind::Alloc),
            next <- kernel::new_mutex!(params::MIN_QP_INDEX),
        }? Error)
    }

    /// Creates a QP under a free QPN and publishes it.
    fn insert(&self, make: impl FnOnce(u32) -> Result<Arc<Qp>>) -> Result<Arc<Qp>> {
        let mut next = self.next.lock();
        let max = params::MIN_QP_INDEX + params::MAX_QP - 1;
        for _ in 0..params::MAX_QP {
            let qpn = *next;
            *next = if qpn >= max {
                params::MIN_QP_INDEX
            } else {
                qpn + 1
            };
            if self.xa.lock().get(qpn as usize).is_some() {
                continue;
            }
            let qp = make(qpn)?;
            self.xa.lock().store(qpn as usize, qp.clone(), GFP_KERNEL)?;
            return Ok(qp);
        }
        Err(ENOSPC)
    }

    pub(crate) fn get(&self, qpn: u32) -> Option<Arc<Qp>> {
        self.xa.lock().get(qpn as usize).map(Arc::from)
    }

    fn remove(&self, qpn: u32) {
        drop(self.xa.lock().remove(qpn as usize));
    }
}

#[repr(C)]
pub(crate) struct OxeQp {
    ib: b::ib_qp,
    qp: Option<Arc<Qp>>,
}

impl OxeQp {
    /// # Safety
    ///
    /// `ib` must be a live oxe QP.
    unsafe fn get<'a>(ib: *mut b::ib_qp) -> Option<&'a Arc<Qp>> {
        // SAFETY: `ib` is the first field of a `repr(C)` OxeQp.
        unsafe { (*ib.cast::<OxeQp>()).qp.as_ref() }
    }
}

fn send_elem(max_sge: u32, max_inline: u32) -> usize {
    wqe::SEND_WQE_SGE_OFFSET + (max_sge as usize * wqe::SGE_SIZE).max(max_inline as usize)
}

fn recv_elem(max_sge: u32) -> usize {
    wqe::RECV_WQE_SGE_OFFSET + max_sge as usize * wqe::SGE_SIZE
}

// The parsers and writers in common/wqe.rs have rxe's layout written out
// (they also build on the host, without bindings). Every offset they use, and
// the width they read or write there, is checked here against bindgen's
// layout of rdma_user_rxe.h: the module does not build if one drifts.
mod layout_check {
    use core::mem::{offset_of, size_of};

    use crate::bindings as b;
    use crate::wqe::{self, layout as l};

    type SendWqe = b::rxe_send_wqe;
    type RecvWqe = b::rxe_recv_wqe;
    type Dma = b::rxe_dma_info;
    type Sge = b::rxe_sge;
    // bindgen numbers the anonymous members; the fn pointers below pin each
    // name to the member it stands for.
    type WrUnion = b::rxe_send_wr__bindgen_ty_2;
    type WrRdma = b::rxe_send_wr__bindgen_ty_2__bindgen_ty_2;
    type WrAtomic = b::rxe_send_wr__bindgen_ty_2__bindgen_ty_3;
    type WrReg = b::rxe_send_wr__bindgen_ty_2__bindgen_ty_6;
    type DmaUnion = b::rxe_dma_info__bindgen_ty_1;
    type DmaInline = b::rxe_dma_info__bindgen_ty_1__bindgen_ty_1;
    type DmaSges = b::rxe_dma_info__bindgen_ty_1__bindgen_ty_3;

    const _: fn(&WrUnion) -> &b::__BindgenUnionField<WrRdma> = |u| &u.rdma;
    const _: fn(&WrUnion) -> &b::__BindgenUnionField<WrAtomic> = |u| &u.atomic;
    const _: fn(&WrUnion) -> &b::__BindgenUnionField<WrReg> = |u| &u.reg;
    const _: fn(&Dma) -> &DmaUnion = |d| &d.__bindgen_anon_1;
    const _: fn(&DmaUnion) -> &b::__BindgenUnionField<DmaInline> = |u| &u.__bindgen_anon_1;
    const _: fn(&DmaUnion) -> &b::__BindgenUnionField<DmaSges> = |u| &u.__bindgen_anon_3;
    const _: fn(&DmaInline) -> &b::__IncompleteArrayField<u8> = |d| &d.inline_data;
    const _: fn(&DmaSges) -> &b::__IncompleteArrayField<Sge> = |d| &d.sge;

    /// The size of the field `f` selects (`f` is never called).
    const fn width<T, F>(_f: fn(&T) -> &F) -> usize {
        size_of::<F>()
    }

    /// The parser's offset `$off` is field `$f` of `$t`, whose own offset
    /// in the WQE is `$base`, and the field is `$w` bytes wide.
    macro_rules! field {
        ($off:expr, $base:expr, $t:ty, $($f:ident).+, $w:expr) => {
            assert!($off == $base + offset_of!($t, $($f).+));
            assert!(width(|x: &$t| &x.$($f).+) == $w);
        };
    }

    // Where the members of the `wr` union and of `dma` sit in the WQEs.
    const WR: usize = offset_of!(SendWqe, wr.wr);
    const RDMA: usize = WR + offset_of!(WrUnion, rdma);
    const ATOMIC: usize = WR + offset_of!(WrUnion, atomic);
    const REG: usize = WR + offset_of!(WrUnion, reg);
    const SEND_DMA: usize = offset_of!(SendWqe, dma);
    const RECV_DMA: usize = offset_of!(RecvWqe, dma);
    const DMA_UNION: usize = offset_of!(Dma, __bindgen_anon_1);
    const DMA_INLINE: usize = DMA_UNION + offset_of!(DmaUnion, __bindgen_anon_1);
    const DMA_SGES: usize = DMA_UNION + offset_of!(DmaUnion, __bindgen_anon_3);

    const _: () = {
        // struct rxe_send_wqe and its struct rxe_send_wr.
        field!(l::WR_ID, 0, SendWqe, wr.wr_id, 8);
        field!(l::OPCODE, 0, SendWqe, wr.opcode, 4);
        field!(l::SEND_FLAGS, 0, SendWqe, wr.send_flags, 4);
        field!(l::EX, 0, SendWqe, wr.ex, 4);
        assert!(l::WR == WR);
        field!(l::RDMA_REMOTE_ADDR, RDMA, WrRdma, remote_addr, 8);
        field!(l::RDMA_RKEY, RDMA, WrRdma, rkey, 4);
        field!(l::ATOMIC_REMOTE_ADDR, ATOMIC, WrAtomic, remote_addr, 8);
        field!(l::ATOMIC_COMPARE_ADD, ATOMIC, WrAtomic, compare_add, 8);
        field!(l::ATOMIC_SWAP, ATOMIC, WrAtomic, swap, 8);
        field!(l::ATOMIC_RKEY, ATOMIC, WrAtomic, rkey, 4);
        field!(l::REG_MR, REG, WrReg, __bindgen_anon_1, 8);
        field!(l::REG_KEY, REG, WrReg, key, 4);
        field!(l::REG_ACCESS, REG, WrReg, access, 4);
        assert!(l::SEND_DMA == SEND_DMA);
        // struct rxe_recv_wqe.
        field!(l::RECV_WR_ID, 0, RecvWqe, wr_id, 8);
        assert!(l::RECV_DMA == RECV_DMA);
        // struct rxe_dma_info, in both.
        field!(l::DMA_LENGTH, 0, Dma, length, 4);
        field!(l::DMA_RESID, 0, Dma, resid, 4);
        field!(l::DMA_NUM_SGE, 0, Dma, num_sge, 4);
        field!(l::DMA_SGE, DMA_SGES, DmaSges, sge, 0);
        field!(l::DMA_SGE, DMA_INLINE, DmaInline, inline_data, 0);
        // The SGE arrays (or inline data) end the fixed parts.
        assert!(wqe::SEND_WQE_SGE_OFFSET == SEND_DMA + DMA_SGES);
        assert!(wqe::SEND_WQE_SGE_OFFSET == size_of::<SendWqe>());
        assert!(wqe::RECV_WQE_SGE_OFFSET == RECV_DMA + DMA_SGES);
        assert!(wqe::RECV_WQE_SGE_OFFSET == size_of::<RecvWqe>());
        // struct rxe_sge.
        field!(l::SGE_ADDR, 0, Sge, addr, 8);
        field!(l::SGE_LENGTH, 0, Sge, length, 4);
        field!(l::SGE_LKEY, 0, Sge, lkey, 4);
        assert!(wqe::SGE_SIZE == size_of::<Sge>());
    };
}

/// # Safety
///
/// Called by the RDMA core with a zeroed QP of `size_ib_qp` bytes.
pub(crate) unsafe extern "C" fn create_qp(
    ib: *mut b::ib_qp,
    init: *mut b::ib_qp_init_attr,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: per the function's contract.
    match unsafe { create(ib, init, udata) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// As for [`create_qp`].
unsafe fn create(
    ib: *mut b::ib_qp,
    init: *mut b::ib_qp_init_attr,
    udata: *mut b::ib_udata,
) -> Result {
    let oq = ib.cast::<OxeQp>();
    // SAFETY: fresh zeroed memory of OxeQp's size: write without dropping.
    unsafe { ptr::addr_of_mut!((*oq).qp).write(None) };
    // SAFETY: the core passes valid init attributes.
    let a = unsafe { &mut *init };
    if a.qp_type != b::ib_qp_type_IB_QPT_RC {
        return Err(crate::eopnotsupp());
    }
    if !a.srq.is_null() || a.create_flags != 0 {
        return Err(crate::eopnotsupp());
    }
    let user = !udata.is_null();
    if user {
        // SAFETY: the command's udata.
        let (inlen, outlen) = unsafe { ((*udata).inlen, (*udata).outlen) };
        // librxe sends no request data; the response carries both mminfos.
        if inlen != 0 || outlen < size_of::<b::rxe_create_qp_resp>() {
            return Err(EINVAL);
        }
    }
    let c = &mut a.cap;
    if c.max_send_wr == 0
        || c.max_send_wr > params::MAX_QP_WR
        || c.max_recv_wr > params::MAX_QP_WR
        || c.max_send_sge > params::MAX_SGE
        || c.max_recv_sge > params::MAX_SGE
        || c.max_inline_data > params::MAX_INLINE_DATA
        || a.send_cq.is_null()
        || a.recv_cq.is_null()
    {
        return Err(EINVAL);
    }
    let sq = Queue::new(c.max_send_wr, send_elem(c.max_send_sge, c.max_inline_data))?;
    let rq = Queue::new(c.max_recv_wr.max(1), recv_elem(c.max_recv_sge.max(1)))?;
    let (sq_buf, rq_buf) = (sq.buf().clone(), rq.buf().clone());
    // What the rings can hold, reported back like rxe does.
    let send_room = (sq.elem_size() - wqe::SEND_WQE_SGE_OFFSET) as u32;
    c.max_send_wr = sq.capacity();
    c.max_send_sge = (send_room / wqe::SGE_SIZE as u32).min(params::MAX_SGE);
    c.max_inline_data = send_room.min(params::MAX_INLINE_DATA);
    c.max_recv_wr = rq.capacity();
    c.max_recv_sge =
        (((rq.elem_size() - wqe::RECV_WQE_SGE_OFFSET) / wqe::SGE_SIZE) as u32).min(params::MAX_SGE);

    // SAFETY: the core filled in device and PD.
    let (dev, pd) = unsafe { (OxeDevice::from_ib((*ib).device), (*ib).pd) };
    // SAFETY: the QP's PD, live, of this device.
    let pd = unsafe { pd::id(pd) };
    let state = dev.state().ok_or(ENODEV)?;
    let (sq_elem, rq_elem) = (sq.elem_size(), rq.elem_size());
    let (ksq, krq) = if user {
        (None, None)
    } else {
        (Some(sq.kernel_producer()), Some(rq.kernel_producer()))
    };
    let mut sq_wqe = KVec::new();
    sq_wqe.resize(sq_elem, 0, GFP_KERNEL)?;
    let mut rq_wqe = KVec::new();
    rq_wqe.resize(rq_elem, 0, GFP_KERNEL)?;
    let mut sq_payload = KVec::new();
    sq_payload.resize(4096, 0, GFP_KERNEL)?;
    let mut rq_payload = KVec::new();
    rq_payload.resize(4096, 0, GFP_KERNEL)?;

    let max_send_sge = c.max_send_sge;
    let max_inline = c.max_inline_data;
    let max_recv_sge = c.max_recv_sge;
    let sq_sig_all = a.sq_sig_type == b::ib_sig_type_IB_SIGNAL_ALL_WR;
    // SAFETY: the core checked the CQs belong to this device.
    let (scq, rcq) = unsafe {
        (
            ptr::from_ref(OxeCq::from_ib(a.send_cq)),
            ptr::from_ref(OxeCq::from_ib(a.recv_cq)),
        )
    };
    let qp = state.qps.insert(|qpn| {
        let attrs = Attrs {
            state: STATE_RESET,
            path_mtu: 256,
            mtu_enum: b::ib_mtu_IB_MTU_256,
            dest_qpn: 0,
            access: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 0,
            timeout: 0,
            retry_cnt: 0,
            rnr_retry: 0,
            sq_psn: 0,
            rq_psn: 0,
            pkey_index: 0,
            port: 1,
            qkey: 0,
            ah: [0; AH_SIZE],
        };
        Arc::pin_init(
            try_pin_init!(Qp {
                qpn,
                ib,
                dev: ptr::from_ref(dev),
                pd,
                scq,
                rcq,
                sq_sig_all,
                user,
                max_send_sge,
                max_inline,
                max_recv_sge,
                attr <- new_irq_spinlock!(attrs),
                sq <- kernel::new_mutex!(SendSide {
                    queue: sq,
                    psn: 0,
                    wqe: sq_wqe,
                    payload: sq_payload,
                    rnr_tries: 0,
                    notify: None,
                }),
                rq <- kernel::new_mutex!(RecvSide {
                    queue: rq,
                    epsn: 0,
                    wqe: rq_wqe,
                    progress: None,
                    payload: rq_payload,
                    deferred: None,
                }),
                ksq <- new_irq_spinlock!(ksq),
                krq <- new_irq_spinlock!(krq),
                work <- kernel::new_work!("oxe_qp"),
                dead: Atomic::new(0),
            }? Error),
            GFP_KERNEL,
        )
    })?;
    let qpn = qp.qpn;
    // SAFETY: nobody else sees the QP yet.
    unsafe {
        (*ib).qp_num = qpn;
        (*oq).qp = Some(qp);
    }
    if user {
        // Offered last: a create that fails after the offers withdraws them.
        // SAFETY: a user QP of the command's ucontext.
        if let Err(e) = unsafe { respond_user(dev, udata, &rq_buf, &sq_buf) } {
            // SAFETY: the core calls no destroy when create fails.
            unsafe { teardown(ib, udata) };
            return Err(e);
        }
    }
    Ok(())
}

/// Offers a user QP's rings for mmap and sends their mminfos back.
///
/// # Safety
///
/// `udata` is the driver udata of the user command creating the QP.
unsafe fn respond_user(
    dev: &OxeDevice,
    udata: *mut b::ib_udata,
    rq: &Arc<SharedBuf>,
    sq: &Arc<SharedBuf>,
) -> Result {
    // SAFETY: user QPs come with a live ucontext.
    let uc = unsafe { OxeUcontext::from_udata(udata) }.ok_or(EINVAL)?;
    let mmaps = uc.mmaps()?;
    let mut resp: b::rxe_create_qp_resp = pin_init::zeroed();
    resp.rq_mi = mmaps.offer(dev.mmap_offsets(), rq)?;
    resp.sq_mi = mmaps.offer(dev.mmap_offsets(), sq)?;
    queue::respond(udata, &resp)
}

/// Unpublishes the QP, waits for its work, withdraws the offers of its rings
/// that user space never took and drops it.
///
/// # Safety
///
/// `ib` must be an oxe QP that the core is destroying (or failed to create);
/// `udata` the command's (NULL for kernel QPs).
unsafe fn teardown(ib: *mut b::ib_qp, udata: *mut b::ib_udata) {
    // SAFETY: per the function's contract.
    let Some(qp) = (unsafe { (*ib.cast::<OxeQp>()).qp.take() }) else {
        return;
    };
    qp.dead.store(1, ordering::Release);
    if let Some(state) = qp.dev().state() {
        state.qps.remove(qp.qpn);
    }
    // The requester may be running or queued: wait for it, so that it never
    // touches the ib_qp or the CQs after they are gone. A run that began
    // before the QP was marked dead may requeue itself (budget spent, RNR),
    // after flush_work began: flush again until the work was idle. Runs that
    // see the QP dead queue nothing, so this ends.
    // SAFETY: the work item lives in `qp`, which we hold.
    while unsafe { b::flush_work(Work::raw_get(ptr::addr_of!(qp.work))) } {}
    // A peer may still hold the QP. Taking each lock after marking it dead
    // waits out those that post to its CQs under it (a peer's `receive` and
    // `post_deferred` under the RQ lock), and later holders see it dead: the
    // core may free the CQs once this returns.
    // Lock order: SQ before RQ, as the transport takes them.
    let sq = qp.sq.lock().queue.buf().clone();
    let rq = qp.rq.lock().queue.buf().clone();
    // The rings themselves go with the last reference to the QP.
    // SAFETY: per the function's contract.
    unsafe { queue::withdraw(udata, &[&sq, &rq]) };
}

/// # Safety
///
/// Called by the RDMA core for a live QP.
pub(crate) unsafe extern "C" fn destroy_qp(ib: *mut b::ib_qp, udata: *mut b::ib_udata) -> c_int {
    // SAFETY: per the function's contract.
    unsafe { teardown(ib, udata) };
    0
}

fn mtu_bytes(mtu: u32) -> u32 {
    128u32 << mtu.clamp(1, 5)
}

/// # Safety
///
/// Called by the RDMA core for a live QP with valid attributes.
pub(crate) unsafe extern "C" fn modify_qp(
    ib: *mut b::ib_qp,
    attr: *mut b::ib_qp_attr,
    mask: c_int,
    udata: *mut b::ib_udata,
) -> c_int {
    // SAFETY: per the function's contract.
    match unsafe { modify(ib, &*attr, mask as u32, udata) } {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// As for [`modify_qp`].
unsafe fn modify(
    ib: *mut b::ib_qp,
    a: &b::ib_qp_attr,
    mask: u32,
    udata: *mut b::ib_udata,
) -> Result {
    // SAFETY: the command's udata (NULL for kernel callers).
    kernel::error::to_result(unsafe { b::oxe_udata_in_empty(udata) })?;
    // SAFETY: live QP.
    let qp = unsafe { OxeQp::get(ib) }.ok_or(EINVAL)?;
    let cur = qp.attrs();
    let cur_state = if mask & b::ib_qp_attr_mask_IB_QP_CUR_STATE != 0 {
        a.cur_qp_state
    } else {
        cur.state
    };
    let new_state = if mask & b::ib_qp_attr_mask_IB_QP_STATE != 0 {
        a.qp_state
    } else {
        cur_state
    };
    // SAFETY: a pure check of the core's transition table.
    if !unsafe { b::ib_modify_qp_is_ok(cur_state, new_state, b::ib_qp_type_IB_QPT_RC, mask) } {
        return Err(EINVAL);
    }
    if mask & b::ib_qp_attr_mask_IB_QP_PORT != 0 && a.port_num != 1 {
        return Err(EINVAL);
    }
    if mask & b::ib_qp_attr_mask_IB_QP_PKEY_INDEX != 0 && a.pkey_index != 0 {
        return Err(EINVAL);
    }
    if mask & b::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC != 0
        && u32::from(a.max_rd_atomic) > params::MAX_QP_RD_ATOM
    {
        return Err(EINVAL);
    }
    if mask & b::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC != 0
        && u32::from(a.max_dest_rd_atomic) > params::MAX_QP_RD_ATOM
    {
        return Err(EINVAL);
    }
    if mask & b::ib_qp_attr_mask_IB_QP_PATH_MTU != 0 && !(1..=5).contains(&a.path_mtu) {
        return Err(EINVAL);
    }

    // Lock order: SQ, RQ, then the attribute spinlock.
    let mut sq = qp.sq.lock();
    let mut rq = qp.rq.lock();
    {
        let mut s = qp.attr.lock();
        if mask & b::ib_qp_attr_mask_IB_QP_ACCESS_FLAGS != 0 {
            s.access = a.qp_access_flags as u32;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PKEY_INDEX != 0 {
            s.pkey_index = a.pkey_index;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PORT != 0 {
            s.port = a.port_num as u8;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_QKEY != 0 {
            s.qkey = a.qkey;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_AV != 0 {
            // SAFETY: plain bytes of a C struct.
            unsafe {
                ptr::copy_nonoverlapping(
                    ptr::from_ref(&a.ah_attr).cast::<u8>(),
                    s.ah.as_mut_ptr(),
                    AH_SIZE,
                )
            };
        }
        if mask & b::ib_qp_attr_mask_IB_QP_PATH_MTU != 0 {
            s.mtu_enum = a.path_mtu;
            s.path_mtu = mtu_bytes(a.path_mtu);
        }
        if mask & b::ib_qp_attr_mask_IB_QP_TIMEOUT != 0 {
            s.timeout = a.timeout;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_RETRY_CNT != 0 {
            s.retry_cnt = a.retry_cnt;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_RNR_RETRY != 0 {
            s.rnr_retry = a.rnr_retry;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_RQ_PSN != 0 {
            s.rq_psn = a.rq_psn & crate::packet::PSN_MASK;
            rq.epsn = s.rq_psn;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MIN_RNR_TIMER != 0 {
            s.min_rnr_timer = a.min_rnr_timer;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_SQ_PSN != 0 {
            s.sq_psn = a.sq_psn & crate::packet::PSN_MASK;
            sq.psn = s.sq_psn;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MAX_QP_RD_ATOMIC != 0 {
            s.max_rd_atomic = a.max_rd_atomic;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_MAX_DEST_RD_ATOMIC != 0 {
            s.max_dest_rd_atomic = a.max_dest_rd_atomic;
        }
        if mask & b::ib_qp_attr_mask_IB_QP_DEST_QPN != 0 {
            s.dest_qpn = a.dest_qp_num;
        }
        s.state = new_state;
    }
    match new_state {
        STATE_ERR => {
            let more = qp.flush_sq(&mut sq);
            qp.set_error(&mut rq);
            if more {
                // The requester, running in ERR, flushes the rest.
                qp.schedule();
            }
        }
        STATE_RESET => {
            // Back to a clean slate: drop what was posted, like rxe. One
            // step each, however fast user space keeps posting.
            sq.queue.discard_posted();
            rq.queue.discard_posted();
            rq.progress = None;
        }
        _ => {}
    }
    Ok(())
}

/// # Safety
///
/// Called by the RDMA core for a live QP with writable outputs.
pub(crate) unsafe extern "C" fn query_qp(
    ib: *mut b::ib_qp,
    attr: *mut b::ib_qp_attr,
    _mask: c_int,
    init: *mut b::ib_qp_init_attr,
) -> c_int {
    // SAFETY: per the function's contract.
    let Some(qp) = (unsafe { OxeQp::get(ib) }) else {
        return EINVAL.to_errno();
    };
    let s = qp.attrs();
    // SAFETY: per the function's contract.
    let (a, i) = unsafe { (&mut *attr, &mut *init) };
    *a = pin_init::zeroed();
    a.qp_state = s.state;
    a.cur_qp_state = s.state;
    a.path_mtu = s.mtu_enum;
    a.path_mig_state = b::ib_mig_state_IB_MIG_MIGRATED;
    a.qkey = s.qkey;
    a.rq_psn = s.rq_psn;
    a.sq_psn = s.sq_psn;
    a.dest_qp_num = s.dest_qpn;
    a.qp_access_flags = s.access as c_int;
    // SAFETY: bytes copied from a valid rdma_ah_attr (or zero).
    unsafe {
        ptr::copy_nonoverlapping(
            s.ah.as_ptr(),
            ptr::from_mut(&mut a.ah_attr).cast::<u8>(),
            AH_SIZE,
        )
    };
    a.pkey_index = s.pkey_index;
    a.port_num = s.port.into();
    a.max_rd_atomic = s.max_rd_atomic;
    a.max_dest_rd_atomic = s.max_dest_rd_atomic;
    a.min_rnr_timer = s.min_rnr_timer;
    a.timeout = s.timeout;
    a.retry_cnt = s.retry_cnt;
    a.rnr_retry = s.rnr_retry;
    {
        let sq = qp.sq.lock();
        let rq = qp.rq.lock();
        a.cap.max_send_wr = sq.queue.capacity();
        a.cap.max_recv_wr = rq.queue.capacity();
    }
    a.cap.max_send_sge = qp.max_send_sge;
    a.cap.max_recv_sge = qp.max_recv_sge;
    a.cap.max_inline_data = qp.max_inline;
    i.cap.max_send_wr = a.cap.max_send_wr;
    i.cap.max_recv_wr = a.cap.max_recv_wr;
    i.cap.max_send_sge = a.cap.max_send_sge;
    i.cap.max_recv_sge = a.cap.max_recv_sge;
    i.cap.max_inline_data = a.cap.max_inline_data;
    i.qp_type = b::ib_qp_type_IB_QPT_RC;
    i.sq_sig_type = if qp.sq_sig_all {
        b::ib_sig_type_IB_SIGNAL_ALL_WR
    } else {
        b::ib_sig_type_IB_SIGNAL_REQ_WR
    };
    0
}

/// The doorbell of user QPs (`wr` is NULL: WQEs are in the shared ring), and
/// kernel posting.
///
/// # Safety
///
/// Called by the RDMA core for a live QP.
pub(crate) unsafe extern "C" fn post_send(
    ib: *mut b::ib_qp,
    wr: *const b::ib_send_wr,
    bad: *mut *const b::ib_send_wr,
) -> c_int {
    // SAFETY: per the function's contract.
    let Some(qp) = (unsafe { OxeQp::get(ib) }) else {
        return EINVAL.to_errno();
    };
    let state = qp.attrs().state;
    if state < STATE_RTS && state != STATE_ERR {
        if !bad.is_null() {
            // SAFETY: the caller's out pointer.
            unsafe { *bad = wr };
        }
        return EINVAL.to_errno();
    }
    let mut cur = wr;
    if !cur.is_null() {
        let mut ksq = qp.ksq.lock();
        let Some(sq) = (*ksq).as_mut() else {
            return EINVAL.to_errno();
        };
        while !cur.is_null() {
            // SAFETY: a kernel WR chain.
            let w = unsafe { &*cur };
            if let Err(e) = post_one_send(qp, sq, w) {
                if !bad.is_null() {
                    // SAFETY: the caller's out pointer.
                    unsafe { *bad = cur };
                }
                drop(ksq);
                qp.schedule();
                return e.to_errno();
            }
            cur = w.next;
        }
    }
    qp.schedule();
    0
}

/// The SGEs of a kernel WR.
///
/// # Safety
///
/// `list` points to `n` SGEs.
unsafe fn sges(list: *const b::ib_sge, n: u32) -> impl ExactSizeIterator<Item = Sge> + Clone {
    (0..n as usize).map(move |i| {
        // SAFETY: `i < n`, per the function's contract.
        let s = unsafe { &*list.add(i) };
        Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        }
    })
}

/// Writes one kernel send WR into the SQ ring, in librxe's WQE layout, so
/// the requester treats kernel and user QPs alike. Called in any context:
/// nothing here allocates or sleeps.
fn post_one_send(qp: &Qp, sq: &mut Queue, w: &b::ib_send_wr) -> Result {
    let n = w.num_sge as u32;
    if n > qp.max_send_sge {
        return Err(EINVAL);
    }
    // SAFETY: a kernel WR's `sg_list` has `num_sge` entries.
    let list = unsafe { sges(w.sg_list, n) };
    let length = list.clone().fold(0u32, |a, s| a.wrapping_add(s.length));
    let opcode = w.opcode;
    let mut x = wqe::SendWqe {
        // SAFETY: plain union read of the WR id.
        wr_id: unsafe { *w.__bindgen_anon_1.wr_id.as_ref() },
        opcode,
        send_flags: w.send_flags as u32,
        // SAFETY: plain union read (imm_data and invalidate_rkey alias).
        ex: unsafe { *w.ex.imm_data.as_ref() },
        length,
        num_sge: n,
        ..Default::default()
    };
    match opcode {
        wqe::wr::RDMA_WRITE | wqe::wr::RDMA_WRITE_WITH_IMM | wqe::wr::RDMA_READ => {
            // SAFETY: `w` is embedded in an ib_rdma_wr for these opcodes.
            let r = unsafe { &*ptr::from_ref(w).cast::<b::ib_rdma_wr>() };
            x.remote_addr = r.remote_addr;
            x.rkey = r.rkey;
        }
        wqe::wr::ATOMIC_CMP_AND_SWP | wqe::wr::ATOMIC_FETCH_AND_ADD => {
            // SAFETY: `w` is embedded in an ib_atomic_wr for these opcodes.
            let r = unsafe { &*ptr::from_ref(w).cast::<b::ib_atomic_wr>() };
            x.remote_addr = r.remote_addr;
            x.rkey = r.rkey;
            x.compare_add = r.compare_add;
            x.swap = r.swap;
        }
        wqe::wr::REG_MR => {
            // SAFETY: `w` is embedded in an ib_reg_wr for this opcode.
            let r = unsafe { &*ptr::from_ref(w).cast::<b::ib_reg_wr>() };
            if r.mr.is_null() {
                return Err(EINVAL);
            }
            // The MR is named by its key, not by pointer: the requester looks
            // it up, so a WR that outlives its MR finds nothing.
            // SAFETY: the caller's MR, live while the WR is being posted.
            x.mr_key = unsafe { (*r.mr).lkey };
            x.rkey = r.key;
            x.access = r.access as u32;
        }
        _ => {}
    }
    if x.send_flags & wqe::flags::INLINE == 0 {
        return sq.push_with(|slot| wqe::write_send(slot, &x, list));
    }
    // Inline: the bytes travel in the WQE, copied now from the SGEs (kernel
    // virtual addresses: oxe uses virtual DMA).
    if length > qp.max_inline {
        return Err(EINVAL);
    }
    x.num_sge = 0;
    sq.push_with(|slot| {
        wqe::write_send(slot, &x, core::iter::empty())?;
        let mut off = wqe::SEND_WQE_SGE_OFFSET;
        for s in list {
            let len = s.length as usize;
            let dst = slot.get_mut(off..off + len)?;
            // A kernel client's inline SGE names `length` readable bytes at
            // a kernel virtual address (oxe uses virtual DMA).
            // SAFETY: as just said; the bytes are only read, here.
            let src = unsafe { core::slice::from_raw_parts(s.addr as usize as *const u8, len) };
            dst.copy_from_slice(src);
            off += len;
        }
        Some(())
    })
}

/// Kernel receive posting (user QPs write their RQ ring directly).
///
/// # Safety
///
/// Called by the RDMA core for a live kernel QP.
pub(crate) unsafe extern "C" fn post_recv(
    ib: *mut b::ib_qp,
    wr: *const b::ib_recv_wr,
    bad: *mut *const b::ib_recv_wr,
) -> c_int {
    // SAFETY: per the function's contract.
    let Some(qp) = (unsafe { OxeQp::get(ib) }) else {
        return EINVAL.to_errno();
    };
    let mut krq = qp.krq.lock();
    let Some(rq) = (*krq).as_mut() else {
        return EINVAL.to_errno();
    };
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: a kernel WR chain.
        let w = unsafe { &*cur };
        let n = w.num_sge as u32;
        let res = if n > qp.max_recv_sge {
            Err(EINVAL)
        } else {
            // SAFETY: a kernel WR's `sg_list` has `num_sge` entries.
            let list = unsafe { sges(w.sg_list, n) };
            // SAFETY: plain union read of the WR id.
            let wr_id = unsafe { *w.__bindgen_anon_1.wr_id.as_ref() };
            rq.push_with(|slot| wqe::write_recv(slot, wr_id, list))
        };
        if let Err(e) = res {
            if !bad.is_null() {
                // SAFETY: the caller's out pointer.
                unsafe { *bad = cur };
            }
            return e.to_errno();
        }
        cur = w.next;
    }
    0
}
