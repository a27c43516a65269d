// SPDX-License-Identifier: GPL-2.0

//! When a large copy is shared with another CPU's helper (the kernel side
//! is `wq::share`): only while one flow copies. With one flow the other CPU
//! has time to spare (the poster polls there), and the helper takes a
//! quarter of a 64 KiB WRITE's pieces and 40% of a 1 MiB one's. With four
//! QPs on two CPUs both CPUs have copies and turns of their own: the
//! helper started late (0.3-0.4 pieces of 16 KiB per offer against 1.1),
//! its wake-up preempted the poster or another QP's turn, and sharing cost
//! four QPs 10-20% of their bandwidth.
//!
//! A long copy pays all the same: a helper that starts late still finds
//! most of a 256 KiB packet's 16 pieces (four QPs of 1 MiB WRITEs lost 9%
//! without it). So only copies of `SHORT_PIECES` or fewer wait for one flow.
//!
//! Flows are told apart by the QP whose turn shares the copy. A turn
//! preempted on its CPU by another QP's turn (a poster's system call) makes
//! one stray change of sharer and one back; so several flows are seen when
//! the sharer changed `MIXED_CHANGES` times within `WINDOW_NS`, and copies
//! are shared again once that has not been seen for `WINDOW_NS`.

/// The window of the count of changes, and how long after flows were last
/// seen taking turns copies are shared again.
pub const WINDOW_NS: u64 = 1_000_000;

/// Changes of sharer within a window that mean several flows.
pub const MIXED_CHANGES: u32 = 4;

/// Copies of this many pieces or fewer (a 64 KiB packet's four) are
/// shared only while one flow copies; a helper starts about 14 us after the
/// offer under TCG, most of such a copy.
pub const SHORT_PIECES: u32 = 4;

/// Whether a copy of `pieces` is worth a helper, given whether its flow is
/// the only one copying (`Flows::one_flow`).
pub fn worth_helper(pieces: u32, one_flow: bool) -> bool {
    pieces > SHORT_PIECES || one_flow
}

/// What the kernel side keeps (a hint, updated without a lock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flows {
    /// The flow (its QP's address) that shared a copy last.
    pub sharer: usize,
    /// When the current window's count began, and the count.
    pub since: u64,
    pub changes: u32,
    /// When flows were last seen taking turns (0: never).
    pub mixed_at: u64,
}

impl Flows {
    /// A copy of flow `me` at `now` (ns): whether it is the only flow that
    /// copied lately, so that its copy is worth a helper.
    pub fn one_flow(&mut self, me: usize, now: u64) -> bool {
        if self.sharer != me {
            self.sharer = me;
            if now.saturating_sub(self.since) > WINDOW_NS {
                self.since = now;
                self.changes = 1;
            } else {
                self.changes = self.changes.saturating_add(1);
                if self.changes >= MIXED_CHANGES {
                    self.mixed_at = now;
                }
            }
        }
        self.mixed_at == 0 || now.saturating_sub(self.mixed_at) > WINDOW_NS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1000;

    /// Copies of `flows` in turn, one every `gap` ns from `start`: how
    /// many were judged one flow's.
    fn shared(f: &mut Flows, flows: &[usize], n: usize, start: u64, gap: u64) -> usize {
        (0..n)
            .filter(|&i| f.one_flow(flows[i % flows.len()], start + i as u64 * gap))
            .count()
    }

    #[test]
    fn one_flow_shares_every_copy() {
        let mut f = Flows::default();
        assert_eq!(shared(&mut f, &[1], 1000, 0, 30 * US), 1000);
    }

    #[test]
    fn four_flows_share_none_after_the_first_few() {
        let mut f = Flows::default();
        let n = shared(&mut f, &[1, 2, 3, 4], 1000, 0, 30 * US);
        assert!(n <= MIXED_CHANGES as usize, "{n}");
    }

    #[test]
    fn a_stray_copy_of_another_flow_does_not_stop_sharing() {
        let mut f = Flows::default();
        let mut t = 0;
        // One in 200 copies (6 ms); seen at most once in 30 ms.
        for _ in 0..100 {
            assert_eq!(shared(&mut f, &[1], 200, t, 30 * US), 200);
            t += 200 * 30 * US;
            // A preempting turn's copy, and back.
            f.one_flow(2, t);
            t += 30 * US;
        }
    }

    #[test]
    fn one_flow_shares_again_a_window_after_the_others_stop() {
        let mut f = Flows::default();
        shared(&mut f, &[1, 2], 100, 0, 30 * US);
        let t = 100 * 30 * US;
        assert!(!f.one_flow(1, t));
        assert!(!f.one_flow(1, t + WINDOW_NS / 2));
        assert!(f.one_flow(1, t + 2 * WINDOW_NS));
    }

    #[test]
    fn long_copies_are_shared_whatever_the_flows() {
        assert!(worth_helper(16, false));
        assert!(worth_helper(SHORT_PIECES + 1, false));
        assert!(!worth_helper(SHORT_PIECES, false));
        assert!(worth_helper(SHORT_PIECES, true));
        assert!(worth_helper(2, true));
    }

    #[test]
    fn a_clock_that_steps_back_is_no_panic() {
        let mut f = Flows::default();
        shared(&mut f, &[1, 2], 100, 1 << 40, 30 * US);
        for now in [0, 1, u64::MAX] {
            let _ = f.one_flow(3, now);
            let _ = f.one_flow(1, now);
        }
    }
}
