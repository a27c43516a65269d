// SPDX-License-Identifier: GPL-2.0

//! Memory windows: remote access to a slice of an MR, granted and revoked
//! without re-registering. A window is keyed like an MR, in a table of its
//! own whose indices never meet an MR's (`key::MW_MIN_INDEX`), so an rkey
//! names one or the other by its value alone. Binding and invalidation run
//! in the send task, in WQE order (`req.rs`); the responder resolves an
//! rkey through the window to the bound MR on every access (`resp.rs`).
//! The rules are in `common/mw.rs`; the entry points in `ffi/mw.rs`.

use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::types::Opaque;

use crate::access::PdId;
use crate::bindings as b;
use crate::ib;
use crate::irqlock::{new_irq_spinlock, IrqSpinLock};
use crate::keys::Refs;
use crate::mr::{self, MrRef};
use crate::mtt::Request;
use crate::mw_rules::{self as rules, Bind, Binding};
use crate::wqe::SendWqe;

/// What a window is bound to now.
struct State {
    bind: Binding,
    /// The MR of a bound window, referenced (and counted in its
    /// `windows`) until the window is unbound, invalidated or freed.
    mr: Option<MrRef>,
}

/// One window. Allocated by oxe, published in the device's window table,
/// freed an RCU grace period after `dealloc_mw`, as an MR is.
#[pin_data]
pub(crate) struct Window {
    mw_type: u8,
    pd: PdId,
    /// The key it answers to now (a bind changes its low byte).
    key: Atomic<u32>,
    #[pin]
    state: IrqSpinLock<State>,
    #[pin]
    refs: Refs,
    rcu: Opaque<b::callback_head>,
}

/// A device's window table: rkey -> window.
pub(crate) type Windows = crate::keys::KeyTable<Window>;

/// The core allocates it (`size_ib_mw`); `win` is written in place by
/// `alloc_mw` and dropped in place by `dealloc_mw`.
#[repr(C)]
pub(crate) struct OxeMw {
    ib: Opaque<b::ib_mw>,
    pub(crate) win: WinPtr,
}
ib::core_object!(OxeMw, ib: b::ib_mw, win: WinPtr);

/// The window of an `OxeMw`, which owns the table's reference on it.
pub(crate) struct WinPtr(pub(crate) core::ptr::NonNull<Window>);

impl Window {
    /// A new window of `mw_type` (1 or 2) in `pd`, with the table's
    /// reference and no key yet; EINVAL for any other type.
    pub(crate) fn new(mw_type: u32, pd: PdId) -> Result<impl PinInit<Self, Error>> {
        let mw_type = match mw_type {
            b::ib_mw_type_IB_MW_TYPE_1 => rules::TYPE_1,
            b::ib_mw_type_IB_MW_TYPE_2 => rules::TYPE_2,
            _ => return Err(EINVAL),
        };
        Ok(try_pin_init!(Window {
            mw_type,
            pd,
            key: Atomic::new(0),
            state <- new_irq_spinlock!(
                State {
                    bind: Binding::default(),
                    mr: None,
                },
                "oxe_mw"
            ),
            refs <- Refs::new(),
            rcu: Opaque::uninit(),
        }? Error))
    }

    pub(crate) fn key(&self) -> u32 {
        self.key.load(ordering::Relaxed)
    }

    /// Gives a new window its key, before it is published under it.
    pub(crate) fn assign_key(&self, key: u32) {
        self.key.store(key, ordering::Relaxed);
        self.state.lock().bind.key = key;
    }

    /// Takes a reference unless the window is being freed.
    pub(crate) fn try_ref(&self) -> bool {
        self.refs.try_get()
    }

    pub(crate) fn unref(&self) {
        self.refs.put()
    }

    /// `dealloc_mw`, once the key is gone: drops the table's reference
    /// (the caller's), waits out the data path, then lets go of the MR.
    pub(crate) fn retire(&self) {
        self.refs.put_and_wait();
        let mr = self.state.lock().mr.take();
        if let Some(m) = mr {
            m.unbind_window();
        }
    }

    pub(crate) fn rcu_head(&self) -> *mut b::callback_head {
        self.rcu.get()
    }

    pub(crate) const RCU_OFFSET: usize = core::mem::offset_of!(Window, rcu);

    /// Applies a checked bind: the window moves to `new`, on `mr` if bound.
    fn bind(&self, qp_pd: PdId, qp: u64, mr: Option<MrRef>, b: &Bind) -> bool {
        // Only an MR of the window's PD, bound by a QP of that PD, is
        // counted: a key of another process's window and MR must not make
        // the MR's dereg_mr fail with EBUSY, even for a moment. Once
        // counted, its PD and rights are read again for the checks: a
        // re-registration (which freezes the count) then either failed with
        // EBUSY or is over. The MR refuses a new window once its
        // deregistration began.
        let mr = match mr {
            Some(_) if qp_pd != self.pd => return false,
            Some(m) if m.window_view().is_none_or(|v| v.pd != self.pd) => return false,
            Some(m) if !m.bind_window() => return false,
            m => m,
        };
        let view = mr.as_ref().and_then(MrRef::window_view);
        let mut st = self.state.lock();
        let checked = match (&mr, &view) {
            (Some(_), None) => None,
            _ => {
                rules::check_bind(self.mw_type, self.pd, &st.bind, qp_pd, qp, view.as_ref(), b).ok()
            }
        };
        let Some(new) = checked else {
            if let Some(m) = mr {
                m.unbind_window();
            }
            return false;
        };
        // A bind names an MR exactly when it binds (length 0 unbinds).
        if let Some(old) = core::mem::replace(&mut st.mr, mr) {
            old.unbind_window();
        }
        st.bind = new;
        self.key.store(new.key, ordering::Relaxed);
        true
    }

    /// LOCAL_INV or SEND_WITH_INV of `k` by a QP of `pd`.
    fn invalidate(&self, k: u32, pd: PdId) -> bool {
        let mut st = self.state.lock();
        if !rules::check_invalidate(self.mw_type, self.pd, &st.bind, k, pd) {
            return false;
        }
        st.bind = Binding {
            key: st.bind.key,
            ..Binding::default()
        };
        if let Some(old) = st.mr.take() {
            old.unbind_window();
        }
        true
    }

    /// Whether the window grants `req` to QP `qp` whatever its range: a
    /// FLUSH of the whole MR names none (rxe skips the range check).
    fn grants(&self, qp: u64, req: &Request) -> bool {
        let st = self.state.lock();
        let start = Request {
            iova: if st.bind.access & crate::access::ZERO_BASED != 0 {
                0
            } else {
                st.bind.addr
            },
            len: 0,
            ..*req
        };
        rules::check_access(self.mw_type, self.pd, &st.bind, qp, &start).is_ok()
    }

    /// A remote access through the window by QP `qp` (`Qp::uid`): the bound MR and
    /// where in it the access lands, if the window grants it.
    fn resolve(&self, qp: u64, req: &Request) -> Option<(MrRef, u64)> {
        let st = self.state.lock();
        let at = rules::check_access(self.mw_type, self.pd, &st.bind, qp, req).ok()?;
        let m = st.mr.as_ref()?.try_clone()?;
        drop(st);
        m.check_range(at, req.len).then_some((m, at))
    }
}

/// BIND_MW by QP `qp` (`Qp::uid`) of `pd` (the send task, in WQE order):
/// false completes the WQE with MW_BIND_ERR.
pub(crate) fn bind(mws: &Windows, keys: &mr::Keys, pd: PdId, qp: u64, w: &SendWqe) -> bool {
    let b = &w.bind;
    let Some(win) = mws.get(b.mw_key) else {
        return false;
    };
    let mr = if b.length != 0 {
        match mr::lookup(keys, w.bind_mr_key) {
            Some(m) => Some(m),
            None => return false,
        }
    } else {
        None
    };
    win.bind(pd, qp, mr, b)
}

/// LOCAL_INV and SEND_WITH_INV of `k` by a QP of `pd`: a type 2 window
/// or a fast-registration MR, which its key alone tells apart.
pub(crate) fn invalidate(keys: &mr::Keys, mws: &Windows, k: u32, pd: PdId) -> bool {
    if rules::is_mw(k) {
        mws.get(k).is_some_and(|w| w.invalidate(k, pd))
    } else {
        mr::invalidate(keys, k, pd)
    }
}

/// Resolves a window's rkey (`req.key`) for a remote access by QP `qp`.
pub(crate) fn resolve(mws: &Windows, qp: u64, req: &Request) -> Option<(MrRef, u64)> {
    mws.get(req.key)?.resolve(qp, req)
}

/// Whether a window's rkey (`req.key`) grants `req` to QP `qp`, its range
/// aside (a FLUSH of the whole MR).
pub(crate) fn grants(mws: &Windows, qp: u64, req: &Request) -> bool {
    mws.get(req.key).is_some_and(|w| w.grants(qp, req))
}
