// SPDX-License-Identifier: GPL-2.0

//! Memory keys: `index << 8 | tag`. The index names a slot of the device's key
//! table; the tag changes every time the slot is reused, so a key kept after
//! deregistration never matches the slot's next tenant.

pub const TAG_BITS: u32 = 8;
/// Indices are 24 bits; 0 is never handed out (a zeroed key is never valid).
pub const MIN_INDEX: u32 = 1;
pub const MAX_INDEX: u32 = (1 << (32 - TAG_BITS)) - 1;
/// MRs take the lower half of the indices and memory windows the upper
/// half, so the data path tells them apart by the key alone (rxe does the
/// same with its pools' index ranges).
pub const MR_MAX_INDEX: u32 = (1 << (31 - TAG_BITS)) - 1;
pub const MW_MIN_INDEX: u32 = MR_MAX_INDEX + 1;

pub const fn make(index: u32, tag: u8) -> u32 {
    (index << TAG_BITS) | tag as u32
}

pub const fn index(key: u32) -> u32 {
    key >> TAG_BITS
}

pub const fn tag(key: u32) -> u8 {
    (key & 0xff) as u8
}

/// The tag for a slot's next tenant, given the tag of its last one (if the
/// slot was used before).
pub const fn next_tag(last: Option<u8>) -> u8 {
    match last {
        Some(t) => t.wrapping_add(1),
        None => 0,
    }
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
    fn reuse_changes_the_key() {
        let mut last = None;
        let mut seen = [false; 256];
        for _ in 0..256 {
            let t = next_tag(last);
            assert!(!seen[t as usize], "tag repeated before 256 reuses");
            seen[t as usize] = true;
            if let Some(l) = last {
                assert_ne!(make(5, l), make(5, t));
            }
            last = Some(t);
        }
    }
}
