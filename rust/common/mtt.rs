// SPDX-License-Identifier: GPL-2.0

//! oxe's memory translation table. A registration maps `length` bytes seen at
//! `iova` onto pinned pages. Physically contiguous pages (THP, hugetlbfs,
//! large folios) collapse into one [`Run`], so a 1 GiB THP-backed region is
//! 512 entries rather than 262144. Lookups binary-search the runs: O(log n),
//! no allocation.

/// `count` physically contiguous pages, the first of which is page `first` of
/// the region and has frame number `pfn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Run {
    pub first: u64,
    pub pfn: u64,
    pub count: u64,
}

/// Folds the frame numbers of a region's pages, in page order, into runs.
#[derive(Debug, Default)]
pub struct RunBuilder {
    cur: Option<Run>,
    pages: u64,
}

impl RunBuilder {
    pub const fn new() -> Self {
        RunBuilder {
            cur: None,
            pages: 0,
        }
    }

    /// Adds the next `count` pages, whose frames follow each other from
    /// `pfn`. Returns the run it closed, if `pfn` does not continue the
    /// current one.
    pub fn push_run(&mut self, pfn: u64, count: u64) -> Option<Run> {
        if count == 0 {
            return None;
        }
        let index = self.pages;
        self.pages += count;
        match &mut self.cur {
            Some(run) if run.pfn.checked_add(run.count) == Some(pfn) => {
                run.count += count;
                None
            }
            cur => cur.replace(Run {
                first: index,
                pfn,
                count,
            }),
        }
    }

    /// The last run, once every page has been pushed.
    pub fn finish(self) -> Option<Run> {
        self.cur
    }

    pub fn pages(&self) -> u64 {
        self.pages
    }
}

/// The run holding page `page`, by binary search.
pub fn find(runs: &[Run], page: u64) -> Option<usize> {
    let i = runs.partition_point(|r| r.first <= page).checked_sub(1)?;
    let r = runs.get(i)?;
    (page - r.first < r.count).then_some(i)
}

/// Where a registration's bytes sit: `length` bytes seen at `iova`, the first
/// of them `offset` bytes into page 0 of pages of `1 << page_shift` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    pub iova: u64,
    pub length: u64,
    pub offset: u64,
    pub page_shift: u32,
}

impl Region {
    /// Byte position, counted from the start of page 0, of `iova`, provided
    /// `[iova, iova + len)` lies inside the region. Never overflows, whatever
    /// the arguments.
    pub fn locate(&self, iova: u64, len: u64) -> Option<u64> {
        let off = iova.checked_sub(self.iova)?;
        if len > self.length || off > self.length - len {
            return None;
        }
        self.offset.checked_add(off)
    }

    /// The pages behind `[iova, iova + len)`, one fragment per page.
    pub fn cursor<'a>(&self, runs: &'a [Run], iova: u64, len: u64) -> Option<Cursor<'a>> {
        let pos = self.locate(iova, len)?;
        let page = pos >> self.page_shift;
        let run = if len == 0 { 0 } else { find(runs, page)? };
        Some(Cursor {
            runs,
            run,
            page,
            in_page: pos & ((1u64 << self.page_shift) - 1),
            remaining: len,
            page_shift: self.page_shift,
        })
    }
}

/// A piece of an access that lies in one page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fragment {
    pub pfn: u64,
    pub offset: u32,
    pub len: u32,
}

/// Iterates over the pages of a checked access.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    runs: &'a [Run],
    run: usize,
    page: u64,
    in_page: u64,
    remaining: u64,
    page_shift: u32,
}

impl Cursor<'_> {
    pub fn remaining(&self) -> u64 {
        self.remaining
    }
}

impl Iterator for Cursor<'_> {
    type Item = Fragment;

    fn next(&mut self) -> Option<Fragment> {
        if self.remaining == 0 {
            return None;
        }
        // Runs are contiguous in page index, so the next page is in this run
        // or the next one; a gap would be a corrupt table: stop.
        let mut r = *self.runs.get(self.run)?;
        if self.page - r.first >= r.count {
            self.run += 1;
            r = *self.runs.get(self.run)?;
            if self.page != r.first {
                return None;
            }
        }
        let page_size = 1u64 << self.page_shift;
        let len = (page_size - self.in_page).min(self.remaining);
        let frag = Fragment {
            pfn: r.pfn + (self.page - r.first),
            offset: self.in_page as u32,
            len: len as u32,
        };
        self.remaining -= len;
        self.page += 1;
        self.in_page = 0;
        Some(frag)
    }
}

/// Why an access was refused, each mapping to its own completion status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessError {
    /// No such key, or a stale one (the slot has a new tenant).
    BadKey,
    /// The key belongs to another protection domain.
    WrongPd,
    /// The registration does not grant a right the access needs.
    NoRight,
    /// The range is not inside the registration.
    OutOfRange,
}

/// What an access is checked against: the registration's key, PD and rights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub key: u32,
    pub pd: crate::access::PdId,
    pub access: u32,
}

/// One access to check: the key presented, the PD of the QP presenting it,
/// the range, and the rights the access needs (none for a local read).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request {
    pub key: u32,
    pub pd: crate::access::PdId,
    pub iova: u64,
    pub len: u64,
    pub rights: u32,
}

/// The key, PD and rights part of the access check.
pub fn check_grant(grant: &Grant, req: &Request) -> Result<(), AccessError> {
    if req.key != grant.key {
        return Err(AccessError::BadKey);
    }
    if req.pd != grant.pd {
        return Err(AccessError::WrongPd);
    }
    if req.rights & !grant.access != 0 {
        return Err(AccessError::NoRight);
    }
    Ok(())
}

/// The one access check, for local (lkey) and remote (rkey) use alike.
pub fn check<'a>(
    grant: &Grant,
    region: &Region,
    runs: &'a [Run],
    req: &Request,
) -> Result<Cursor<'a>, AccessError> {
    check_grant(grant, req)?;
    region
        .cursor(runs, req.iova, req.len)
        .ok_or(AccessError::OutOfRange)
}

/// The pieces of `[va, va + len)` that lie in one page of `1 << page_shift`
/// bytes each: (address, offset in its page, length), in order. Ends early
/// if the range runs past the top of u64.
pub fn page_pieces(va: u64, len: u64, page_shift: u32) -> impl Iterator<Item = (u64, u32, u32)> {
    let size = 1u64 << page_shift;
    let mut done = 0u64;
    core::iter::from_fn(move || {
        if done >= len {
            return None;
        }
        let a = va.checked_add(done)?;
        let off = a & (size - 1);
        let n = (size - off).min(len - done);
        done += n;
        Some((a, off as u32, n as u32))
    })
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    /// The model: runs folded a page at a time.
    fn build(pfns: &[u64]) -> Vec<Run> {
        let mut runs: Vec<Run> = Vec::new();
        for (i, &pfn) in pfns.iter().enumerate() {
            match runs.last_mut() {
                Some(r) if r.pfn + r.count == pfn => r.count += 1,
                _ => runs.push(Run {
                    first: i as u64,
                    pfn,
                    count: 1,
                }),
            }
        }
        runs
    }

    #[test]
    fn thp_collapses() {
        // 1 GiB of 2 MiB folios at scattered places.
        let pfns: Vec<u64> = (0..512u64)
            .flat_map(|h| {
                let base = (h * 7919 % 4096) * 512;
                base..base + 512
            })
            .collect();
        let runs = build(&pfns);
        assert!(runs.len() <= 512);
        assert_eq!(runs.iter().map(|r| r.count).sum::<u64>(), 262_144);
    }

    #[test]
    fn cursor_splits_at_pages() {
        let runs = build(&[10, 11, 50]);
        let region = Region {
            iova: 0x7000,
            length: 3 * 4096 - 100,
            offset: 100,
            page_shift: 12,
        };
        let frags: Vec<_> = region.cursor(&runs, 0x7000 + 4000, 5000).unwrap().collect();
        assert_eq!(
            frags,
            [
                Fragment {
                    pfn: 11,
                    offset: 4,
                    len: 4092
                },
                Fragment {
                    pfn: 50,
                    offset: 0,
                    len: 908
                },
            ]
        );
    }

    #[test]
    fn range_edges() {
        let runs = build(&[1, 2]);
        let region = Region {
            iova: u64::MAX - 8191,
            length: 8192,
            offset: 0,
            page_shift: 12,
        };
        assert!(region.cursor(&runs, u64::MAX - 8191, 8192).is_some());
        assert!(region.cursor(&runs, u64::MAX, 1).is_some());
        assert!(region.cursor(&runs, u64::MAX, 2).is_none());
        assert!(region.cursor(&runs, u64::MAX - 8192, 1).is_none());
        assert!(region.cursor(&runs, 0, 1).is_none());
        assert!(region.cursor(&runs, u64::MAX - 8191, u64::MAX).is_none());
    }

    #[test]
    fn check_order_and_errors() {
        let runs = build(&[7]);
        let region = Region {
            iova: 0x1000,
            length: 4096,
            offset: 0,
            page_shift: 12,
        };
        let g = Grant {
            key: 0x105,
            pd: 1,
            access: crate::access::LOCAL_WRITE | crate::access::REMOTE_READ,
        };
        let rr = crate::access::REMOTE_READ;
        assert!(check(
            &g,
            &region,
            &runs,
            &Request {
                key: 0x105,
                pd: 1,
                iova: 0x1000,
                len: 8,
                rights: rr
            }
        )
        .is_ok());
        assert_eq!(
            check(
                &g,
                &region,
                &runs,
                &Request {
                    key: 0x106,
                    pd: 1,
                    iova: 0x1000,
                    len: 8,
                    rights: rr
                }
            )
            .err(),
            Some(AccessError::BadKey)
        );
        assert_eq!(
            check(
                &g,
                &region,
                &runs,
                &Request {
                    key: 0x105,
                    pd: 2,
                    iova: 0x1000,
                    len: 8,
                    rights: rr
                }
            )
            .err(),
            Some(AccessError::WrongPd)
        );
        let rw = crate::access::REMOTE_WRITE;
        assert_eq!(
            check(
                &g,
                &region,
                &runs,
                &Request {
                    key: 0x105,
                    pd: 1,
                    iova: 0x1000,
                    len: 8,
                    rights: rw
                }
            )
            .err(),
            Some(AccessError::NoRight)
        );
        assert_eq!(
            check(
                &g,
                &region,
                &runs,
                &Request {
                    key: 0x105,
                    pd: 1,
                    iova: 0x1ff9,
                    len: 8,
                    rights: rr
                }
            )
            .err(),
            Some(AccessError::OutOfRange)
        );
        assert_eq!(
            check(
                &g,
                &region,
                &runs,
                &Request {
                    key: 0x105,
                    pd: 1,
                    iova: 0x1000,
                    len: 0,
                    rights: 0
                }
            )
            .map(|c| c.count()),
            Ok(0)
        );
    }

    /// A layout: pages in runs of random lengths at random frames.
    fn layout() -> impl Strategy<Value = Vec<u64>> {
        prop::collection::vec((1u64..600, 0u64..1 << 40), 1..40).prop_map(|runs| {
            runs.into_iter()
                .flat_map(|(n, base)| base..base + n)
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Against the simple model (one frame per page, as rxe keeps it).
        #[test]
        fn cursor_matches_flat_model(
            pfns in layout(),
            offset in 0u64..4096,
            iova_base in prop_oneof![Just(u64::MAX), Just(0u64), any::<u64>()],
            a in any::<u64>(), b in any::<u64>(),
        ) {
            let runs = build(&pfns);
            prop_assert_eq!(runs.iter().map(|r| r.count).sum::<u64>(), pfns.len() as u64);
            for w in runs.windows(2) {
                prop_assert_eq!(w[0].first + w[0].count, w[1].first);
                prop_assert!(w[0].pfn + w[0].count != w[1].pfn, "mergeable runs");
            }
            let total = pfns.len() as u64 * 4096 - offset;
            // Fit the region below the top of u64.
            let iova = iova_base.min(u64::MAX - total);
            let region = Region { iova, length: total, offset, page_shift: 12 };
            let start = iova.wrapping_add(a % (total + 2)).wrapping_sub(1);
            let len = b % (total + 2);
            let inside = start >= iova && len <= total && start - iova <= total - len;
            match region.cursor(&runs, start, len) {
                None => prop_assert!(!inside),
                Some(c) => {
                    prop_assert!(inside);
                    let mut pos = offset + (start - iova);
                    let mut sum = 0u64;
                    for f in c {
                        prop_assert_eq!(f.pfn, pfns[(pos / 4096) as usize]);
                        prop_assert_eq!(u64::from(f.offset), pos % 4096);
                        prop_assert!(f.len > 0 && u64::from(f.offset + f.len) <= 4096);
                        pos += u64::from(f.len);
                        sum += u64::from(f.len);
                    }
                    prop_assert_eq!(sum, len);
                }
            }
        }

        /// Pushing pages in contiguous pieces (as the pin loop does, a
        /// piece per call of `oxe_pages_run`, cut wherever a batch ends)
        /// builds the model's runs.
        #[test]
        fn push_run_matches_push(pfns in layout(), cuts in prop::collection::vec(1usize..700, 1..40)) {
            let mut b = RunBuilder::new();
            let mut runs = Vec::new();
            let (mut i, mut c) = (0usize, 0usize);
            while i < pfns.len() {
                // The contiguous piece from `i`, at most the next cut long.
                let mut k = 1;
                while i + k < pfns.len() && k < cuts[c % cuts.len()] && pfns[i + k] == pfns[i] + k as u64 {
                    k += 1;
                }
                runs.extend(b.push_run(pfns[i], k as u64));
                prop_assert_eq!(b.push_run(pfns[i] + k as u64, 0), None);
                i += k;
                c += 1;
            }
            prop_assert_eq!(b.pages(), pfns.len() as u64);
            runs.extend(b.finish());
            prop_assert_eq!(runs, build(&pfns));
        }

        #[test]
        fn find_matches_model(pfns in layout(), page in any::<u64>()) {
            let runs = build(&pfns);
            let page = page % (pfns.len() as u64 + 3);
            match find(&runs, page) {
                Some(i) => {
                    let r = runs[i];
                    prop_assert!(page >= r.first && page < r.first + r.count);
                    prop_assert_eq!(r.pfn + (page - r.first), pfns[page as usize]);
                }
                None => prop_assert!(page >= pfns.len() as u64),
            }
        }
    }

    #[test]
    fn page_pieces_split_at_page_boundaries() {
        let v: Vec<_> = page_pieces(0x1ff0, 0x2020, 12).collect();
        assert_eq!(
            v,
            [
                (0x1ff0, 0xff0, 0x10),
                (0x2000, 0, 0x1000),
                (0x3000, 0, 0x1000),
                (0x4000, 0, 0x10)
            ]
        );
        assert_eq!(page_pieces(0x1000, 0, 12).count(), 0);
        // Past the top of u64: stops where the address would wrap.
        let top: Vec<_> = page_pieces(u64::MAX - 0xfff, 0x2000, 12).collect();
        assert_eq!(top, [(u64::MAX - 0xfff, 0, 0x1000)]);
    }

    proptest! {
        #[test]
        fn page_pieces_cover_the_range_in_order(va in 0u64..1 << 48, len in 0u64..1 << 20, shift in 12u32..22) {
            let mut at = va;
            for (a, off, n) in page_pieces(va, len, shift) {
                prop_assert_eq!(a, at);
                prop_assert!(n > 0);
                prop_assert_eq!(u64::from(off), a & ((1 << shift) - 1));
                prop_assert!(u64::from(off) + u64::from(n) <= 1 << shift);
                at += u64::from(n);
            }
            prop_assert_eq!(at, va + len);
        }
    }
}
