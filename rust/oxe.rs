// SPDX-License-Identifier: GPL-2.0

//! oxe: a soft-RoCE (RoCEv2) RDMA provider.
//!
//! oxe registers `ib_device`s with the RDMA core, created by
//! `rdma link add NAME type oxe netdev DEV`. It speaks rdma_rxe's user ABI and
//! reports `RDMA_DRIVER_RXE`, so the stock librxe provider drives it.
//!
//! One file per RDMA object or pipeline stage, as in rdma_rxe: `device` (the
//! ib_device, its contexts and queries), `pd`, `mr/` (memory registration),
//! `cq`, `keys` (the lock-free key table), `link` (rdma link ops, netdev and
//! module notifiers). `ffi/` is where the RDMA core calls in: the ops table
//! and the entry points, which turn the core's pointers into references and
//! call the objects' safe methods; `bindings` are the generated bindings;
//! `common/` holds the logic that also builds on the host.

use kernel::prelude::*;

/// EOPNOTSUPP, which `kernel::error::code` does not name.
pub(crate) fn eopnotsupp() -> Error {
    Error::from_errno(-(bindings::EOPNOTSUPP as kernel::ffi::c_int))
}

mod ah;
mod bindings;
mod comp;
mod cq;
mod crc;
mod device;
mod ffi;
mod fifo;
mod ib;
mod irqlock;
mod keys;
mod mr;
mod mw;
mod net;
mod pd;
mod pkt;
mod qp;
mod queue;
mod req;
mod resp;
mod sgl;
mod srq;
mod stats;
mod ud;
mod udp;
mod wq;

// Shared with the host crate in common/: `pub` there is the host crate's API,
// and not every item is used by the kernel side.
#[allow(unreachable_pub, dead_code)]
#[path = "common/access.rs"]
mod access;
#[allow(unreachable_pub, dead_code)]
#[path = "common/help.rs"]
mod help;
#[allow(unreachable_pub, dead_code)]
#[path = "common/icrc.rs"]
mod icrc;
#[allow(unreachable_pub, dead_code)]
#[path = "common/ip.rs"]
mod ip;
#[allow(unreachable_pub, dead_code)]
#[path = "common/key.rs"]
mod key;
#[allow(unreachable_pub, dead_code)]
#[path = "common/mtt.rs"]
mod mtt;
#[allow(unreachable_pub, dead_code)]
#[path = "common/mw_rules.rs"]
mod mw_rules;
#[allow(unreachable_pub, dead_code)]
#[path = "common/pace.rs"]
mod pace;
#[allow(unreachable_pub, dead_code)]
#[path = "common/packet.rs"]
mod packet;
#[allow(unreachable_pub, dead_code)]
#[path = "common/params.rs"]
mod params;
#[allow(unreachable_pub, dead_code)]
#[path = "common/pma.rs"]
mod pma;
#[allow(unreachable_pub, dead_code)]
#[path = "common/replay.rs"]
mod replay;
#[allow(unreachable_pub, dead_code)]
#[path = "common/wire.rs"]
mod wire;
#[allow(unreachable_pub, dead_code)]
#[path = "common/wqe.rs"]
mod wqe;

module! {
    type: OxeModule,
    name: "rdma_oxe",
    authors: ["oxe developers"],
    description: "Soft-RoCE RDMA provider written in Rust",
    license: "GPL",
    alias: ["rdma-link-oxe"],
    params: {
        wire_loopback: u8 {
            default: 0,
            description: "Send traffic between QPs of one device through the RoCEv2 packet path (headers, ICRC, skbs) instead of handing packets over",
        },
        qp_spread: u8 {
            default: 0,
            description: "Run each QP's tasks on a CPU of its own (QPs spread over the online CPUs) instead of the CPU that queues them",
        },
        peer_away: u8 {
            default: 1,
            description: "Run the work a process's post hands to a QP on an idle CPU beside the poster, if there is one (x86), rather than on the poster's (0)",
        },
        away_bytes: u32 {
            default: 4096,
            description: "With peer_away, a post's request of this many payload bytes or more goes to another CPU even when that CPU is busy, its copy worth the preemption (0: only to an idle one)",
        },
        help_bytes: u32 {
            default: 32768,
            description: "A copy of this many bytes or more (a loopback packet's payload) is shared, in 16 KiB pieces, with a helper on another CPU that is idle or runs a process rather than a worker (x86; 0: never); a copy of 64 KiB or less only while one flow copies",
        },
        help_linger_us: u32 {
            default: 20,
            description: "A helper that shared a copy waits up to this many microseconds on its CPU for the next one, while nothing else wants that CPU, before it sleeps (0: it sleeps at once)",
        },
        yield_ms: u8 {
            default: 2,
            description: "A QP task that has requeued itself without a break for this many ms then runs a quarter as long at normal priority (or until its flow pauses), sharing its CPU with the processes there (0: never)",
        },
        train: u8 {
            default: 8,
            description: "Packets a QP's requester hands to the IP stack in one call on the wire, as one UDP GSO train, so that the NIC is notified once per train (at most 32; 0 or 1: each packet alone)",
        },
        mr_keys: u32 {
            default: 0,
            description: "MR keys per device, the slots of its key table (0: all 2^23 - 1; max_mr says how many). A smaller table goes around sooner: for tests of stale keys and of a full table",
        },
        icrc: u8 {
            default: 0,
            description: "The CRC-32 code of the ICRC: 0 the faster for headers and for payloads, timed at load; 1 the kernel's crc32_le(); 2 oxe's slice-by-8 tables (anything else: the module does not load)",
        },
    },
}

struct OxeModule {
    // Dropped in this order: the devices (and their QPs) go before the
    // workqueue their work runs on.
    _link: Pin<KBox<ffi::link::Registrations>>,
    // Then the wire's receive queue, once no socket is left to feed it.
    _net: ffi::net::Net,
    _wq: wq::Wq,
    _help_stats: Option<wq::HelpStats>,
}

impl kernel::Module for OxeModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        crc::choose()?;
        let wq = wq::Wq::create()?;
        let net = ffi::net::Net::create()?;
        let link = ffi::link::Registrations::register(module)?;
        pr_info!("loaded\n");
        Ok(OxeModule {
            _link: link,
            _net: net,
            _wq: wq,
            _help_stats: wq::HelpStats::create(),
        })
    }
}
