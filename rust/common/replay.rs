// SPDX-License-Identifier: GPL-2.0

//! The responder's memory of the atomics it executed (rdma_rxe's "responder
//! resources" for atomics). An atomic is executed once: when the requester
//! sends it again (its ACK was lost, or a later one overtook it), the
//! responder answers with the original value it saved, never by executing it
//! again. A requester may have a whole window of atomics outstanding, and any
//! of their ACKs may be lost, so one saved result is not enough.
//!
//! Entries are kept in PSN order, the last `ATOMIC_LOG_LEN` of them (no
//! requester has more atomics unanswered: rxe's max_qp_rd_atom), and leave
//! once the expected PSN is `REMEMBER` past them, so that a PSN 2^24 later
//! that aliases an old entry never finds it. Not sooner: a requester's
//! window bounds where its requests start, not where a READ's responses
//! end, and rdma_rxe sends a READ of hundreds of packets behind an atomic
//! whose ACK may be lost; it asks for the atomic again after them.

use core::ops::DerefMut;

use crate::packet::psn_diff;
use crate::params::MAX_UNACKED_PSNS;

/// Entries a log needs: one per atomic a requester may have unanswered.
pub const ATOMIC_LOG_LEN: usize = MAX_UNACKED_PSNS as usize;

/// How far behind the expected PSN an entry is still asked for: a quarter
/// of the PSN space, far from aliasing (half of it).
pub const REMEMBER: u32 = 1 << 22;

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
    /// goes: answered before the latest ones were sent, so never asked for
    /// again.
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
    /// more than `REMEMBER` behind `epsn`, the next PSN expected. Called as
    /// `epsn` moves; one move (a READ) may take it up to half the PSN space
    /// on, so an entry that seems ahead of `epsn` is far behind it.
    pub fn expire(&mut self, epsn: u32) {
        let cap = self.slots.len();
        while let Some(s) = self.slot(0) {
            if (1..=REMEMBER as i32).contains(&psn_diff(epsn, s.psn)) {
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
    fn an_entry_far_behind_is_forgotten() {
        let mut l = log();
        l.record(5, 1);
        l.expire(5 + REMEMBER);
        assert_eq!(l.find(5), Some(1));
        l.expire(6 + REMEMBER);
        assert_eq!(l.find(5), None);
        assert!(l.is_empty());
    }

    /// rdma_rxe's requester: an atomic, then a READ of 1024 response PSNs
    /// (its window bounds where a request starts), the atomic's ACK lost:
    /// it asks for the atomic again once the READ's responses are in.
    #[test]
    fn an_atomic_behind_a_long_read_is_replayed() {
        let mut l = log();
        l.record(PSN_MASK, 9);
        l.expire(0);
        l.expire(1024);
        assert_eq!(l.find(PSN_MASK), Some(9));
    }

    /// One READ may move the expected PSN half the PSN space at once (2^31
    /// bytes at MTU 256): the entry then seems ahead, and goes.
    #[test]
    fn a_jump_of_half_the_psn_space_forgets() {
        let mut l = log();
        l.record(3, 9);
        l.expire(4);
        l.expire(psn_add(4, 1 << 23));
        assert_eq!(l.find(3), None);
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
        /// Against a model: one of the last `ATOMIC_LOG_LEN` atomics, less
        /// than `REMEMBER` PSNs behind all along, is answered with the
        /// value first returned; an older one is forgotten; a PSN never
        /// executed is never found. Moves of a packet or a few, of a READ
        /// of hundreds, and of up to half the PSN space.
        #[test]
        fn matches_a_model(
            start in 0..=PSN_MASK,
            steps in proptest::collection::vec(
                (any::<bool>(), prop_oneof![8 => 1u32..4, 2 => 100u32..2000, 1 => 1u32..(1 << 23)],
                 1u32..300),
                1..400,
            ),
        ) {
            let mut l = log();
            // PSN, value, PSNs moved since.
            let mut model: Vec<(u32, u64, u64)> = Vec::new();
            let mut epsn = start;
            for (n, (atomic, adv, probe)) in steps.into_iter().enumerate() {
                if atomic {
                    l.record(epsn, n as u64);
                    model.push((epsn, n as u64, 0));
                }
                epsn = psn_add(epsn, adv);
                l.expire(epsn);
                for m in model.iter_mut() {
                    m.2 += u64::from(adv);
                }
                let newest = model.len().saturating_sub(ATOMIC_LOG_LEN);
                for (i, &(psn, orig, moved)) in model.iter().enumerate().rev().take(2 * ATOMIC_LOG_LEN) {
                    let want = (i >= newest && moved <= u64::from(REMEMBER)).then_some(orig);
                    // An entry forgotten may share its PSN with a newer one.
                    if want.is_none() && model.iter().skip(i + 1).any(|m| m.0 == psn) {
                        continue;
                    }
                    prop_assert_eq!(l.find(psn), want);
                }
                let psn = psn_add(epsn, PSN_MASK + 1 - probe);
                if !model.iter().any(|m| m.0 == psn) {
                    prop_assert_eq!(l.find(psn), None);
                }
            }
        }
    }
}
