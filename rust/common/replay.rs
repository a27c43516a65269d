// SPDX-License-Identifier: GPL-2.0

//! The responder's memory of the atomics it executed (rdma_rxe's "responder
//! resources" for atomics). An atomic is executed once: when the requester
//! sends it again (its ACK was lost, or a later one overtook it), the
//! responder answers with the original value it saved, never by executing it
//! again. A requester may have a whole window of atomics outstanding, and any
//! of their ACKs may be lost, so one saved result is not enough.
//!
//! Entries are kept in PSN order and leave once the expected PSN is more
//! than a window past them: a requester never goes back further than its
//! window, and a PSN 2^24 later that aliases an old entry never finds it.

use core::ops::DerefMut;

use crate::packet::psn_diff;
use crate::params::MAX_UNACKED_PSNS;

/// Entries a log needs: one per PSN of a requester's window.
pub const ATOMIC_LOG_LEN: usize = MAX_UNACKED_PSNS as usize;

/// One executed atomic: its PSN and the value it read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Saved {
    pub psn: u32,
    pub orig: u64,
}

/// A ring of `Saved` over storage the caller allocates (the kernel cannot
/// allocate where the responder runs).
pub struct AtomicLog<B> {
    slots: B,
    /// Index of the oldest entry.
    head: usize,
    len: usize,
}

impl<B: DerefMut<Target = [Saved]>> AtomicLog<B> {
    pub fn new(slots: B) -> Self {
        Self {
            slots,
            head: 0,
            len: 0,
        }
    }

    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn slot(&self, i: usize) -> Option<&Saved> {
        let cap = self.slots.len();
        if i >= self.len || cap == 0 {
            return None;
        }
        self.slots.get((self.head + i) % cap)
    }

    /// Records the atomic executed at `psn`. When full, the oldest entry
    /// goes: it is a window behind, so never asked for again.
    pub fn record(&mut self, psn: u32, orig: u64) {
        let cap = self.slots.len();
        if cap == 0 {
            return;
        }
        if self.len == cap {
            self.head = (self.head + 1) % cap;
            self.len -= 1;
        }
        let i = (self.head + self.len) % cap;
        if let Some(s) = self.slots.get_mut(i) {
            *s = Saved { psn, orig };
            self.len += 1;
        }
    }

    /// Forgets the entries the requester can no longer go back to: those
    /// more than a window behind `epsn`, the next PSN expected. Called as
    /// `epsn` moves, so no entry gets near half the PSN space behind it.
    pub fn expire(&mut self, epsn: u32) {
        let cap = self.slots.len();
        while let Some(s) = self.slot(0) {
            if psn_diff(epsn, s.psn) <= MAX_UNACKED_PSNS as i32 {
                break;
            }
            self.head = (self.head + 1) % cap;
            self.len -= 1;
        }
    }

    /// The value the atomic at `psn` read, if it was executed and is
    /// remembered.
    pub fn find(&self, psn: u32) -> Option<u64> {
        (0..self.len)
            .rev()
            .filter_map(|i| self.slot(i))
            .find(|s| s.psn == psn)
            .map(|s| s.orig)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::{psn_add, PSN_MASK};
    use proptest::prelude::*;
    use std::vec;
    use std::vec::Vec;

    fn log() -> AtomicLog<Vec<Saved>> {
        AtomicLog::new(vec![Saved::default(); ATOMIC_LOG_LEN])
    }

    #[test]
    fn every_atomic_of_a_window_is_replayed() {
        let mut l = log();
        let first = PSN_MASK - 10;
        for i in 0..MAX_UNACKED_PSNS {
            l.record(psn_add(first, i), u64::from(i) * 3);
            l.expire(psn_add(first, i + 1));
        }
        for i in 0..MAX_UNACKED_PSNS {
            assert_eq!(l.find(psn_add(first, i)), Some(u64::from(i) * 3));
        }
    }

    #[test]
    fn an_entry_a_window_behind_is_forgotten() {
        let mut l = log();
        l.record(5, 1);
        l.expire(6 + MAX_UNACKED_PSNS - 1);
        assert_eq!(l.find(5), Some(1));
        l.expire(6 + MAX_UNACKED_PSNS);
        assert_eq!(l.find(5), None);
        assert!(l.is_empty());
    }

    #[test]
    fn an_aliasing_psn_never_finds_an_old_result() {
        let mut l = log();
        l.record(7, 42);
        // The responder moves on through the whole PSN space, a packet at a
        // time; 7 comes round again as a new request.
        let mut epsn = 8;
        for _ in 0..=PSN_MASK {
            l.expire(epsn);
            epsn = psn_add(epsn, 1);
        }
        assert_eq!(l.find(7), None);
    }

    #[test]
    fn zero_capacity_remembers_nothing() {
        let mut l = AtomicLog::new(Vec::<Saved>::new());
        l.record(1, 2);
        l.expire(3);
        assert_eq!(l.find(1), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Against a model: an atomic within the window is answered with the
        /// value first returned, one further behind is forgotten, a PSN never
        /// executed is never found.
        #[test]
        fn matches_a_model(
            start in 0..=PSN_MASK,
            steps in proptest::collection::vec((any::<bool>(), 1u32..4, 1u32..300), 1..400),
        ) {
            let mut l = log();
            let mut model: Vec<(u32, u64)> = Vec::new();
            let mut epsn = start;
            for (n, (atomic, adv, probe)) in steps.into_iter().enumerate() {
                if atomic {
                    l.record(epsn, n as u64);
                    model.push((epsn, n as u64));
                }
                epsn = psn_add(epsn, adv);
                l.expire(epsn);
                for &(psn, orig) in model.iter().rev().take(2 * ATOMIC_LOG_LEN) {
                    let behind = psn_diff(epsn, psn);
                    let want = (behind <= MAX_UNACKED_PSNS as i32).then_some(orig);
                    prop_assert_eq!(l.find(psn), want);
                }
                let psn = psn_add(epsn, PSN_MASK + 1 - probe);
                if !model.iter().any(|(p, _)| *p == psn) {
                    prop_assert_eq!(l.find(psn), None);
                }
            }
        }
    }
}
