// SPDX-License-Identifier: GPL-2.0

//! oxe's own workqueue, where every QP's send, receive and timer work runs
//! (rdma_rxe has rxe_wq). Created at module load and destroyed at module exit,
//! after every device (and so every QP, whose destroy flushes its work) is
//! gone: no work item of oxe outlives the module, and none shares a system
//! queue with the rest of the kernel.

use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use kernel::prelude::*;
use kernel::sync::atomic::{ordering, Atomic};
use kernel::workqueue::{self, DelayedWork, RawDelayedWorkItem, RawWorkItem, Work};

use crate::bindings as b;

static WQ: AtomicPtr<b::workqueue_struct> = AtomicPtr::new(ptr::null_mut());
static NORMAL: AtomicPtr<b::workqueue_struct> = AtomicPtr::new(ptr::null_mut());

/// Owns the workqueues (high priority, and normal for `yield_ms`); dropping
/// it destroys them (draining them first).
pub(crate) struct Wq(());

impl Wq {
    pub(crate) fn create() -> Result<Wq> {
        // SAFETY: process context, module init.
        let wq = unsafe { b::oxe_alloc_wq() };
        if wq.is_null() {
            return Err(ENOMEM);
        }
        // SAFETY: process context, module init.
        let normal = unsafe { b::oxe_alloc_normal_wq() };
        if normal.is_null() {
            // SAFETY: allocated just above, nothing queued on it yet.
            unsafe { b::destroy_workqueue(wq) };
            return Err(ENOMEM);
        }
        // SAFETY: module init, before anything is queued.
        unsafe { b::oxe_help_init(*crate::module_parameters::help_linger_us.value()) };
        WQ.store(wq, Ordering::Release);
        NORMAL.store(normal, Ordering::Release);
        Ok(Wq(()))
    }
}

impl Drop for Wq {
    fn drop(&mut self) {
        for q in [&WQ, &NORMAL] {
            let wq = q.swap(ptr::null_mut(), Ordering::AcqRel);
            if !wq.is_null() {
                // SAFETY: allocated in `create`; nothing queues work any more (no device is left), and destroy_workqueue drains what is queued.
                unsafe { b::destroy_workqueue(wq) };
            }
        }
    }
}

/// The queue, for as long as the module is loaded.
pub(crate) fn queue() -> Option<&'static workqueue::Queue> {
    loaded(&WQ)
}

/// The normal-priority queue, for the turns of a task that has kept its CPU
/// busy (`yield_ms`).
pub(crate) fn normal() -> Option<&'static workqueue::Queue> {
    loaded(&NORMAL)
}

fn loaded(q: &AtomicPtr<b::workqueue_struct>) -> Option<&'static workqueue::Queue> {
    let wq = q.load(Ordering::Acquire);
    // SAFETY: a live workqueue until module exit, which comes after every user of it (the QPs) is gone.
    (!wq.is_null()).then(|| unsafe { workqueue::Queue::from_raw(wq) })
}

/// How long a task may keep requeueing itself on the high-priority queue
/// before it goes on at normal priority (`yield_ms`; 0: always high).
pub(crate) fn yield_after_ns() -> u64 {
    u64::from(*crate::module_parameters::yield_ms.value()) * 1_000_000
}

/// The CPU a QP's tasks run on with `qp_spread`: QPs in turn over the
/// online CPUs. None without it (a task runs where it was queued).
pub(crate) fn home_cpu(qpn: u32) -> Option<i32> {
    if *crate::module_parameters::qp_spread.value() == 0 {
        return None;
    }
    // SAFETY: reads the online mask.
    Some(unsafe { b::oxe_spread_cpu(qpn) } as i32)
}

/// An idle CPU beside the current one, when a process's system call (a
/// post) hands work to a QP, with `peer_away`: the peer's responder then
/// runs there while the poster goes on posting, instead of preempting it at
/// the system call's exit. None when every other CPU is busy (a peer
/// polling for the answer, as in a latency test: the hand-over then costs a
/// preemption of that CPU, which staying here avoids).
///
/// Work a worker queues stays on its CPU, unless `worker_too` and another
/// task waits for that CPU (the poster, preempted by the worker): then it
/// goes to an idle CPU if there is one. The send task is queued so (its
/// completer copies READ responses): on the poster's CPU the copy shared
/// it with the poster's posts and polls while the other CPU idled a third
/// of the time. Moving it gave READ 64 KiB and 1 MiB 1.16-1.22x, and four
/// QPs, which keep both CPUs busy, 0.95x.
///
/// A request of `away_bytes` of payload or more (`bytes`) goes to another
/// CPU even when it is busy: the copy is worth the preemption, and the
/// process there is often the receiver polling for it (ib_send_bw's
/// server), while staying here takes the poster's CPU for the copy and
/// preempts the poster for every message (three context switches a message
/// for 4 KiB SENDs).
pub(crate) fn away_cpu_for(bytes: usize, worker_too: bool) -> Option<i32> {
    if *crate::module_parameters::peer_away.value() == 0 {
        return None;
    }
    let min = *crate::module_parameters::away_bytes.value() as usize;
    // SAFETY: reads the current context, the online mask and, under RCU, each CPU's current task.
    let cpu = unsafe { b::oxe_idle_cpu_beside(min > 0 && bytes >= min, worker_too) };
    (cpu >= 0).then_some(cpu)
}

/// The size from which a copy is shared with a helper (`help_bytes`; 0:
/// never).
pub(crate) fn help_bytes() -> usize {
    *crate::module_parameters::help_bytes.value() as usize
}

/// Work in `n` independent pieces, shared with another CPU's helper.
#[repr(C)]
struct Shared<F> {
    /// First: the C side knows the job by it.
    job: b::oxe_help_job,
    next: Atomic<u32>,
    n: u32,
    failed: Atomic<bool>,
    /// Set by the helper once it has left the pieces and no longer touches
    /// this.
    done: Atomic<bool>,
    f: F,
}

impl<F: Fn(u32) -> bool + Sync> Shared<F> {
    /// Takes pieces until none is left; how many it took.
    fn work(&self) -> u64 {
        let mut took = 0;
        loop {
            let i = self.next.fetch_add(1, ordering::Relaxed);
            if i >= self.n {
                break took;
            }
            took += 1;
            if !(self.f)(i) {
                self.failed.store(true, ordering::Relaxed);
            }
        }
    }

    /// The helper's side, on its CPU.
    ///
    /// # Safety
    ///
    /// `job` is the `job` field of a live `Shared<F>` that the helper has
    /// taken (`oxe_help_offer`'s): [`share`] keeps it alive until `done`.
    unsafe extern "C" fn run(job: *mut b::oxe_help_job) {
        // SAFETY: per the function's contract; `job` is the first field of a `repr(C)` struct.
        let s = unsafe { &*job.cast::<Self>() };
        HELP_PIECES.fetch_add(s.work(), ordering::Relaxed);
        // Last touch: `share` may return as soon as it sees this.
        s.done.store(true, ordering::Release);
    }
}

/// How the helper is used, for debugfs `oxe/help`: copies offered to a
/// helper, copies that had a helper CPU but went alone (several flows,
/// `help::worth_helper`), and the pieces the helpers took.
static HELP_OFFERED: Atomic<u64> = Atomic::new(0);
static HELP_ALONE: Atomic<u64> = Atomic::new(0);
static HELP_PIECES: Atomic<u64> = Atomic::new(0);

/// debugfs `oxe/help`, while the module is loaded: the counts above, so
/// that tests and profiles see what the flow rule decided.
pub(crate) struct HelpStats {
    _file: Pin<KBox<kernel::debugfs::File<()>>>,
    _dir: kernel::debugfs::Dir,
}

impl HelpStats {
    /// None if debugfs has no room for it: nothing depends on it.
    pub(crate) fn create() -> Option<HelpStats> {
        let dir = kernel::debugfs::Dir::new(c"oxe");
        let file = dir.read_callback_file(c"help", (), &|(): &(), f| {
            let v = |c: &Atomic<u64>| c.load(ordering::Relaxed);
            writeln!(f, "offered {}", v(&HELP_OFFERED))?;
            writeln!(f, "alone {}", v(&HELP_ALONE))?;
            writeln!(f, "pieces_helped {}", v(&HELP_PIECES))
        });
        let file = KBox::pin_init(file, GFP_KERNEL).ok()?;
        Some(HelpStats {
            _file: file,
            _dir: dir,
        })
    }
}

/// `help::Flows`, kept in atomics without a lock: a hint, as the CPU
/// choice (two owners' updates may cross).
static SHARER: AtomicUsize = AtomicUsize::new(0);
static SINCE: Atomic<u64> = Atomic::new(0);
static CHANGES: Atomic<u32> = Atomic::new(0);
static MIXED_AT: Atomic<u64> = Atomic::new(0);

/// A flow's turn (a QP's: its address) starts on this CPU: the copies
/// shared from here on are its.
pub(crate) fn turn_starts(flow: *const ()) {
    // SAFETY: writes this CPU's per-CPU word.
    unsafe { b::oxe_turn_starts(flow as usize) };
}

/// Whether this copy's flow is the only one that copied lately
/// (`common/help.rs`).
fn one_flow() -> bool {
    // SAFETY: reads this CPU's per-CPU word.
    let me = unsafe { b::oxe_turn_now() };
    let before = crate::help::Flows {
        sharer: SHARER.load(Ordering::Relaxed),
        since: SINCE.load(ordering::Relaxed),
        changes: CHANGES.load(ordering::Relaxed),
        mixed_at: MIXED_AT.load(ordering::Relaxed),
    };
    let mut f = before;
    let one = f.one_flow(me, now_ns());
    // Most copies change nothing, and leave the cache line shared.
    if f != before {
        SHARER.store(f.sharer, Ordering::Relaxed);
        SINCE.store(f.since, ordering::Relaxed);
        CHANGES.store(f.changes, ordering::Relaxed);
        MIXED_AT.store(f.mixed_at, ordering::Relaxed);
    }
    one
}

/// Runs `f` on each of `0..n` once, on this CPU and, if another CPU is idle
/// or runs a process (not a worker, x86), on a helper queued there: both
/// take pieces until none is left, so a helper that starts late takes
/// fewer, and this returns after at most one piece of waiting. A short
/// copy has a helper only while its flow is the only one copying
/// (`help::worth_helper`). True if every call did.
pub(crate) fn share<F: Fn(u32) -> bool + Sync>(n: u32, f: F) -> bool {
    let wq = WQ.load(Ordering::Acquire);
    let cpu = if n < 2 || wq.is_null() {
        -1
    } else {
        // SAFETY: reads the current context, the online mask and, under RCU, each CPU's current task.
        unsafe { b::oxe_help_cpu() }
    };
    let cpu = if cpu >= 0 && !crate::help::worth_helper(n, one_flow()) {
        HELP_ALONE.fetch_add(1, ordering::Relaxed);
        -1
    } else {
        cpu
    };
    let s = Shared {
        job: b::oxe_help_job {
            run: Some(Shared::<F>::run),
        },
        next: Atomic::new(0),
        n,
        failed: Atomic::new(false),
        done: Atomic::new(false),
        f,
    };
    let job = ptr::from_ref(&s.job).cast_mut();
    // SAFETY: a live workqueue (module exit comes after every QP is gone) and an online CPU; `s` is not moved and outlives the helper's use of it: withdrawn, or waited for below.
    let offered = cpu >= 0 && unsafe { b::oxe_help_offer(wq, cpu, job) };
    if offered {
        HELP_OFFERED.fetch_add(1, ordering::Relaxed);
    }
    s.work();
    // SAFETY: the job offered above.
    if offered && !unsafe { b::oxe_help_withdraw(cpu, job) } {
        // The helper has it: at most its last piece is left.
        while !s.done.load(ordering::Acquire) {
            kernel::processor::cpu_relax();
        }
    }
    !s.failed.load(ordering::Relaxed)
}

/// Queues `w` on oxe's queue, to run on CPU `cpu`; None if there is no
/// queue (module exit).
pub(crate) fn enqueue_on<W: RawWorkItem<ID>, const ID: u64>(
    cpu: i32,
    w: W,
) -> Option<W::EnqueueOutput> {
    let wq = WQ.load(Ordering::Acquire);
    if wq.is_null() {
        return None;
    }
    // SAFETY: a live workqueue (see `queue`); `queue_work_on` returns true only when it queued the work item `__enqueue` hands it, which stays valid while queued.
    Some(unsafe { w.__enqueue(move |work| kernel::bindings::queue_work_on(cpu, wq.cast(), work)) })
}

/// Queues delayed work `w` on oxe's queue to run after `delay`, or moves
/// its timer to `delay` from now if it is pending; None if there is no queue
/// (module exit).
pub(crate) fn arm<W: RawDelayedWorkItem<ID>, const ID: u64>(
    w: W,
    delay: kernel::time::Jiffies,
) -> Option<W::EnqueueOutput> {
    let wq = WQ.load(Ordering::Acquire);
    if wq.is_null() {
        return None;
    }
    // SAFETY: a live workqueue (see `queue`), and `work` is the `work` field of a `delayed_work` (`RawDelayedWorkItem`), at offset 0 (asserted below). `mod_delayed_work_on` returns false when it queued the idle item, which then owns what `__enqueue` hands it until it runs, and true when the item was pending and only its timer moved: the pending instance keeps its own reference, and `__enqueue` gives this one back.
    Some(unsafe {
        w.__enqueue(move |work| {
            !kernel::bindings::mod_delayed_work_on(
                kernel::bindings::wq_misc_consts_WORK_CPU_UNBOUND as i32,
                wq.cast(),
                work.cast(),
                delay,
            )
        })
    })
}

/// Work is about to be queued on `cpu` (`None`: this CPU): a helper
/// lingering there (`help_linger_us`) makes way for it. Returns `cpu`.
pub(crate) fn kick(cpu: Option<i32>) -> Option<i32> {
    // SAFETY: only writes an online CPU's (or this CPU's) per-CPU flag.
    unsafe { b::oxe_help_kick(cpu.unwrap_or(-1)) };
    cpu
}

/// Jiffies for a timer of `ns`, rounded up; with `never_early`, one more, so
/// that it never fires before `ns` have passed.
pub(crate) fn jiffies(ns: u64, never_early: bool) -> kernel::time::Jiffies {
    // SAFETY: a pure conversion.
    unsafe { b::oxe_nsecs_to_jiffies(ns, never_early) }
}

/// Waits for `work` to finish if queued or running; true if it had to wait.
pub(crate) fn flush<T, const ID: u64>(work: &Work<T, ID>) -> bool {
    // SAFETY: `work` is a live, initialised work item.
    unsafe { b::flush_work(Work::raw_get(work)) }
}

/// Runs `dwork` now if its timer is pending and waits for it (cancelling it
/// would leak the reference a queued item holds); true if it had to wait.
pub(crate) fn flush_delayed<T, const ID: u64>(dwork: &DelayedWork<T, ID>) -> bool {
    // SAFETY: a live, initialised delayed work item, whose `work` is the first member of its `struct delayed_work` (asserted below).
    unsafe { b::flush_delayed_work(DelayedWork::raw_as_work(dwork).cast()) }
}

const _: () = assert!(core::mem::offset_of!(b::delayed_work, work) == 0);

/// The monotonic clock in nanoseconds.
pub(crate) fn now_ns() -> u64 {
    // SAFETY: reads the clock.
    unsafe { kernel::bindings::ktime_get() as u64 }
}
