// SPDX-License-Identifier: GPL-2.0

//! Scatter/gather lists of a WQE, each SGE checked against its MR (key, PD,
//! range, rights) before any byte moves, and kept referenced while the
//! message is in flight.

use kernel::prelude::*;

use crate::access::PdId;
use crate::bindings as b;
use crate::mr::{self, Keys, MrRef};
use crate::mtt::Request;
use crate::wqe;

struct Seg {
    mr: MrRef,
    addr: u64,
    len: u64,
}

pub(crate) struct Sgl {
    segs: KVec<Seg>,
    pub(crate) total: u64,
}

impl Sgl {
    /// Checks SGEs `0..num` of the WQE copy `w` (array at `base`) for
    /// `rights` in `pd`. On failure, the work completion status to report.
    pub(crate) fn build(
        keys: &Keys,
        pd: PdId,
        w: &[u8],
        base: usize,
        num: u32,
        rights: u32,
    ) -> Result<Sgl, u32> {
        let mut segs = KVec::with_capacity(num as usize, GFP_KERNEL)
            .map_err(|_| b::ib_wc_status_IB_WC_LOC_QP_OP_ERR)?;
        let mut total = 0u64;
        for i in 0..num {
            let s = wqe::sge(w, base, i).ok_or(b::ib_wc_status_IB_WC_LOC_LEN_ERR)?;
            if s.length == 0 {
                continue;
            }
            let m = mr::lookup(keys, s.lkey).ok_or(b::ib_wc_status_IB_WC_LOC_PROT_ERR)?;
            let req = Request {
                key: s.lkey,
                pd,
                iova: s.addr,
                len: s.length.into(),
                rights,
            };
            if m.check(&req).is_err() {
                return Err(b::ib_wc_status_IB_WC_LOC_PROT_ERR);
            }
            total += u64::from(s.length);
            segs.push(
                Seg {
                    mr: m,
                    addr: s.addr,
                    len: s.length.into(),
                },
                GFP_KERNEL,
            )
            .map_err(|_| b::ib_wc_status_IB_WC_LOC_QP_OP_ERR)?;
        }
        Ok(Sgl { segs, total })
    }

    /// Runs `f(seg, offset in seg, range of the buffer)` over the SGEs that
    /// hold message bytes `[off, off + len)`.
    fn walk(
        &self,
        off: u64,
        len: usize,
        mut f: impl FnMut(&Seg, u64, core::ops::Range<usize>) -> bool,
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
            if !f(s, skip, done..done + n) {
                return false;
            }
            done += n;
            skip = 0;
        }
        done == len
    }

    /// Appends message bytes `[off, off + len)` to `v`, which must have the
    /// room: a packet's payload, filled without zeroing it first.
    pub(crate) fn append(&self, off: u64, len: usize, v: &mut KVec<u8>) -> bool {
        self.walk(off, len, |s, o, r| {
            s.mr.append_to(s.addr + o, r.len() as u64, v)
        })
    }

    /// Places `data` at message offset `off` in the SGEs.
    pub(crate) fn scatter(&self, off: u64, data: &[u8]) -> bool {
        self.walk(off, data.len(), |s, o, r| {
            data.get(r).is_some_and(|d| s.mr.write(s.addr + o, d))
        })
    }

    /// The first SGE, for atomics' 8-byte result.
    pub(crate) fn first(&self) -> Option<(&MrRef, u64, u64)> {
        self.segs.first().map(|s| (&s.mr, s.addr, s.len))
    }
}
