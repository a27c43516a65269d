// SPDX-License-Identifier: GPL-2.0

//! Scatter/gather lists of a WQE. Each SGE is checked against its MR (key,
//! PD, range, rights) when the WQE is taken, so a bad one fails before any
//! byte moves, and again at every copy: the list keeps keys, not MR
//! references. A WQE in flight (or a message half received) may wait for its
//! peer indefinitely (an ACK timeout of 0 waits forever), and an MR
//! reference held that long would make its `dereg_mr` wait as long: at
//! process exit the core deregisters MRs before it destroys the QPs, so the
//! exit would hang. References are held only for the length of a copy, as
//! rxe looks its MRs up per packet.

use kernel::alloc::KVVec;
use kernel::prelude::*;

use crate::access::PdId;
use crate::bindings as b;
use crate::mr::{self, Keys, MrRef, Src, PAGE_SIZE};
use crate::mtt::Request;
use crate::pkt::{Gather, Payload};
use crate::wqe;

struct Seg {
    key: u32,
    addr: u64,
    len: u64,
}

pub(crate) struct Sgl {
    segs: KVec<Seg>,
    pd: PdId,
    rights: u32,
    pub(crate) total: u64,
}

/// Whether `m` (named by `key`) allows `[iova, iova + len)` with `rights`
/// in `pd`.
fn allows(m: &MrRef, key: u32, pd: PdId, iova: u64, len: u64, rights: u32) -> bool {
    let req = Request {
        key,
        pd,
        iova,
        len,
        rights,
    };
    m.check(&req).is_ok()
}

/// Looks `key` up and checks it for `[iova, iova + len)` with `rights` in
/// `pd`: the MR, referenced for as long as the caller holds the result.
pub(crate) fn checked(
    keys: &Keys,
    key: u32,
    pd: PdId,
    iova: u64,
    len: u64,
    rights: u32,
) -> Option<MrRef> {
    let m = mr::lookup(keys, key)?;
    allows(&m, key, pd, iova, len, rights).then_some(m)
}

/// The MR a task's run last used, reused for the following packets of that
/// run (a lookup is an RCU walk and two atomic operations per packet). It
/// lives in the run's stack frame, so no reference outlives a run, and the
/// access is still checked for every packet: a key that changed (fast
/// registration), a right taken away (rereg) or an invalidation is seen.
pub(crate) struct MrCache {
    key: u32,
    mr: Option<MrRef>,
}

impl MrCache {
    pub(crate) const fn new() -> Self {
        MrCache { key: 0, mr: None }
    }

    /// As [`checked`], with the MR of the previous call reused if the key is
    /// the same.
    pub(crate) fn checked(
        &mut self,
        keys: &Keys,
        key: u32,
        pd: PdId,
        iova: u64,
        len: u64,
        rights: u32,
    ) -> Option<&MrRef> {
        if self.mr.is_none() || self.key != key {
            self.mr = mr::lookup(keys, key);
            self.key = key;
        }
        let m = self.mr.as_ref()?;
        allows(m, key, pd, iova, len, rights).then_some(m)
    }
}

impl MrCache {
    /// Keeps `m` (resolved through a window) for the caller, and for no
    /// later call: key 0 names no MR, so the next `checked` looks up anew.
    pub(crate) fn hold(&mut self, m: MrRef) -> &MrRef {
        self.key = 0;
        self.mr.insert(m)
    }
}

/// Not a work completion status: an SGE list found no memory. The
/// requester takes its WQE again shortly; a receive completes with
/// LOC_QP_OP_ERR ([`recv_status`]).
pub(crate) const NO_MEMORY: u32 = u32::MAX;

/// `status` from [`Sgl::build`] as a receive completes with it.
pub(crate) fn recv_status(status: u32) -> u32 {
    if status == NO_MEMORY {
        b::ib_wc_status_IB_WC_LOC_QP_OP_ERR
    } else {
        status
    }
}

impl Sgl {
    /// Checks SGEs `0..num` of the WQE copy `w` (array at `base`) for
    /// `rights` in `pd`. On failure, the work completion status to report,
    /// or [`NO_MEMORY`].
    pub(crate) fn build(
        keys: &Keys,
        pd: PdId,
        w: &[u8],
        base: usize,
        num: u32,
        rights: u32,
    ) -> Result<Sgl, u32> {
        Self::parse(Some(keys), pd, w, base, num, rights)
    }

    /// A receive's buffers, SGEs `0..num` of `w` (array at `base`), for
    /// local write in `pd`: each is looked up when bytes reach it (`walk`),
    /// as rxe's `copy_data` does, so one that no byte reaches may name no
    /// MR. On failure, the work completion status, or [`NO_MEMORY`].
    pub(crate) fn receive(pd: PdId, w: &[u8], base: usize, num: u32) -> Result<Sgl, u32> {
        Self::parse(None, pd, w, base, num, crate::access::LOCAL_WRITE)
    }

    fn parse(
        keys: Option<&Keys>,
        pd: PdId,
        w: &[u8],
        base: usize,
        num: u32,
        rights: u32,
    ) -> Result<Sgl, u32> {
        let mut segs = KVec::with_capacity(num as usize, GFP_KERNEL).map_err(|_| NO_MEMORY)?;
        let mut total = 0u64;
        for i in 0..num {
            let s = wqe::sge(w, base, i).ok_or(b::ib_wc_status_IB_WC_LOC_LEN_ERR)?;
            if s.length == 0 {
                continue;
            }
            if let Some(keys) = keys {
                checked(keys, s.lkey, pd, s.addr, s.length.into(), rights)
                    .ok_or(b::ib_wc_status_IB_WC_LOC_PROT_ERR)?;
            }
            total += u64::from(s.length);
            segs.push(
                Seg {
                    key: s.lkey,
                    addr: s.addr,
                    len: s.length.into(),
                },
                GFP_KERNEL,
            )
            .map_err(|_| NO_MEMORY)?;
        }
        Ok(Sgl {
            segs,
            pd,
            rights,
            total,
        })
    }

    /// No buffers: a receive a WRITE with immediate consumes, whose SGEs
    /// no byte reaches and so are not looked at (as rxe).
    pub(crate) fn none(pd: PdId) -> Sgl {
        Sgl {
            segs: KVec::new(),
            pd,
            rights: 0,
            total: 0,
        }
    }

    /// Runs `f(mr, iova, range of the buffer)` over the SGEs that hold
    /// message bytes `[off, off + len)`, each MR looked up and checked again
    /// for its part. False if one is gone or no longer allows it.
    fn walk(
        &self,
        keys: &Keys,
        cache: &mut MrCache,
        off: u64,
        len: usize,
        mut f: impl FnMut(&MrRef, u64, core::ops::Range<usize>) -> bool,
    ) -> bool {
        let mut skip = off;
        let mut done = 0usize;
        for s in self.segs.iter() {
            if done == len {
                break;
            }
            if skip >= s.len {
                skip -= s.len;
                continue;
            }
            let n = ((s.len - skip) as usize).min(len - done);
            let iova = s.addr + skip;
            let Some(m) = cache.checked(keys, s.key, self.pd, iova, n as u64, self.rights) else {
                return false;
            };
            if !f(m, iova, done..done + n) {
                return false;
            }
            done += n;
            skip = 0;
        }
        done == len
    }

    /// Message bytes `[off, off + len)` as a packet's payload: references on
    /// the pages of user MRs if `by_ref`, else (and for kernel memory) a copy.
    pub(crate) fn gather(
        &self,
        keys: &Keys,
        cache: &mut MrCache,
        off: u64,
        len: usize,
        by_ref: bool,
    ) -> Result<Payload, Gather> {
        if by_ref && len > 0 {
            // A part of an SGE of `n` bytes touches at most n / PAGE_SIZE + 2
            // pages; with too little room the bytes are copied instead.
            let parts = self.segs.len().min(len);
            let cap = len / PAGE_SIZE as usize + 2 * parts;
            let mut refs = KVec::with_capacity(cap, GFP_KERNEL).map_err(|_| Gather::NoMem)?;
            if self.walk(keys, cache, off, len, |m, iova, r| {
                m.page_refs(iova, r.len() as u64, &mut refs)
            }) {
                return Ok(Payload::Pages {
                    refs,
                    len,
                    _mr: None,
                });
            }
        }
        // Kernel memory, or a check that failed (and fails again here).
        let mut v = KVVec::with_capacity(len, GFP_KERNEL).map_err(|_| Gather::NoMem)?;
        if self.walk(keys, cache, off, len, |m, iova, r| {
            m.append_to(iova, r.len() as u64, &mut v)
        }) {
            Ok(Payload::Bytes(v))
        } else {
            Err(Gather::Access)
        }
    }

    /// Places the bytes of `src` at message offset `off` in the SGEs.
    pub(crate) fn scatter(&self, keys: &Keys, cache: &mut MrCache, off: u64, src: Src<'_>) -> bool {
        self.walk(keys, cache, off, src.len(), |m, iova, r| {
            m.write(iova, src, r.start, r.len())
        })
    }

    /// The length of the first SGE, for atomics' 8-byte result.
    pub(crate) fn first_len(&self) -> Option<u64> {
        self.segs.first().map(|s| s.len)
    }
}
