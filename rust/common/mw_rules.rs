// SPDX-License-Identifier: GPL-2.0

//! Memory windows (IBA 10.6.7): the checks of binding, invalidating and
//! accessing through a window, which need no kernel.
//!
//! A window grants remote rights to a slice of an MR that has MW_BIND. Type 1
//! windows are bound by `ibv_bind_mw` (which librxe turns into a send WQE) and
//! unbound by binding with length 0; type 2 windows are bound by a BIND_MW
//! work request to one QP, and freed by LOCAL_INV or SEND_WITH_INV. The low
//! 8 bits of a window's rkey are chosen by the consumer at every bind.

use crate::access::{self, PdId};
use crate::key;
use crate::mtt::{AccessError, Request};

pub const TYPE_1: u8 = 1;
pub const TYPE_2: u8 = 2;

/// Rights a bind may give: the remote ones, and zero-based addressing
/// (type 2 only). Local rights mean nothing to a window; rxe accepts them and
/// ignores them, and so does oxe.
pub const BIND_ACCESS: u32 = access::SUPPORTED | access::ZERO_BASED;
/// The rights a remote access may need of a window (a FLUSH's too, as rxe's
/// `rxe_lookup_mw` grants them).
const REMOTE: u32 = access::REMOTE_READ
    | access::REMOTE_WRITE
    | access::REMOTE_ATOMIC
    | access::FLUSH_GLOBAL
    | access::FLUSH_PERSISTENT;

/// Whether `k` names a window (windows have an index range of their own, so
/// an MR's key never resolves to a window or the reverse).
pub const fn is_mw(k: u32) -> bool {
    key::index(k) >= key::MW_MIN_INDEX
}

/// A window's binding. `length == 0` is an unbound window (type 1 after
/// alloc or after a zero-length bind; type 2 when free).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Binding {
    /// The key the window answers to now.
    pub key: u32,
    /// VA of the first byte (for zero-based windows too: in the MR's iova
    /// space, where offset 0 of the window lands).
    pub addr: u64,
    pub length: u64,
    pub access: u32,
    /// Type 2: the QP it is bound to, by an identity no later QP gets (a
    /// QPN comes back after the QP is destroyed; rxe holds a reference on
    /// the QP instead).
    pub qp: u64,
}

impl Binding {
    pub const fn bound(&self) -> bool {
        self.length != 0
    }
}

/// The MR a bind names, as the window checks see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrView {
    pub pd: PdId,
    pub access: u32,
    pub iova: u64,
    pub length: u64,
}

/// One BIND_MW work request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bind {
    /// The window's key as the consumer knows it now.
    pub mw_key: u32,
    /// The key it gets: the index stays, the low byte is the consumer's.
    pub new_key: u32,
    pub addr: u64,
    pub length: u64,
    pub access: u32,
}

/// Why a bind is refused: the work request completes with MW_BIND_ERR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BindError {
    /// The key presented is not the window's current one.
    Key,
    /// Type 2 bound already (it must be invalidated first, o10-37.2.30).
    State,
    /// Another PD: a type 2 window's and the QP's (C10-72), or the window's
    /// and the MR's.
    Pd,
    /// Type 2 with no MR or length 0 (o10-37.2.40).
    NoMr,
    /// The MR lacks MW_BIND (C10-73), or is zero-based.
    MrAccess,
    /// Remote write or atomic on an MR without local write (C10-74).
    NeedsLocalWrite,
    /// Not inside the MR (C10-75), or wrapping.
    Range,
    /// Unknown rights, or zero-based on type 1 (o10-36.2.2).
    Access,
}

/// Checks a bind of a window of `mw_type` and PD `mw_pd`, bound now as
/// `cur`, by a QP of `qp_pd`; `mr` is the MR the lkey names (None for a
/// type 1 unbind, length 0). On success, the binding the window gets.
pub fn check_bind(
    mw_type: u8,
    mw_pd: PdId,
    cur: &Binding,
    qp_pd: PdId,
    qp: u64,
    mr: Option<&MrView>,
    b: &Bind,
) -> Result<Binding, BindError> {
    if b.mw_key != cur.key || key::index(b.new_key) != key::index(cur.key) {
        return Err(BindError::Key);
    }
    if b.access & !BIND_ACCESS != 0 {
        return Err(BindError::Access);
    }
    // C10-72 for type 2; rxe lets a QP of another PD bind a type 1 window,
    // which would let any QP of the context move any window.
    if mw_pd != qp_pd {
        return Err(BindError::Pd);
    }
    let zero_based = b.access & access::ZERO_BASED != 0;
    match mw_type {
        TYPE_1 if zero_based => return Err(BindError::Access),
        TYPE_2 if cur.bound() => return Err(BindError::State),
        TYPE_2 if mr.is_none() || b.length == 0 => return Err(BindError::NoMr),
        _ => {}
    }
    let Some(mr) = mr.filter(|_| b.length != 0) else {
        // Type 1 with length 0: unbound, under its new key.
        return Ok(Binding {
            key: b.new_key,
            ..Binding::default()
        });
    };
    if mr.pd != mw_pd {
        return Err(BindError::Pd);
    }
    if mr.access & access::MW_BIND == 0 || mr.access & access::ZERO_BASED != 0 {
        return Err(BindError::MrAccess);
    }
    if b.access & (access::REMOTE_WRITE | access::REMOTE_ATOMIC) != 0
        && mr.access & access::LOCAL_WRITE == 0
    {
        return Err(BindError::NeedsLocalWrite);
    }
    let end = b.addr.checked_add(b.length).ok_or(BindError::Range)?;
    let mr_end = mr.iova.checked_add(mr.length).ok_or(BindError::Range)?;
    if b.addr < mr.iova || end > mr_end {
        return Err(BindError::Range);
    }
    Ok(Binding {
        key: b.new_key,
        addr: b.addr,
        length: b.length,
        access: b.access,
        qp: if mw_type == TYPE_2 { qp } else { 0 },
    })
}

/// Checks a remote access through a window (`req.key` presented by QP
/// `qp` of `req.pd`): the window's PD, QP (type 2), rights and range. On
/// success, the iova in the bound MR where the access starts. rxe checks the
/// range against the MR only; a window's point is its narrower range.
pub fn check_access(
    mw_type: u8,
    mw_pd: PdId,
    cur: &Binding,
    qp: u64,
    req: &Request,
) -> Result<u64, AccessError> {
    if !cur.bound() || req.key != cur.key {
        return Err(AccessError::BadKey);
    }
    if req.pd != mw_pd || (mw_type == TYPE_2 && qp != cur.qp) {
        return Err(AccessError::WrongPd);
    }
    if req.rights & !(cur.access & REMOTE) != 0 {
        return Err(AccessError::NoRight);
    }
    let off = if cur.access & access::ZERO_BASED != 0 {
        req.iova
    } else {
        req.iova
            .checked_sub(cur.addr)
            .ok_or(AccessError::OutOfRange)?
    };
    match off.checked_add(req.len) {
        Some(end) if end <= cur.length => Ok(cur.addr + off),
        _ => Err(AccessError::OutOfRange),
    }
}

/// Checks LOCAL_INV or SEND_WITH_INV of `k` by a QP of `pd`: only a bound
/// type 2 window of that PD, under its current key (o10-37.2.26).
pub fn check_invalidate(mw_type: u8, mw_pd: PdId, cur: &Binding, k: u32, pd: PdId) -> bool {
    mw_type == TYPE_2 && cur.bound() && cur.key == k && mw_pd == pd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::{
        LOCAL_WRITE, MW_BIND, REMOTE_ATOMIC, REMOTE_READ, REMOTE_WRITE, ZERO_BASED,
    };
    use proptest::prelude::*;

    const W: u32 = key::make(key::MW_MIN_INDEX + 5, 0x10);
    const MR: MrView = MrView {
        pd: 3,
        access: LOCAL_WRITE | MW_BIND,
        iova: 0x1000,
        length: 0x1000,
    };

    fn bind(access: u32, addr: u64, length: u64) -> Bind {
        Bind {
            mw_key: W,
            new_key: W + 1,
            addr,
            length,
            access,
        }
    }

    fn unbound() -> Binding {
        Binding {
            key: W,
            ..Binding::default()
        }
    }

    #[test]
    fn key_ranges_are_disjoint() {
        assert!(is_mw(W));
        assert!(!is_mw(key::make(key::MR_MAX_INDEX, 0xff)));
        assert!(is_mw(key::make(key::MAX_INDEX, 0)));
        assert!(!is_mw(0));
    }

    #[test]
    fn type1_bind_unbind() {
        let b = bind(REMOTE_WRITE, 0x1100, 0x100);
        assert_eq!(
            check_bind(TYPE_1, 3, &unbound(), 9, 7, Some(&MR), &b),
            Err(BindError::Pd)
        );
        let b = check_bind(TYPE_1, 3, &unbound(), 3, 7, Some(&MR), &b).unwrap();
        assert_eq!((b.key, b.addr, b.length, b.qp), (W + 1, 0x1100, 0x100, 0));
        // Rebinding a bound type 1 window is fine (it moves).
        let mut again = bind(REMOTE_READ, 0x1000, 0x1000);
        again.mw_key = W + 1;
        again.new_key = W + 2;
        assert!(check_bind(TYPE_1, 3, &b, 3, 7, Some(&MR), &again).is_ok());
        // Length 0 unbinds, under the new key.
        let mut z = bind(0, 0, 0);
        z.mw_key = W + 1;
        let u = check_bind(TYPE_1, 3, &b, 3, 7, None, &z).unwrap();
        assert!(!u.bound());
        assert_eq!(u.key, W + 1);
        // Zero-based is type 2 only.
        assert_eq!(
            check_bind(
                TYPE_1,
                3,
                &unbound(),
                3,
                7,
                Some(&MR),
                &bind(REMOTE_READ | ZERO_BASED, 0x1000, 8)
            ),
            Err(BindError::Access)
        );
    }

    #[test]
    fn type2_rules() {
        let ok = check_bind(
            TYPE_2,
            3,
            &unbound(),
            3,
            7,
            Some(&MR),
            &bind(REMOTE_WRITE, 0x1000, 0x1000),
        )
        .unwrap();
        assert_eq!(ok.qp, 7);
        let mut b2 = bind(REMOTE_WRITE, 0x1000, 8);
        b2.mw_key = W + 1;
        assert_eq!(
            check_bind(TYPE_2, 3, &ok, 3, 7, Some(&MR), &b2),
            Err(BindError::State)
        );
        assert_eq!(
            check_bind(
                TYPE_2,
                3,
                &unbound(),
                4,
                7,
                Some(&MR),
                &bind(REMOTE_WRITE, 0x1000, 8)
            ),
            Err(BindError::Pd)
        );
        assert_eq!(
            check_bind(
                TYPE_2,
                3,
                &unbound(),
                3,
                7,
                Some(&MR),
                &bind(REMOTE_WRITE, 0x1000, 0)
            ),
            Err(BindError::NoMr)
        );
        assert_eq!(
            check_bind(
                TYPE_2,
                3,
                &unbound(),
                3,
                7,
                None,
                &bind(REMOTE_WRITE, 0x1000, 8)
            ),
            Err(BindError::NoMr)
        );
    }

    #[test]
    fn mr_rules() {
        let t = |mr: MrView, b: Bind| check_bind(TYPE_1, 3, &unbound(), 3, 7, Some(&mr), &b);
        let no_bind = MrView {
            access: LOCAL_WRITE,
            ..MR
        };
        assert_eq!(
            t(no_bind, bind(REMOTE_READ, 0x1000, 8)),
            Err(BindError::MrAccess)
        );
        let ro = MrView {
            access: MW_BIND,
            ..MR
        };
        assert_eq!(
            t(ro, bind(REMOTE_WRITE, 0x1000, 8)),
            Err(BindError::NeedsLocalWrite)
        );
        assert_eq!(
            t(ro, bind(REMOTE_ATOMIC, 0x1000, 8)),
            Err(BindError::NeedsLocalWrite)
        );
        assert!(t(ro, bind(REMOTE_READ, 0x1000, 8)).is_ok());
        assert_eq!(t(MR, bind(REMOTE_READ, 0xfff, 8)), Err(BindError::Range));
        assert_eq!(t(MR, bind(REMOTE_READ, 0x1ff9, 8)), Err(BindError::Range));
        assert_eq!(t(MR, bind(REMOTE_READ, u64::MAX, 8)), Err(BindError::Range));
        assert_eq!(
            t(MrView { pd: 4, ..MR }, bind(REMOTE_READ, 0x1000, 8)),
            Err(BindError::Pd)
        );
        assert_eq!(t(MR, bind(1 << 12, 0x1000, 8)), Err(BindError::Access));
        let mut stale = bind(REMOTE_READ, 0x1000, 8);
        stale.mw_key = W + 9;
        assert_eq!(t(MR, stale), Err(BindError::Key));
        let mut moved = bind(REMOTE_READ, 0x1000, 8);
        moved.new_key = key::make(key::MW_MIN_INDEX + 6, 0);
        assert_eq!(t(MR, moved), Err(BindError::Key));
    }

    fn req(key: u32, pd: PdId, iova: u64, len: u64, rights: u32) -> Request {
        Request {
            key,
            pd,
            iova,
            len,
            rights,
        }
    }

    #[test]
    fn access_through_a_window() {
        let w = Binding {
            key: W,
            addr: 0x1100,
            length: 0x100,
            access: REMOTE_WRITE | LOCAL_WRITE,
            qp: 7,
        };
        assert_eq!(
            check_access(TYPE_1, 3, &w, 1, &req(W, 3, 0x1100, 0x100, REMOTE_WRITE)),
            Ok(0x1100)
        );
        assert_eq!(
            check_access(TYPE_1, 3, &w, 1, &req(W, 3, 0x11ff, 1, REMOTE_WRITE)),
            Ok(0x11ff)
        );
        // Inside the MR but outside the window: refused (rxe lets it by).
        assert_eq!(
            check_access(TYPE_1, 3, &w, 1, &req(W, 3, 0x1000, 8, REMOTE_WRITE)),
            Err(AccessError::OutOfRange)
        );
        assert_eq!(
            check_access(TYPE_1, 3, &w, 1, &req(W, 3, 0x11ff, 2, REMOTE_WRITE)),
            Err(AccessError::OutOfRange)
        );
        assert_eq!(
            check_access(TYPE_1, 3, &w, 1, &req(W, 3, 0x1100, 8, REMOTE_READ)),
            Err(AccessError::NoRight)
        );
        assert_eq!(
            check_access(TYPE_1, 3, &w, 1, &req(W + 1, 3, 0x1100, 8, REMOTE_WRITE)),
            Err(AccessError::BadKey)
        );
        assert_eq!(
            check_access(TYPE_1, 4, &w, 1, &req(W, 3, 0x1100, 8, REMOTE_WRITE)),
            Err(AccessError::WrongPd)
        );
        // Type 2: only its QP.
        assert!(check_access(TYPE_2, 3, &w, 7, &req(W, 3, 0x1100, 8, REMOTE_WRITE)).is_ok());
        assert_eq!(
            check_access(TYPE_2, 3, &w, 8, &req(W, 3, 0x1100, 8, REMOTE_WRITE)),
            Err(AccessError::WrongPd)
        );
        // Zero-based: offsets from 0.
        let z = Binding {
            access: REMOTE_READ | ZERO_BASED,
            ..w
        };
        assert_eq!(
            check_access(TYPE_2, 3, &z, 7, &req(W, 3, 0x10, 8, REMOTE_READ)),
            Ok(0x1110)
        );
        assert_eq!(
            check_access(TYPE_2, 3, &z, 7, &req(W, 3, 0xf9, 8, REMOTE_READ)),
            Err(AccessError::OutOfRange)
        );
        // Unbound: nothing.
        assert_eq!(
            check_access(TYPE_1, 3, &unbound(), 1, &req(W, 3, 0, 0, 0)),
            Err(AccessError::BadKey)
        );
        // FLUSH: a window bound with the right grants it (it used to be
        // refused whatever the window's rights, as rxe's never is).
        let f = Binding {
            access: REMOTE_WRITE | crate::access::FLUSH_GLOBAL,
            ..w
        };
        let flush = crate::access::FLUSH_GLOBAL;
        assert_eq!(
            check_access(TYPE_1, 3, &f, 1, &req(W, 3, 0x1100, 8, flush)),
            Ok(0x1100)
        );
        assert_eq!(
            check_access(TYPE_1, 3, &w, 1, &req(W, 3, 0x1100, 8, flush)),
            Err(AccessError::NoRight)
        );
    }

    #[test]
    fn invalidation() {
        let w = Binding {
            key: W,
            addr: 0x1000,
            length: 8,
            access: REMOTE_READ,
            qp: 7,
        };
        assert!(check_invalidate(TYPE_2, 3, &w, W, 3));
        assert!(!check_invalidate(TYPE_1, 3, &w, W, 3));
        assert!(!check_invalidate(TYPE_2, 3, &w, W + 1, 3));
        assert!(!check_invalidate(TYPE_2, 3, &w, W, 4));
        assert!(!check_invalidate(TYPE_2, 3, &unbound(), W, 3));
    }

    proptest! {
        /// Whatever the window and the request, an access allowed lands
        /// inside the window and inside the MR it was bound in.
        #[test]
        fn allowed_access_stays_inside(
            addr in 0u64..0x10000, length in 1u64..0x10000, zb: bool,
            iova: u64, len in 0u64..0x20000,
        ) {
            let mr = MrView { pd: 1, access: LOCAL_WRITE | MW_BIND, iova: 0, length: 0x20000 };
            let b = Bind {
                mw_key: W,
                new_key: W,
                addr,
                length,
                access: REMOTE_READ | if zb { ZERO_BASED } else { 0 },
            };
            let w = check_bind(TYPE_2, 1, &unbound(), 1, 2, Some(&mr), &b).unwrap();
            if let Ok(at) = check_access(TYPE_2, 1, &w, 2, &req(W, 1, iova, len, REMOTE_READ)) {
                prop_assert!(at >= addr && at + len <= addr + length);
                prop_assert!(at + len <= mr.iova + mr.length);
            }
        }
    }
}
