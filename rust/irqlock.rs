// SPDX-License-Identifier: GPL-2.0

//! A spinlock that disables interrupts while held (`spin_lock_irqsave`), for
//! state that kernel clients reach from softirq or hard-irq context: they
//! post work requests and poll CQs from completion handlers and under their
//! own spinlocks. The kernel crate of this kernel has only the plain
//! `SpinLock`; this backend plugs into its generic `Lock`.

use kernel::ffi::{c_char, c_ulong};
use kernel::sync::lock::{Backend, Lock};

use crate::bindings as b;

pub(crate) struct IrqSaveBackend;

/// A lock whose guard holds the saved interrupt state.
pub(crate) type IrqSpinLock<T> = Lock<T, IrqSaveBackend>;

/// Creates an [`IrqSpinLock`] with its own lockdep class, like `new_spinlock!`.
macro_rules! new_irq_spinlock {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::irqlock::IrqSpinLock::new(
            $inner,
            ::kernel::optional_name!($($name)?),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_irq_spinlock;

// `unlock` restores the interrupt state `lock` saved.
// SAFETY: a `spinlock_t` taken with interrupts disabled excludes all others.
unsafe impl Backend for IrqSaveBackend {
    type State = b::spinlock_t;
    type GuardState = c_ulong;

    unsafe fn init(ptr: *mut Self::State, name: *const c_char, key: *mut b::lock_class_key) {
        // SAFETY: the caller gives valid memory, a name and a key that live forever.
        unsafe { b::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: `ptr` is an initialised spinlock (the trait's contract).
        unsafe { b::oxe_spin_lock_irqsave(ptr) }
    }

    unsafe fn try_lock(ptr: *mut Self::State) -> Option<Self::GuardState> {
        let mut flags = 0;
        // SAFETY: as for `lock`; `flags` is written on success.
        (unsafe { b::oxe_spin_trylock_irqsave(ptr, &mut flags) }).then_some(flags)
    }

    unsafe fn unlock(ptr: *mut Self::State, flags: &Self::GuardState) {
        // SAFETY: the caller holds the lock, taken with these saved flags.
        unsafe { b::oxe_spin_unlock_irqrestore(ptr, *flags) }
    }

    unsafe fn assert_is_held(ptr: *mut Self::State) {
        // SAFETY: `ptr` is an initialised spinlock.
        unsafe { b::spin_assert_is_held(ptr) }
    }
}

/// Runs `f` with bottom halves disabled: for state that softirq (the wire's
/// receive) also reaches under a plain spinlock, such as the QP table's
/// xarray, so that softirq never interrupts a holder on its CPU.
pub(crate) fn without_bh<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: balanced below; `f` cannot sleep (BH disabled is atomic context, which the callers' closures respect: no sleeping allocation).
    unsafe { b::oxe_local_bh_disable() };
    let r = f();
    // SAFETY: disabled above, on this CPU.
    unsafe { b::oxe_local_bh_enable() };
    r
}
