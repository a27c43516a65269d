// SPDX-License-Identifier: GPL-2.0

//! oxe's own workqueue, where every QP's send, receive and timer work runs
//! (rdma_rxe has rxe_wq). Created at module load and destroyed at module exit,
//! after every device (and so every QP, whose destroy flushes its work) is
//! gone: no work item of oxe outlives the module, and none shares a system
//! queue with the rest of the kernel.

use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use kernel::prelude::*;
use kernel::workqueue;

use crate::bindings as b;

static WQ: AtomicPtr<b::workqueue_struct> = AtomicPtr::new(ptr::null_mut());

/// Owns the workqueue; dropping it destroys the queue (draining it first).
pub(crate) struct Wq(());

impl Wq {
    pub(crate) fn create() -> Result<Wq> {
        // SAFETY: process context, module init.
        let wq = unsafe { b::oxe_alloc_wq() };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        WQ.store(wq, Ordering::Release);
        Ok(Wq(()))
    }
}

impl Drop for Wq {
    fn drop(&mut self) {
        let wq = WQ.swap(ptr::null_mut(), Ordering::AcqRel);
        if !wq.is_null() {
            // SAFETY: allocated in `create`; nothing queues work any more (no
            // device is left), and destroy_workqueue drains what is queued.
            unsafe { b::destroy_workqueue(wq) };
        }
    }
}

/// The queue, for as long as the module is loaded.
pub(crate) fn queue() -> Option<&'static workqueue::Queue> {
    let wq = WQ.load(Ordering::Acquire);
    // SAFETY: a live workqueue until module exit, which comes after every
    // user of it (the QPs) is gone.
    (!wq.is_null()).then(|| unsafe { workqueue::Queue::from_raw(wq) })
}

/// Jiffies for a delay in nanoseconds, at least one.
pub(crate) fn jiffies(ns: u64) -> kernel::time::Jiffies {
    // SAFETY: a pure conversion.
    unsafe { b::oxe_nsecs_to_jiffies(ns) }
}
