// SPDX-License-Identifier: GPL-2.0

//! Memory keys: `index << 8 | tag`. The index names a slot of the device's key
//! table; the tag changes every time the slot is reused, so a key kept after
//! deregistration never matches the slot's next tenant.
//!
//! Indices are handed out cyclically: the next free one after the last one
//! given, going around to the lowest only when none is left above. A slot
//! is therefore taken at most once per round, and the tag follows the
//! round: a slot's next tenant always comes at least one round later, so
//! its tag differs, and a kept key matches again only after 256 rounds (2^31
//! registrations for MRs). The table keeps nothing of a freed slot.
//!
//! Consumers move a key's tag themselves (`ib_inc_rkey` on every fast
//! registration, `ibv_inc_rkey` on every window bind), one up at a time. So
//! the tag does not step by one a round, which would give the slot's next
//! tenant the key its last one had after a single re-key, but by
//! `TAG_STRIDE`: the next tenant starts 99 tags away from where the last one
//! started, the one after it 58 (rdma_rxe starts at a random tag).

pub const TAG_BITS: u32 = 8;
/// Indices are 24 bits; 0 is never handed out (a zeroed key is never valid).
pub const MIN_INDEX: u32 = 1;
pub const MAX_INDEX: u32 = (1 << (32 - TAG_BITS)) - 1;
/// MRs take the lower half of the indices and memory windows the upper
/// half, so the data path tells them apart by the key alone (rxe does the
/// same with its pools' index ranges).
pub const MR_MAX_INDEX: u32 = (1 << (31 - TAG_BITS)) - 1;
pub const MW_MIN_INDEX: u32 = MR_MAX_INDEX + 1;

/// The highest MR index of a device with `slots` MR keys (0, or more than
/// there are: every index MRs can have). A smaller table goes around sooner,
/// which is how the tests watch a slot's keys come back and the table fill.
pub const fn mr_max_index(slots: u32) -> u32 {
    if slots == 0 || slots > MR_MAX_INDEX - MIN_INDEX + 1 {
        MR_MAX_INDEX
    } else {
        MIN_INDEX + slots - 1
    }
}

pub const fn make(index: u32, tag: u8) -> u32 {
    (index << TAG_BITS) | tag as u32
}

pub const fn index(key: u32) -> u32 {
    key >> TAG_BITS
}

pub const fn tag(key: u32) -> u8 {
    (key & 0xff) as u8
}

/// How far the tag moves a round: odd, so that 256 rounds pass before a
/// tag comes back; near 256 / golden ratio, so that the tags of the next
/// few rounds are far from each other.
pub const TAG_STRIDE: u32 = 157;

/// The tag of keys handed out in allocation round `round` (the number of
/// times the cyclic allocator went around).
pub const fn round_tag(round: u32) -> u8 {
    round.wrapping_mul(TAG_STRIDE) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        for i in [MIN_INDEX, 2, 0x1234, MAX_INDEX] {
            for t in [0u8, 1, 0x7f, 0xff] {
                let k = make(i, t);
                assert_eq!(index(k), i);
                assert_eq!(tag(k), t);
            }
        }
        assert_eq!(make(MAX_INDEX, 0xff), u32::MAX);
    }

    #[test]
    fn mr_slots() {
        assert_eq!(mr_max_index(0), MR_MAX_INDEX);
        assert_eq!(mr_max_index(1), MIN_INDEX);
        assert_eq!(mr_max_index(100), 100);
        assert_eq!(mr_max_index(MR_MAX_INDEX), MR_MAX_INDEX);
        assert_eq!(mr_max_index(u32::MAX), MR_MAX_INDEX);
        assert!(mr_max_index(u32::MAX) < MW_MIN_INDEX);
    }

    /// A key its consumer moved up to 98 times (a window bound that often,
    /// a fast MR registered again) never names its slot's next tenant, nor
    /// what that tenant's consumer moves it to up to 98 times. With a tag
    /// that stepped by one a round, one move was enough.
    #[test]
    fn re_keyed_tags_stay_clear_of_the_next_tenant() {
        for round in 0..512u32 {
            let old = round_tag(round);
            let new = round_tag(round + 1);
            for i in 0..=98u8 {
                for j in 0..=98u8 {
                    assert_ne!(old.wrapping_add(i), new.wrapping_add(j), "round {round}");
                }
            }
        }
    }

    /// What `__xa_alloc_cyclic` does: the first free index at or after
    /// `next`, else the first from `min`; `true` when it went around.
    fn alloc_cyclic(used: &[bool], min: usize, next: &mut usize) -> Option<(usize, bool)> {
        let found = (*next..used.len())
            .find(|&i| !used[i])
            .map(|i| (i, false))
            .or_else(|| {
                (min..used.len())
                    .find(|&i| !used[i])
                    .map(|i| (i, *next > min))
            })?;
        *next = found.0 + 1;
        Some(found)
    }

    proptest::proptest! {
        /// Whatever the order of registrations and deregistrations, a key
        /// comes back only after the allocator went around 256 times.
        #[test]
        fn round_tags_never_repeat_a_slot_key(ops in proptest::collection::vec(0u8..8, 1..4000)) {
            const MIN: usize = 1;
            let mut used = [false; 9];
            let mut keys: Vec<Vec<(u32, u32)>> = vec![Vec::new(); used.len()];
            let (mut next, mut round) = (MIN, 0u32);
            let mut live: Vec<usize> = Vec::new();
            for op in ops {
                if op < 5 || live.is_empty() {
                    let Some((i, wrapped)) = alloc_cyclic(&used, MIN, &mut next) else {
                        continue;
                    };
                    if wrapped {
                        round += 1;
                    }
                    let k = make(i as u32, round_tag(round));
                    let again = keys[i].iter().find(|&&(old, r)| old == k && round - r < 256);
                    proptest::prop_assert!(again.is_none(), "slot {} key {:#x} again", i, k);
                    keys[i].push((k, round));
                    used[i] = true;
                    live.push(i);
                } else {
                    let i = live.swap_remove(op as usize % live.len());
                    used[i] = false;
                }
            }
        }
    }
}
