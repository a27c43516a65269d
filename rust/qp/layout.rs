// SPDX-License-Identifier: GPL-2.0

//! The parsers and writers in common/wqe.rs have rxe's layout written out
//! (they also build on the host, without bindings). Every offset they use, and
//! the width they read or write there, is checked here against bindgen's
//! layout of rdma_user_rxe.h: the module does not build if one drifts.

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
type WrFlush = b::rxe_send_wr__bindgen_ty_2__bindgen_ty_1;
type WrUd = b::rxe_send_wr__bindgen_ty_2__bindgen_ty_4;
type WrMw = b::rxe_send_wr__bindgen_ty_2__bindgen_ty_5;
type WrReg = b::rxe_send_wr__bindgen_ty_2__bindgen_ty_6;
type DmaUnion = b::rxe_dma_info__bindgen_ty_1;
type DmaInline = b::rxe_dma_info__bindgen_ty_1__bindgen_ty_1;
type DmaSges = b::rxe_dma_info__bindgen_ty_1__bindgen_ty_3;

const _: fn(&WrUnion) -> &b::__BindgenUnionField<WrRdma> = |u| &u.rdma;
const _: fn(&WrUnion) -> &b::__BindgenUnionField<WrAtomic> = |u| &u.atomic;
const _: fn(&WrUnion) -> &b::__BindgenUnionField<WrFlush> = |u| &u.flush;
const _: fn(&WrUnion) -> &b::__BindgenUnionField<WrUd> = |u| &u.ud;
const _: fn(&WrUnion) -> &b::__BindgenUnionField<WrMw> = |u| &u.mw;
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
const FLUSH: usize = WR + offset_of!(WrUnion, flush);
const UD: usize = WR + offset_of!(WrUnion, ud);
const MW: usize = WR + offset_of!(WrUnion, mw);
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
    field!(l::FLUSH_REMOTE_ADDR, FLUSH, WrFlush, remote_addr, 8);
    field!(l::FLUSH_LENGTH, FLUSH, WrFlush, length, 4);
    field!(l::FLUSH_RKEY, FLUSH, WrFlush, rkey, 4);
    field!(l::FLUSH_TYPE, FLUSH, WrFlush, type_, 1);
    field!(l::FLUSH_LEVEL, FLUSH, WrFlush, level, 1);
    field!(l::UD_REMOTE_QPN, UD, WrUd, remote_qpn, 4);
    field!(l::UD_REMOTE_QKEY, UD, WrUd, remote_qkey, 4);
    field!(l::UD_AH_NUM, UD, WrUd, ah_num, 4);
    field!(l::MW_ADDR, MW, WrMw, addr, 8);
    field!(l::MW_LENGTH, MW, WrMw, length, 8);
    field!(l::MW_MR_LKEY, MW, WrMw, mr_lkey, 4);
    field!(l::MW_MW_RKEY, MW, WrMw, mw_rkey, 4);
    field!(l::MW_RKEY, MW, WrMw, rkey, 4);
    field!(l::MW_ACCESS, MW, WrMw, access, 4);
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
