// SPDX-License-Identifier: GPL-2.0

//! Pacing of a responder's READ responses on the wire.
//!
//! A READ asks for up to 2 GiB in one request, and nothing but the link
//! slows its answer: a responder that sends as fast as it can fills the
//! buffers on the way (a switch's, a virtual link's socket) faster than the
//! requester drains them. A lost response makes the requester go back and
//! ask again from the gap (rxe, and oxe's requester, do so at once), and
//! every response sent meanwhile was for nothing: rdma_rxe reading 8 MiB
//! from oxe over a two-guest link moved 12x the data it asked for.
//!
//! So each QP's responder paces itself once it has seen a loss, as TCP
//! does: the rate (bytes per millisecond) starts at half what it was
//! sending, halves again at each later loss, and grows by 1/2048 per
//! millisecond, until it is so high that it stops pacing. A loss is a READ
//! asked for again; the ones that follow from the same loss (the requester
//! repeats the READs after the gap too) count once. Paced responses go in
//! bursts of at most a millisecond's worth: a path's buffer (a virtual
//! link's socket holds ~90 packets) overflows with a larger one even when
//! the rate is right.

use crate::packet::psn_diff;

const MS: u64 = 1_000_000;
/// The slowest pace: a link that loses everything is left to the
/// requester's retransmit timer.
pub const MIN_RATE: u32 = 1 << 10;
/// A pace that grew past this is no pace (bytes per ms: 2 GB/s).
pub const MAX_RATE: u32 = 2 << 20;
/// The first pace when the sending rate is not known yet (32 MB/s).
pub const START_RATE: u32 = 32 << 10;
/// Credit saved up while waiting: a burst of at most this long's worth
/// (small next to what a path buffers, several waits' worth).
const BURST_NS: u64 = MS;
/// The shortest wait: at 32 MB/s a burst of about 8 KiB-packets per wake-up.
pub const MIN_WAIT_NS: u64 = 250_000;
/// The rate grows by 1/`GROWTH` of itself per clean millisecond (doubles in
/// ~1.4 s): a loss is dear (rdma_rxe, missing a response, drops the rest of
/// that READ's and asks again only once a later one's come or its timer
/// fires), so the rate creeps up on what the path drains.
const GROWTH: u64 = 2048;
/// Gaps between packets longer than this are idle time, not sending time.
const IDLE_NS: u64 = MS;
/// Sending time over which the sending rate is measured.
const WINDOW_NS: u64 = 2 * MS;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pace {
    /// Bytes per millisecond; 0 while not pacing.
    rate: u32,
    /// Bytes that may go now; negative: owed.
    credit: i64,
    /// When `credit` was last brought up to date.
    at: u64,
    /// When `rate` last grew (whole milliseconds since the loss).
    grown: u64,
    /// The PSN past every response sent when the rate was last lowered:
    /// losses before it are that loss's.
    recover: Option<u32>,
    /// The sending rate measured over the last `WINDOW_NS` of sending.
    measured: u32,
    window_ns: u64,
    window_bytes: u64,
    last_sent: u64,
}

impl Pace {
    pub const fn new() -> Self {
        Self {
            rate: 0,
            credit: 0,
            at: 0,
            grown: 0,
            recover: None,
            measured: 0,
            window_ns: 0,
            window_bytes: 0,
            last_sent: 0,
        }
    }

    /// Bytes per millisecond, 0 while not pacing.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// The requester asked again for the responses from `psn` on, when
    /// every response before `next` had been sent. Returns true if this
    /// lowered the pace (a new loss).
    pub fn loss(&mut self, now: u64, psn: u32, next: u32) -> bool {
        if self.recover.is_some_and(|r| psn_diff(psn, r) < 0) {
            return false;
        }
        self.recover = Some(next);
        let from = if self.rate != 0 {
            self.rate
        } else if self.measured != 0 {
            self.measured
        } else {
            START_RATE * 2
        };
        self.rate = (from / 2).max(MIN_RATE);
        self.credit = 0;
        self.at = now;
        self.grown = now;
        true
    }

    /// Stops pacing (the requester recovers from a loss at once), keeping
    /// what was measured.
    pub fn unpace(&mut self) {
        *self = Self {
            measured: self.measured,
            window_ns: self.window_ns,
            window_bytes: self.window_bytes,
            last_sent: self.last_sent,
            ..Self::new()
        };
    }

    /// Brings the credit and the rate up to `now`.
    fn update(&mut self, now: u64) {
        if self.rate == 0 || now <= self.at {
            return;
        }
        let cap = (u64::from(self.rate) * BURST_NS / MS) as i64;
        let earned = u64::from(self.rate).saturating_mul(now - self.at) / MS;
        self.credit = self
            .credit
            .saturating_add(i64::try_from(earned).unwrap_or(i64::MAX))
            .min(cap);
        self.at = now;
        // Whole milliseconds only, so frequent updates still grow it.
        let steps = now.saturating_sub(self.grown) / MS;
        if steps == 0 {
            return;
        }
        self.grown += steps * MS;
        let mut rate = u64::from(self.rate);
        for _ in 0..steps.min(64) {
            rate += rate.div_ceil(GROWTH);
        }
        if rate > u64::from(MAX_RATE) {
            self.unpace();
        } else {
            self.rate = rate as u32;
        }
    }

    /// May a response of `bytes` go at `now`? If so it is counted as sent.
    pub fn take(&mut self, now: u64, bytes: u32) -> bool {
        self.update(now);
        if self.rate != 0 {
            if self.credit <= 0 {
                return false;
            }
            self.credit -= i64::from(bytes);
        }
        self.measure(now, bytes);
        true
    }

    fn measure(&mut self, now: u64, bytes: u32) {
        let gap = now.saturating_sub(self.last_sent);
        self.last_sent = now;
        if gap < IDLE_NS {
            self.window_ns += gap;
            self.window_bytes += u64::from(bytes);
        }
        if self.window_ns >= WINDOW_NS {
            let rate = self.window_bytes.saturating_mul(MS) / self.window_ns;
            self.measured = rate.clamp(1, u64::from(MAX_RATE)) as u32;
            self.window_ns = 0;
            self.window_bytes = 0;
        }
    }

    /// Nanoseconds until the next response may go (0: now).
    pub fn wait_ns(&self) -> u64 {
        if self.rate == 0 || self.credit > 0 {
            return 0;
        }
        // Credit comes at `rate` bytes per ms; at least one byte is owed.
        let owed = self.credit.unsigned_abs() + 1;
        owed.saturating_mul(MS)
            .div_ceil(u64::from(self.rate))
            .max(MIN_WAIT_NS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Sends packets of `size` whenever allowed over `ms`, checking every
    /// 10 µs; returns the bytes sent.
    fn drive(p: &mut Pace, from: u64, ms: u64, size: u32) -> u64 {
        let mut sent = 0;
        let mut t = from;
        while t < from + ms * MS {
            while p.take(t, size) {
                sent += u64::from(size);
            }
            t += 10_000;
        }
        sent
    }

    #[test]
    fn unpaced_until_a_loss_then_half_the_measured_rate() {
        let mut p = Pace::new();
        // 1 KiB every µs: 1 GB/s, as measured.
        for i in 0..5000u64 {
            assert!(p.take(i * 1000, 1024));
        }
        assert_eq!(p.rate(), 0);
        assert!(p.loss(5_000_000, 10, 5000));
        assert_eq!(p.rate(), 1024 * 1000 / 2);
        // The READs asked for again after the gap are the same loss.
        assert!(!p.loss(5_100_000, 4000, 6000));
        assert!(!p.loss(5_100_000, 4999, 6000));
        assert_eq!(p.rate(), 512_000);
        // One after the recovery point is a new one.
        assert!(p.loss(5_200_000, 5000, 9000));
        assert_eq!(p.rate(), 256_000);
    }

    #[test]
    fn a_loss_with_nothing_measured_starts_at_the_start_rate() {
        let mut p = Pace::new();
        assert!(p.loss(0, 0, 1));
        assert_eq!(p.rate(), START_RATE);
        // Credit is earned from the loss on.
        assert!(!p.take(0, 1024));
        // A 31 ns wait for the first byte's credit, made a short wait.
        assert_eq!(p.wait_ns(), MIN_WAIT_NS);
        assert!(p.take(MIN_WAIT_NS, 1024));
        // 250 µs earned 8 KiB: 7 more, then a wait for the one owed.
        let mut n = 0;
        while p.take(MIN_WAIT_NS, 1024) {
            n += 1;
        }
        assert_eq!(n, 7);
        assert_eq!(p.wait_ns(), MIN_WAIT_NS);
    }

    #[test]
    fn repeated_losses_stop_at_the_floor() {
        let mut p = Pace::new();
        for i in 0..40 {
            p.loss(i, i as u32, i as u32 + 1);
        }
        assert_eq!(p.rate(), MIN_RATE);
    }

    #[test]
    fn the_pace_holds_the_rate_with_a_burst_of_at_most_one_ms() {
        let mut p = Pace::new();
        p.loss(0, 0, 1);
        // 1000 ms at the start rate grows it by 1/2048 per ms: at most
        // (1 + 1/2048)^1000 ~ 1.63x, about 1.28x on average.
        let sent = drive(&mut p, 0, 1000, 1024);
        let start = u64::from(START_RATE) * 1000;
        assert!(
            sent > start * 125 / 100 && sent < start * 132 / 100,
            "{sent}"
        );
        // Idle for 50 ms, then a burst: at most a ms' worth plus one.
        let r = u64::from(p.rate());
        let t = 1050 * MS;
        let mut burst = 0;
        while p.take(t, 1024) {
            burst += 1024;
        }
        assert!(burst <= u64::from(p.rate()) + 1024, "{burst}");
        assert!(u64::from(p.rate()) > r);
    }

    #[test]
    fn a_clean_stretch_ends_the_pacing() {
        let mut p = Pace::new();
        p.loss(0, 0, 1);
        // It doubles in ~1.42 s: 32 MB/s to 2 GB/s in six doublings.
        let mut t = 0;
        while p.rate() != 0 {
            t += MS;
            assert!(t < 20_000 * MS);
            p.take(t, 1);
        }
        assert!(t > 8000 * MS && t < 9000 * MS, "{t}");
        assert_eq!(p.wait_ns(), 0);
        // Idle time grows it by at most 64 ms' worth: the pace a loss set
        // is kept across the pauses between an application's READs.
        p.loss(t, 5, 6);
        let r = p.rate();
        p.take(t + 10_000 * MS, 1);
        assert!(p.rate() > r && p.rate() < r + r / 16, "{} {r}", p.rate());
    }

    #[test]
    fn unpacing_keeps_what_was_measured() {
        let mut p = Pace::new();
        for i in 0..5000u64 {
            p.take(i * 1000, 1024);
        }
        p.loss(5 * MS, 0, 1);
        assert_eq!(p.rate(), 512_000);
        p.unpace();
        assert_eq!((p.rate(), p.wait_ns()), (0, 0));
        assert!(p.take(5 * MS, 1024));
        p.loss(6 * MS, 1, 2);
        assert_eq!(p.rate(), 512_000);
    }

    #[test]
    fn idle_time_is_not_counted_as_sending_time() {
        let mut p = Pace::new();
        // Bursts of 100 packets at 1 µs, 10 ms apart: 1 GB/s while sending.
        for b in 0..30u64 {
            for i in 0..100u64 {
                p.take(b * 10 * MS + i * 1000, 1024);
            }
        }
        p.loss(300 * MS, 0, 1);
        assert!(p.rate() > 400_000, "{}", p.rate());
    }

    proptest! {
        #[test]
        fn never_panics_and_never_sends_past_its_credit(
            ops in proptest::collection::vec((0u8..3, 0u64..10_000_000, any::<u32>(), 1u32..65536), 1..300)
        ) {
            let mut p = Pace::new();
            let mut t = 0u64;
            for (op, dt, psn, size) in ops {
                t = t.saturating_add(dt);
                match op {
                    0 => { p.loss(t, psn, psn.wrapping_add(size)); }
                    1 => {
                        let before = p;
                        if p.take(t, size) && before.rate != 0 {
                            // Sent only on credit, and never more than one
                            // packet past it.
                            prop_assert!(p.credit >= -i64::from(size));
                        }
                    }
                    _ => {
                        // After the wait it tells, a response may go.
                        let w = p.wait_ns();
                        if w > 0 {
                            prop_assert!(p.rate() != 0);
                            let mut q = p;
                            prop_assert!(q.take(t + w, 1));
                        }
                    }
                }
                prop_assert!(p.rate() == 0 || (MIN_RATE..=MAX_RATE).contains(&p.rate()));
            }
        }
    }
}
