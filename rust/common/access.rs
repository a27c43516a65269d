// SPDX-License-Identifier: GPL-2.0

//! Memory access rights (enum ib_access_flags) and the argument checks of
//! memory registration that need no kernel.

pub const LOCAL_WRITE: u32 = 1 << 0;
pub const REMOTE_WRITE: u32 = 1 << 1;
pub const REMOTE_READ: u32 = 1 << 2;
pub const REMOTE_ATOMIC: u32 = 1 << 3;
pub const MW_BIND: u32 = 1 << 4;
pub const ZERO_BASED: u32 = 1 << 5;
pub const ON_DEMAND: u32 = 1 << 6;
pub const HUGETLB: u32 = 1 << 7;
pub const FLUSH_GLOBAL: u32 = 1 << 8;
pub const FLUSH_PERSISTENT: u32 = 1 << 9;
/// Bits 20..=29: hints a device may ignore (perftest always sets relaxed
/// ordering, bit 20).
pub const OPTIONAL: u32 = 0x3ff0_0000;

/// What oxe registers with. FLUSH_PERSISTENT is known but not offered: it
/// needs persistent memory under the MR (rxe refuses other pages too).
pub const SUPPORTED: u32 = LOCAL_WRITE
    | REMOTE_WRITE
    | REMOTE_READ
    | REMOTE_ATOMIC
    | MW_BIND
    | ZERO_BASED
    | ON_DEMAND
    | HUGETLB
    | FLUSH_GLOBAL
    | OPTIONAL;

/// Rights that make the pages writable by the device, so they are pinned
/// with FOLL_WRITE.
pub const ANY_WRITE: u32 = LOCAL_WRITE | REMOTE_WRITE | REMOTE_ATOMIC;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegError {
    /// EINVAL: bad flags, empty or wrapping range.
    Invalid,
    /// EOPNOTSUPP: a known right oxe does not offer.
    NotSupported,
}

/// Page-granular geometry of a user registration: `npages` pages starting at
/// the page holding `start`, whose first byte is at `offset` in that page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UserRange {
    pub first_page_va: u64,
    pub offset: u64,
    pub npages: u64,
}

/// Checks a reg_user_mr request: access bits, and that neither
/// `start + length`, its page-aligned end, nor `iova + length` passes the top
/// of u64 (rxe's iova overflow family).
pub fn check_user_reg(
    start: u64,
    length: u64,
    iova: u64,
    access: u32,
    page_shift: u32,
) -> Result<UserRange, RegError> {
    check_access(access)?;
    if length == 0 {
        return Err(RegError::Invalid);
    }
    let page_mask = (1u64 << page_shift) - 1;
    let end = start.checked_add(length).ok_or(RegError::Invalid)?;
    let aligned_end = end.checked_add(page_mask).ok_or(RegError::Invalid)? & !page_mask;
    iova.checked_add(length).ok_or(RegError::Invalid)?;
    let first_page_va = start & !page_mask;
    Ok(UserRange {
        first_page_va,
        offset: start & page_mask,
        npages: (aligned_end - first_page_va) >> page_shift,
    })
}

pub fn check_access(access: u32) -> Result<(), RegError> {
    if access & (REMOTE_WRITE | REMOTE_ATOMIC) != 0 && access & LOCAL_WRITE == 0 {
        return Err(RegError::Invalid);
    }
    let known = SUPPORTED | ON_DEMAND | FLUSH_GLOBAL | FLUSH_PERSISTENT;
    if access & !known != 0 {
        return Err(RegError::Invalid);
    }
    if access & !SUPPORTED != 0 {
        return Err(RegError::NotSupported);
    }
    Ok(())
}

/// A PD's identity: a small integer, unique among the live PDs.
pub type PdId = u32;

/// A user MR's PD and rights, which re-registration changes together. Packed
/// into one word, so that one atomic store publishes both and a check never
/// sees the new PD with the old rights or the reverse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PdRights {
    pub pd: PdId,
    pub access: u32,
}

impl PdRights {
    pub const fn pack(self) -> u64 {
        ((self.pd as u64) << 32) | self.access as u64
    }

    pub const fn unpack(word: u64) -> PdRights {
        PdRights {
            pd: (word >> 32) as u32,
            access: word as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_rules() {
        assert_eq!(check_access(0), Ok(()));
        assert_eq!(
            check_access(LOCAL_WRITE | REMOTE_WRITE | REMOTE_READ | REMOTE_ATOMIC),
            Ok(())
        );
        assert_eq!(check_access(LOCAL_WRITE | (1 << 20)), Ok(()));
        assert_eq!(check_access(REMOTE_WRITE), Err(RegError::Invalid));
        assert_eq!(
            check_access(REMOTE_ATOMIC | REMOTE_READ),
            Err(RegError::Invalid)
        );
        assert_eq!(check_access(REMOTE_READ), Ok(()));
        assert_eq!(check_access(1 << 10), Err(RegError::Invalid));
        assert_eq!(check_access(1 << 31), Err(RegError::Invalid));
        assert_eq!(check_access(ON_DEMAND), Ok(()));
        assert_eq!(check_access(FLUSH_GLOBAL), Ok(()));
        assert_eq!(check_access(FLUSH_PERSISTENT), Err(RegError::NotSupported));
    }

    #[test]
    fn ranges() {
        let r = check_user_reg(0x1000, 0x1000, 0x1000, 0, 12).unwrap();
        assert_eq!(
            r,
            UserRange {
                first_page_va: 0x1000,
                offset: 0,
                npages: 1
            }
        );
        let r = check_user_reg(0x1ffe, 4, 7, 0, 12).unwrap();
        assert_eq!(
            r,
            UserRange {
                first_page_va: 0x1000,
                offset: 0xffe,
                npages: 2
            }
        );
        assert_eq!(
            check_user_reg(0x1000, 0, 0x1000, 0, 12),
            Err(RegError::Invalid)
        );
        assert_eq!(
            check_user_reg(u64::MAX, 2, 0, 0, 12),
            Err(RegError::Invalid)
        );
        // The end fits but its page does not.
        assert_eq!(
            check_user_reg(u64::MAX - 0x1ff, 0x100, 0, 0, 12),
            Err(RegError::Invalid)
        );
        assert_eq!(
            check_user_reg(0x1000, 0x1000, u64::MAX - 0xfff, 0, 12),
            Err(RegError::Invalid)
        );
        assert!(check_user_reg(0x1000, 0x1000, u64::MAX - 0x1000, 0, 12).is_ok());
    }

    #[test]
    fn pd_rights_pack() {
        let r = PdRights {
            pd: 0xdead_beef,
            access: LOCAL_WRITE | REMOTE_WRITE | (1 << 29),
        };
        assert_eq!(PdRights::unpack(r.pack()), r);
        // Neither half spills into the other.
        for (pd, access) in [(0, u32::MAX), (u32::MAX, 0), (1, 0), (0, 1)] {
            let r = PdRights { pd, access };
            assert_eq!(PdRights::unpack(r.pack()), r);
        }
        assert_ne!(
            PdRights { pd: 1, access: 0 }.pack(),
            PdRights { pd: 0, access: 1 }.pack()
        );
    }

    proptest::proptest! {
        #[test]
        fn pd_rights_roundtrip(pd: u32, access: u32) {
            let r = PdRights { pd, access };
            proptest::prop_assert_eq!(PdRights::unpack(r.pack()), r);
        }
    }
}
