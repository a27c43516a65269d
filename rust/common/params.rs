// SPDX-License-Identifier: GPL-2.0

//! Device and port parameters. The values match rdma_rxe's
//! (drivers/infiniband/sw/rxe/rxe_param.h): librxe, perftest and an rxe peer
//! size their queues, read depths and MTU from them.

/// rxe's uverbs ABI version (drivers/infiniband/sw/rxe/rxe.h); librxe takes 1..2.
pub const UVERBS_ABI_VERSION: u32 = 2;

/// IEEE vendor id for "no vendor"; perftest then disables inline data.
pub const VENDOR_ID: u32 = 0xff_ffff;
pub const MAX_MR_SIZE: u64 = u64::MAX;
pub const PAGE_SIZE_CAP: u64 = 0xffff_f000;
const DEFAULT_MAX: u32 = 1 << 20;
pub const MIN_QP_INDEX: u32 = 16;
pub const MAX_QP: u32 = DEFAULT_MAX - MIN_QP_INDEX;
pub const MAX_QP_WR: u32 = DEFAULT_MAX;
pub const MAX_SGE: u32 = 32;
pub const MAX_SGE_RD: u32 = 32;
/// Inline data room of a send WQE: 32 SGEs' worth, as rxe.
pub const MAX_INLINE_DATA: u32 = MAX_SGE * 16;
pub const MAX_CQ: u32 = DEFAULT_MAX;
pub const MAX_CQE: u32 = (1 << 15) - 1;
pub const MAX_MR: u32 = (DEFAULT_MAX >> 1) - 1;
/// rxe's RXE_MAX_MW (the key table has room for 2^23 of each).
pub const MAX_MW: u32 = (DEFAULT_MAX >> 1) - 1;
pub const MAX_PD: u32 = DEFAULT_MAX;
/// A peer's perftest sets our max_rd_atomic to its own value, so accept rxe's.
pub const MAX_QP_RD_ATOM: u32 = 128;
pub const MAX_QP_INIT_RD_ATOM: u32 = 128;
pub const MAX_RES_RD_ATOM: u32 = 0x3f000;
pub const MAX_FAST_REG_PAGE_LIST_LEN: u32 = 512;
pub const MAX_PKEYS: u16 = 64;
/// Shared receive queues, as rxe (RXE_MAX_SRQ, RXE_MAX_SRQ_WR,
/// RXE_MAX_SRQ_SGE, RXE_MIN_SRQ_WR).
pub const MAX_SRQ: u32 = DEFAULT_MAX - MIN_SRQ_INDEX;
pub const MIN_SRQ_INDEX: u32 = 0x0002_0001;
pub const MAX_SRQ_WR: u32 = DEFAULT_MAX;
pub const MAX_SRQ_SGE: u32 = 27;
pub const MIN_SRQ_WR: u32 = 1;
/// Multicast, as rxe: groups per device, QPs per group, attachments in all.
pub const MAX_MCAST_GRP: u32 = 8192;
pub const MAX_MCAST_QP_ATTACH: u32 = 56;
pub const MAX_TOTAL_MCAST_QP_ATTACH: u32 = 0x70000;
/// The destination QPN of a datagram sent to a multicast group.
pub const MULTICAST_QPN: u32 = 0x00ff_ffff;
/// Address handles per device, as rxe (RXE_MAX_AH); numbered 1..=MAX_AH.
pub const MAX_AH: u32 = (1 << 15) - 1;
pub const LOCAL_CA_ACK_DELAY: u8 = 15;

pub const PORT_GID_TBL_LEN: i32 = 1024;
pub const PORT_MAX_MSG_SZ: u32 = 1 << 31;
pub const PORT_PKEY_TBL_LEN: u16 = 1;
pub const PORT_MAX_VL_NUM: u8 = 1;
/// The one P_Key: default partition, full membership.
pub const DEFAULT_PKEY_FULL: u16 = 0xffff;

/// Bytes of headers (Ethernet, IP, UDP, BTH, extended headers, ICRC) that rxe
/// reserves below the netdev MTU before choosing the IB path MTU.
pub const MAX_HDR_LENGTH: i32 = 80;

/// Packets a requester may have sent and not seen acknowledged (rxe's
/// RXE_MAX_UNACKED_PSNS): bounds what sits in a responder's and a
/// completer's packet queue.
pub const MAX_UNACKED_PSNS: u32 = 128;

/// Packets (sent or received) and WQEs one run of a QP's send or receive
/// task handles before it requeues itself (rdma_rxe's RXE_MAX_ITERATIONS).
/// A run holds the SQ or RQ lock throughout, which modify_qp, query_qp and
/// destroy_qp also take: without a budget a user who refills the SQ as fast
/// as it drains keeps the lock and a worker for as long as it likes.
pub const BUDGET: u32 = 64;

/// A packet's share of a budget: one, and one more for each 4 KiB of its
/// payload, at most the budget: a run moves about as much data as rxe's 64
/// packets of at most 4 KiB (a handed-over packet carries up to 256 KiB, a
/// run of its own).
pub const fn cost(payload: usize) -> u32 {
    let pages = payload / 4096;
    1 + if pages < BUDGET as usize {
        pages as u32
    } else {
        BUDGET
    }
}

/// Packets a requester's turn may send as one train (`oxe_skb_train_send`:
/// one UDP GSO skb whose segments are the packets): a NIC driver then
/// notifies its device once per train rather than once per packet (the
/// module's `train` sets the length, 8 by default). Between
/// two TCG guests that notification (virtio's kick, a trapping write that
/// takes QEMU's big lock) was a quarter of the sending vCPU under
/// `ib_send_bw`. The C side reserves this many IPv4 IDs for each train.
pub const TRAIN_MAX: u32 = 32;

/// Bytes of a train, its IP and UDP headers included: an IPv4 total length
/// holds all of it until the train is split.
pub const TRAIN_BYTES: u32 = 60 * 1024;

/// IP (v6, the larger) and UDP headers of a packet on the wire.
const NET_HDRS: u32 = 40 + 8;

/// Whether a packet of `len` bytes (from its BTH to its ICRC) joins a train
/// of `npkts` packets holding `bytes` (headers included) whose first is
/// `first_len` long (0: no train yet, and anything starts one), with trains
/// of at most `max` packets (the module's `train`, up to `TRAIN_MAX`). The
/// first sets the segment size: no later packet may be longer.
pub fn train_takes(max: u32, npkts: u32, bytes: u32, first_len: u32, len: u32) -> bool {
    npkts == 0
        || (npkts < max.min(TRAIN_MAX)
            && len <= first_len
            && bytes.saturating_add(len).saturating_add(NET_HDRS) <= TRAIN_BYTES)
}

/// Bytes a packet of `len` adds to a train.
pub const fn train_bytes(len: u32) -> u32 {
    len.saturating_add(NET_HDRS)
}

/// Set in a busy streak past its limit: the task runs at normal priority,
/// since the time in the other bits (see [`busy_streak`]).
pub const SHARING: u64 = 1 << 63;

/// A sharing phase lasts this part of the busy limit.
pub const SHARE_PART: u64 = 4;

/// Whether a streak (as [`busy_streak`] returns it) is at normal priority.
pub const fn is_sharing(streak: u64) -> bool {
    streak & SHARING != 0
}

/// Whether a task that requeues itself with work left takes its next turn
/// at normal priority rather than on oxe's high-priority queue: once it has
/// requeued itself without a break for more than `limit_ns` (0: never). A
/// high-priority worker is nice -20; a task that keeps it busy for seconds
/// (a flood of 1 MiB messages in 1 KiB packets) would leave a nice-0 process
/// on its CPU about 1% of it, the poster of the flood included. `since` is
/// the streak (0: none); returns the new one and the answer.
///
/// Past the limit the task stays at normal priority for a quarter of
/// `limit_ns` (the streak is [`SHARING`] and the time it began sharing),
/// then takes the high priority back for a new streak: a duty cycle, until
/// the flow pauses. One shared turn per limit let the poster in only when the
/// scheduler picked it over that turn's worker: a poster whose every post
/// woke the high-priority worker, which preempted it at once, sometimes took
/// the whole run to queue its first 128 messages. Sharing until the flow
/// paused gave a polling poster half of a CPU the flow needed: 1 MiB WRITEs
/// on four QPs between QPs of one device ran at 0.55x (a whole `limit_ns`
/// shared in two: 0.75x). A short burst keeps the high priority throughout.
pub fn busy_streak(since: u64, now: u64, limit_ns: u64) -> (u64, bool) {
    let stamp = now.clamp(1, SHARING - 1);
    if is_sharing(since) {
        if limit_ns == 0 || now.saturating_sub(since & !SHARING) > limit_ns / SHARE_PART {
            (stamp, false)
        } else {
            (since, true)
        }
    } else if since == 0 {
        (stamp, false)
    } else if limit_ns != 0 && now.saturating_sub(since) > limit_ns {
        (SHARING | stamp, true)
    } else {
        (since, false)
    }
}

/// A requester asks for an ACK at least every this many packets of a long
/// message, so that its window keeps moving.
pub const ACK_EVERY: u32 = 32;

/// How long the requester waits to try again after a packet's payload found
/// no memory.
pub const NOMEM_RETRY_NS: u64 = 1_000_000;

/// The RNR NAK timer field (IBA table 45) in nanoseconds: 0 is the longest,
/// 655.36 ms; 1..=31 run from 0.01 ms to 491.52 ms.
pub const fn rnr_timer_ns(code: u8) -> u64 {
    const US: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    US[(code & 31) as usize] as u64 * 1_000
}

/// The local ACK timeout (IBA 9.7.6.1.3): 4.096 us * 2^timeout; 0 disables
/// the timer (the requester waits forever, as rxe).
pub const fn ack_timeout_ns(timeout: u8) -> Option<u64> {
    if timeout == 0 {
        None
    } else {
        // Values over 31 are invalid; clamp rather than overflow.
        let t = if timeout > 31 { 31 } else { timeout };
        Some(4_096u64 << t)
    }
}

/// IB MTU enumeration (enum ib_mtu): 1 = 256 .. 5 = 4096.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum IbMtu {
    Mtu256 = 1,
    Mtu512 = 2,
    Mtu1024 = 3,
    Mtu2048 = 4,
    Mtu4096 = 5,
}

impl IbMtu {
    pub const fn bytes(self) -> u32 {
        128 << (self as u32)
    }
}

/// The active MTU of a port whose netdev has MTU `netdev_mtu`, computed exactly
/// as rdma_rxe does (rxe_set_mtu): an rxe responder requires FIRST and MIDDLE
/// packets to carry exactly its path MTU, and perftest picks each side's path
/// MTU from its own port, so both ends must agree.
pub const fn active_mtu(netdev_mtu: u32) -> IbMtu {
    // rxe works in int; an MTU above i32::MAX is not a real netdev.
    let payload = if netdev_mtu > i32::MAX as u32 {
        i32::MAX
    } else {
        netdev_mtu as i32 - MAX_HDR_LENGTH
    };
    if payload < 512 {
        // Below 256 rxe's table gives 0, which rxe_set_mtu turns into 256.
        IbMtu::Mtu256
    } else if payload < 1024 {
        IbMtu::Mtu512
    } else if payload < 2048 {
        IbMtu::Mtu1024
    } else if payload < 4096 {
        IbMtu::Mtu2048
    } else {
        IbMtu::Mtu4096
    }
}

/// Modified EUI-64 from a 48-bit MAC (RFC 4291 appendix A), as
/// addrconf_addr_eui48() builds node and system image GUIDs.
pub const fn eui64_from_mac(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 0x02,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_train_takes_packets_no_longer_than_its_first_within_its_limits() {
        let m = TRAIN_MAX;
        assert!(train_takes(m, 0, 0, 0, 4096));
        let full = 1024 + 12 + 4;
        assert!(train_takes(m, 1, train_bytes(full), full, full));
        assert!(train_takes(m, 1, train_bytes(full), full, 40));
        assert!(!train_takes(m, 1, train_bytes(40), 40, full));
        assert!(!train_takes(m, TRAIN_MAX, train_bytes(40), 40, 40));
        assert!(!train_takes(u32::MAX, TRAIN_MAX, train_bytes(40), 40, 40));
        // 0 and 1: every packet alone.
        assert!(!train_takes(0, 1, train_bytes(40), 40, 40));
        assert!(!train_takes(1, 1, train_bytes(40), 40, 40));
        assert!(train_takes(16, 15, 15 * train_bytes(40), 40, 40));
        assert!(!train_takes(16, 16, 16 * train_bytes(40), 40, 40));
        let mut n = 0;
        let mut bytes = 0;
        while train_takes(m, n, bytes, 4096 + 28 + 4, 4096 + 28 + 4) {
            n += 1;
            bytes += train_bytes(4096 + 28 + 4);
        }
        assert!(
            bytes <= TRAIN_BYTES && n == 14,
            "{n} packets, {bytes} bytes"
        );
        assert!(!train_takes(m, 1, u32::MAX, u32::MAX, u32::MAX));
    }

    #[test]
    fn a_busy_streak_shares_its_cpu_for_a_quarter_limit_after_each_limit() {
        let ms = 1_000_000;
        // A streak begins at the first requeue; a clock reading of 0 still
        // begins one, and one past the flag's bit does not share.
        assert_eq!(busy_streak(0, 5 * ms, 2 * ms), (5 * ms, false));
        assert_eq!(busy_streak(0, 0, 2 * ms), (1, false));
        assert_eq!(busy_streak(0, u64::MAX, 2 * ms), (SHARING - 1, false));
        assert!(!is_sharing(SHARING - 1));
        // Within the limit it keeps the high priority.
        assert_eq!(busy_streak(5 * ms, 7 * ms, 2 * ms), (5 * ms, false));
        // A limit of 0 never shares, and ends a sharing phase; a clock that
        // went back does not start one either.
        assert_eq!(busy_streak(5 * ms, u64::MAX - 1, 0), (5 * ms, false));
        assert_eq!(busy_streak(SHARING | (5 * ms), 6 * ms, 0), (6 * ms, false));
        assert_eq!(busy_streak(5 * ms, ms, 2 * ms), (5 * ms, false));
        // Past it, normal priority for a quarter limit, then a new streak.
        let s = busy_streak(5 * ms, 7 * ms + 1, 2 * ms);
        assert_eq!(s, (SHARING | (7 * ms + 1), true));
        assert!(is_sharing(s.0));
        assert_eq!(busy_streak(s.0, 7 * ms + ms / 2 + 1, 2 * ms), (s.0, true));
        let back = 7 * ms + ms / 2 + 2;
        assert_eq!(busy_streak(s.0, back, 2 * ms), (back, false));
        // A clock that went back keeps the phase.
        assert_eq!(busy_streak(s.0, 0, 2 * ms), (s.0, true));
        assert_eq!(
            busy_streak(SHARING | 1, u64::MAX, 2 * ms),
            (SHARING - 1, false)
        );
        // A long flow (10 ms, a requeue every 0.1 ms): high for 2.1 ms,
        // shared for 0.6, and so on.
        let (mut since, mut shared, mut switches, mut was) = (0, 0, 0, false);
        for t in 0..=100u64 {
            let (s, y) = busy_streak(since, 1 + t * ms / 10, 2 * ms);
            since = s;
            shared += u32::from(y);
            switches += u32::from(y != was);
            was = y;
        }
        assert_eq!((shared, switches), (18, 6));
    }

    #[test]
    fn a_packet_costs_one_plus_its_pages_and_never_more_than_a_budget() {
        assert_eq!(cost(0), 1);
        assert_eq!(cost(4095), 1);
        assert_eq!(cost(4096), 2);
        assert_eq!(cost(65536), 17);
        assert_eq!(cost(usize::MAX), BUDGET + 1);
    }

    /// rxe's own functions, transcribed literally, as the oracle.
    fn rxe_mtu_int_to_enum(mtu: i32) -> u32 {
        match mtu {
            i32::MIN..=255 => 0,
            256..=511 => 1,
            512..=1023 => 2,
            1024..=2047 => 3,
            2048..=4095 => 4,
            _ => 5,
        }
    }

    fn rxe_active_mtu(ndev_mtu: u32) -> u32 {
        let e = rxe_mtu_int_to_enum((ndev_mtu as i32).wrapping_sub(80));
        if e == 0 {
            1
        } else {
            e.min(5)
        }
    }

    #[test]
    fn active_mtu_matches_rxe_everywhere_it_matters() {
        for mtu in 0..20_000u32 {
            assert_eq!(active_mtu(mtu) as u32, rxe_active_mtu(mtu), "mtu {mtu}");
        }
        for mtu in [65_535, 65_536, 1 << 20, i32::MAX as u32] {
            assert_eq!(active_mtu(mtu) as u32, rxe_active_mtu(mtu), "mtu {mtu}");
        }
    }

    #[test]
    fn active_mtu_common_values() {
        assert_eq!(active_mtu(1500), IbMtu::Mtu1024);
        assert_eq!(active_mtu(9000), IbMtu::Mtu4096);
        assert_eq!(active_mtu(65536), IbMtu::Mtu4096);
        assert_eq!(active_mtu(68), IbMtu::Mtu256);
        assert_eq!(active_mtu(u32::MAX), IbMtu::Mtu4096);
        assert_eq!(IbMtu::Mtu1024.bytes(), 1024);
        assert_eq!(IbMtu::Mtu4096.bytes(), 4096);
    }

    #[test]
    fn eui64() {
        assert_eq!(
            eui64_from_mac([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]),
            [0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56]
        );
        assert_eq!(eui64_from_mac([0x02, 0, 0, 0, 0, 0])[0], 0);
    }

    #[test]
    fn timers() {
        assert_eq!(rnr_timer_ns(0), 655_360_000);
        assert_eq!(rnr_timer_ns(1), 10_000);
        assert_eq!(rnr_timer_ns(31), 491_520_000);
        assert_eq!(rnr_timer_ns(255), 491_520_000);
        assert_eq!(ack_timeout_ns(0), None);
        assert_eq!(ack_timeout_ns(14), Some(67_108_864));
        assert_eq!(ack_timeout_ns(200), Some(4_096u64 << 31));
    }
}
