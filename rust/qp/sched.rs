// SPDX-License-Identifier: GPL-2.0

//! Where and when a QP's tasks run: queued on oxe's high-priority queue (on
//! a hand-over's CPU, the QP's home CPU or the queueing one), or on the
//! normal-priority queue once a task has kept its CPU for `yield_ms`; and
//! the timers that kick them.

use kernel::sync::atomic::{ordering, Atomic};
use kernel::sync::Arc;
use kernel::workqueue::{RawDelayedWorkItem, RawWorkItem};

use super::{Qp, RECV, SEND, STATE_ERR};
use crate::params;

impl Qp {
    /// Runs the send task (completer, then requester) soon.
    pub(crate) fn schedule(self: &Arc<Self>) {
        self.queue_task::<SEND>();
    }

    /// Queues task `ID` on oxe's queue: on the QP's home CPU with
    /// `qp_spread`, else on an idle CPU beside a posting process
    /// (`peer_away`), else on the CPU queueing it.
    fn queue_task<const ID: u64>(self: &Arc<Self>)
    where
        Arc<Self>: RawWorkItem<ID> + Send + 'static,
    {
        self.queue_task_for::<ID>(0)
    }

    /// As `queue_task`, for a hand-over of `bytes` of payload.
    pub(super) fn queue_task_for<const ID: u64>(self: &Arc<Self>, bytes: usize)
    where
        Arc<Self>: RawWorkItem<ID> + Send + 'static,
    {
        self.queue_task_away::<ID>(|| crate::wq::away_cpu_for(bytes, ID == SEND));
    }

    /// Runs the send task soon on CPU `cpu`, which `wq::away_cpu_for` found
    /// idle (unless the QP has a home CPU or shares its CPU, as `queue_task`).
    pub(crate) fn schedule_on(self: &Arc<Self>, cpu: i32) {
        self.queue_task_away::<SEND>(|| Some(cpu));
    }

    /// As `queue_task`, with `away` choosing the CPU of a poster's hand-over.
    fn queue_task_away<const ID: u64>(self: &Arc<Self>, away: impl FnOnce() -> Option<i32>)
    where
        Arc<Self>: RawWorkItem<ID> + Send + 'static,
    {
        if self.is_dead() {
            return;
        }
        // A task sharing its CPU (past `yield_ms`) stays at normal priority
        // whoever queues it: a response's or a request's wake-up on the
        // high-priority queue would take its CPU back from the processes there.
        // It goes to the CPU queueing it, not to a hand-over's: a poster
        // then takes the copy while the peer polls on its own CPU (sending
        // it away, as `away_bytes` does at high priority, measured SEND
        // 64 KiB 0.75x and WRITE 64 KiB on four QPs 0.8x; stop 53).
        if self.home.is_none() && params::is_sharing(self.streak::<ID>().load(ordering::Relaxed)) {
            if let Some(wq) = crate::wq::normal() {
                crate::wq::kick(None);
                let _ = wq.enqueue::<_, ID>(self.clone());
                return;
            }
        }
        match (crate::wq::kick(self.home.or_else(away)), crate::wq::queue()) {
            (Some(cpu), _) => {
                let _ = crate::wq::enqueue_on::<_, ID>(cpu, self.clone());
            }
            (None, Some(wq)) => {
                let _ = wq.enqueue::<_, ID>(self.clone());
            }
            (None, None) => {}
        }
    }

    /// Requeues the send task after a turn that left work: on oxe's
    /// high-priority queue, or on the normal-priority one once it has kept
    /// requeueing itself for `yield_ms`, for a quarter of that or until its
    /// flow pauses (`idle`, `params::busy_streak`; with `qp_spread` it stays
    /// on its home CPU's high-priority queue).
    pub(crate) fn requeue(self: &Arc<Self>) {
        self.requeue_task::<SEND>();
    }

    /// Requeues the receive task, as `requeue`.
    pub(crate) fn requeue_recv(self: &Arc<Self>) {
        self.requeue_task::<RECV>();
    }

    // The normal-priority queue is another workqueue, so the kernel does not
    // keep a turn there from running beside one on the high-priority queue
    // (its non-reentrancy holds within a workqueue). Both tasks run wholly
    // under the SQ or RQ mutex and return at once once the QP is dead, so
    // two turns take their turns, and `teardown`'s flush, which waits for
    // the instance queued last, leaves at most the end of a turn that has
    // let go of its locks and holds only its reference to the QP.
    fn requeue_task<const ID: u64>(self: &Arc<Self>)
    where
        Arc<Self>: RawWorkItem<ID> + Send + 'static,
    {
        let streak = self.streak::<ID>();
        let (since, _shared) = params::busy_streak(
            streak.load(ordering::Relaxed),
            crate::wq::now_ns(),
            crate::wq::yield_after_ns(),
        );
        streak.store(since, ordering::Relaxed);
        // Past the limit the streak is `SHARING`, for which `queue_task`
        // takes the normal-priority queue, as for anyone queueing the task.
        self.queue_task::<ID>();
    }

    /// A task's turn ended with nothing left: its busy streak ends. Most
    /// turns find none, and leave the QP's cache line unwritten.
    pub(crate) fn idle<const ID: u64>(&self) {
        let streak = self.streak::<ID>();
        if streak.load(ordering::Relaxed) != 0 {
            streak.store(0, ordering::Relaxed);
        }
    }

    fn streak<const ID: u64>(&self) -> &Atomic<u64> {
        &self.busy[usize::from(ID == SEND)]
    }

    /// Runs the receive task (responder) soon.
    pub(crate) fn schedule_recv(self: &Arc<Self>) {
        self.queue_task::<RECV>();
    }

    /// A kernel client posted receives: in ERR they are flushed, by the
    /// receive task (this may run in any context, the flush takes the RQ).
    pub(crate) fn recv_posted(self: &Arc<Self>) {
        if self.attr.lock().state == STATE_ERR {
            self.schedule_recv();
        }
    }

    /// Arms timer `ID` (`RETRY`, `RNR`) to fire in `ns`, or moves it there
    /// if it is pending, as rxe's `mod_timer`. The retransmit timer never
    /// fires early (an early expiry spends a retry); an early RNR resend
    /// costs one more NAK at most.
    pub(crate) fn arm<const ID: u64>(self: &Arc<Self>, ns: u64)
    where
        Arc<Self>: RawDelayedWorkItem<ID> + Send + 'static,
    {
        if !self.is_dead() {
            let delay = crate::wq::jiffies(ns, ID == super::RETRY);
            let _ = crate::wq::arm::<_, ID>(self.clone(), delay);
        }
    }
}
