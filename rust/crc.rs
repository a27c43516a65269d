// SPDX-License-Identifier: GPL-2.0

//! Which CRC-32 code computes the ICRC of every packet on the wire: the
//! kernel's `crc32_le()` or oxe's slice-by-8 tables (`common/icrc.rs`).
//! The kernel's uses PCLMULQDQ from 16 bytes on, behind a
//! `kernel_fpu_begin()`; where that instruction is emulated (QEMU's TCG) or
//! the input is a few header bytes, the tables are faster. As the kernel's
//! RAID-6 and XOR code pick their routines, oxe times both at load, for
//! short and for long input, and keeps the faster of each (the `icrc`
//! parameter can impose one).

use core::hint::black_box;
use core::sync::atomic::{AtomicBool, Ordering};

use kernel::prelude::*;

use crate::ib::skb::kernel_crc32_le;

/// Input of this many bytes or more is long: a payload, not a header.
const LONG: usize = 256;

static TABLES_SHORT: AtomicBool = AtomicBool::new(false);
static TABLES_LONG: AtomicBool = AtomicBool::new(false);

/// The CRC-32 register update of the ICRC (no inversion on either side).
pub(crate) fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    let tables = if data.len() < LONG {
        &TABLES_SHORT
    } else {
        &TABLES_LONG
    };
    if tables.load(Ordering::Relaxed) {
        crate::icrc::crc32_le(crc, data)
    } else {
        kernel_crc32_le(crc, data)
    }
}

/// The least time in ns of `f` over `data`, `n` times in a row, in 5 tries
/// (the least is the one least disturbed).
fn time(f: fn(u32, &[u8]) -> u32, data: &[u8], n: u32) -> u64 {
    (0..5)
        .map(|_| {
            let t0 = crate::wq::now_ns();
            let mut c = !0u32;
            for _ in 0..n {
                c = f(black_box(c), black_box(data));
            }
            black_box(c);
            crate::wq::now_ns().saturating_sub(t0) / u64::from(n)
        })
        .min()
        .unwrap_or(0)
}

/// Sets the code for short and for long input, from the `icrc` parameter:
/// 1 the kernel's, 2 the tables, 0 whichever was faster here on 20 bytes
/// (an IPv4 header) and on 1 KiB (a payload). Any other value is refused
/// (EINVAL, and the module does not load), not taken for one of these.
pub(crate) fn choose() -> Result {
    let (short, long) = match *crate::module_parameters::icrc.value() {
        1 => (false, false),
        2 => (true, true),
        0 => {
            let buf = [0x5au8; 1024];
            let (hdr, payload) = (&buf[..20], &buf[..]);
            let k = (
                time(kernel_crc32_le, hdr, 256),
                time(kernel_crc32_le, payload, 16),
            );
            let t = (
                time(crate::icrc::crc32_le, hdr, 256),
                time(crate::icrc::crc32_le, payload, 16),
            );
            pr_info!(
                "ICRC: crc32_le() {} ns on 20 bytes and {} ns on 1 KiB, slice-by-8 {} and {} ns\n",
                k.0,
                k.1,
                t.0,
                t.1
            );
            // The same CRC, or the tables are not used (a CRC that disagrees
            // with rxe's would drop every packet).
            if kernel_crc32_le(!0, payload) != crate::icrc::crc32_le(!0, payload) {
                pr_warn!("ICRC: slice-by-8 disagrees with crc32_le(), not used\n");
                (false, false)
            } else {
                (t.0 < k.0, t.1 < k.1)
            }
        }
        v => {
            pr_err!(
                "icrc={}: 0 (timed at load), 1 (crc32_le()) or 2 (tables)\n",
                v
            );
            return Err(EINVAL);
        }
    };
    TABLES_SHORT.store(short, Ordering::Relaxed);
    TABLES_LONG.store(long, Ordering::Relaxed);
    Ok(())
}
