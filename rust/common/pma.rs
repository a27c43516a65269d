// SPDX-License-Identifier: GPL-2.0

//! The port's performance management agent (IBA 16.1), the part the RDMA
//! core asks through `process_mad`: ClassPortInfo, PortCounters and
//! PortCountersExtended. The core's sysfs `ports/1/counters/` reads them
//! (`port_xmit_data`, `port_rcv_data`, ...); ClassPortInfo's extended-width
//! bit tells it to take the 64-bit counters. As rdma_rxe does, with a proper
//! reply header (GetResp, the request's TID) so that the MAD layer can send
//! it as it is once a GSI QP exists.

/// Bytes of a MAD (`struct ib_mad`): a 24-byte common header, then data.
pub const MAD_LEN: usize = 256;
const HDR_LEN: usize = 24;
/// PMA attributes start 40 bytes into the data (after the PMA's reserved
/// area), as `struct ib_pma_mad` lays them out.
const ATTR_OFF: usize = HDR_LEN + 40;

pub const CLASS_PERF_MGMT: u8 = 0x04;
pub const METHOD_GET: u8 = 0x01;
pub const METHOD_GET_RESP: u8 = 0x81;
pub const ATTR_CLASS_PORT_INFO: u16 = 0x0001;
pub const ATTR_PORT_COUNTERS: u16 = 0x0012;
pub const ATTR_PORT_COUNTERS_EXT: u16 = 0x001d;
/// ClassPortInfo.CapabilityMask: PortCountersExtended has all its counters.
pub const CAP_EXT_WIDTH: u16 = 1 << 9;
pub const STATUS_UNSUPPORTED_METHOD: u16 = 0x0008;
pub const STATUS_UNSUPPORTED_ATTR: u16 = 0x000c;

/// `enum ib_mad_result`.
pub const RESULT_FAILURE: u32 = 0;
pub const RESULT_SUCCESS: u32 = 1 << 0;
pub const RESULT_REPLY: u32 = 1 << 1;

/// What the port counted. Data counters are in bytes here; the PMA reports
/// them in units of 4 bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounts {
    pub xmit_bytes: u64,
    pub rcv_bytes: u64,
    pub xmit_pkts: u64,
    pub rcv_pkts: u64,
    /// Packets received and dropped as malformed (bad ICRC, bad headers).
    pub rcv_errors: u64,
    /// Packets that could not be sent.
    pub xmit_discards: u64,
    /// Times the link went down.
    pub link_downed: u64,
}

fn put(out: &mut [u8], off: usize, bytes: &[u8]) {
    if let Some(d) = out.get_mut(off..off + bytes.len()) {
        d.copy_from_slice(bytes);
    }
}

/// IBA 16.1.3.5: counters stop at all ones instead of wrapping.
fn sat16(v: u64) -> u16 {
    v.min(u64::from(u16::MAX)) as u16
}
fn sat8(v: u64) -> u8 {
    v.min(u64::from(u8::MAX)) as u8
}
fn sat32(v: u64) -> u32 {
    v.min(u64::from(u32::MAX)) as u32
}

/// Answers the MAD `inp` for `port` into `out` (both `MAD_LEN` bytes);
/// returns the `ib_mad_result` flags. MADs of other classes are not the
/// driver's: SUCCESS without REPLY lets the MAD layer hand them to its
/// agents (the CM's among them).
pub fn process(port: u32, inp: &[u8], out: &mut [u8], c: &PortCounts) -> u32 {
    if port != 1 || inp.len() < MAD_LEN || out.len() < MAD_LEN {
        return RESULT_FAILURE;
    }
    let (class, method) = (inp[1], inp[3]);
    let attr = u16::from_be_bytes([inp[16], inp[17]]);
    if class != CLASS_PERF_MGMT {
        return RESULT_SUCCESS;
    }
    out[..MAD_LEN].fill(0);
    out[..HDR_LEN].copy_from_slice(&inp[..HDR_LEN]);
    out[3] = METHOD_GET_RESP;
    let status = if method != METHOD_GET {
        STATUS_UNSUPPORTED_METHOD
    } else {
        match attr {
            ATTR_CLASS_PORT_INFO => {
                // BaseVersion 1, ClassVersion 1, CapabilityMask.
                put(out, ATTR_OFF, &[1, 1]);
                put(out, ATTR_OFF + 2, &CAP_EXT_WIDTH.to_be_bytes());
                0
            }
            ATTR_PORT_COUNTERS => {
                // `struct ib_pma_portcounters`.
                put(out, ATTR_OFF + 1, &[1]); // PortSelect
                put(out, ATTR_OFF + 7, &[sat8(c.link_downed)]);
                put(out, ATTR_OFF + 8, &sat16(c.rcv_errors).to_be_bytes());
                put(out, ATTR_OFF + 14, &sat16(c.xmit_discards).to_be_bytes());
                put(out, ATTR_OFF + 24, &sat32(c.xmit_bytes / 4).to_be_bytes());
                put(out, ATTR_OFF + 28, &sat32(c.rcv_bytes / 4).to_be_bytes());
                put(out, ATTR_OFF + 32, &sat32(c.xmit_pkts).to_be_bytes());
                put(out, ATTR_OFF + 36, &sat32(c.rcv_pkts).to_be_bytes());
                0
            }
            ATTR_PORT_COUNTERS_EXT => {
                put(out, ATTR_OFF + 1, &[1]);
                put(out, ATTR_OFF + 8, &(c.xmit_bytes / 4).to_be_bytes());
                put(out, ATTR_OFF + 16, &(c.rcv_bytes / 4).to_be_bytes());
                put(out, ATTR_OFF + 24, &c.xmit_pkts.to_be_bytes());
                put(out, ATTR_OFF + 32, &c.rcv_pkts.to_be_bytes());
                // RoCE unicast: all of them.
                put(out, ATTR_OFF + 40, &c.xmit_pkts.to_be_bytes());
                put(out, ATTR_OFF + 48, &c.rcv_pkts.to_be_bytes());
                0
            }
            _ => STATUS_UNSUPPORTED_ATTR,
        }
    };
    put(out, 4, &status.to_be_bytes());
    RESULT_SUCCESS | RESULT_REPLY
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn get(attr: u16) -> [u8; MAD_LEN] {
        let mut m = [0u8; MAD_LEN];
        m[0] = 1;
        m[1] = CLASS_PERF_MGMT;
        m[2] = 1;
        m[3] = METHOD_GET;
        m[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        m[16..18].copy_from_slice(&attr.to_be_bytes());
        m
    }

    fn be64(b: &[u8], off: usize) -> u64 {
        u64::from_be_bytes(b[off..off + 8].try_into().unwrap())
    }

    fn be16(b: &[u8], off: usize) -> u16 {
        u16::from_be_bytes(b[off..off + 2].try_into().unwrap())
    }

    fn be32(b: &[u8], off: usize) -> u32 {
        u32::from_be_bytes(b[off..off + 4].try_into().unwrap())
    }

    const C: PortCounts = PortCounts {
        xmit_bytes: 4000,
        rcv_bytes: 8 << 40,
        xmit_pkts: 7,
        rcv_pkts: 9,
        rcv_errors: 70_000,
        xmit_discards: 2,
        link_downed: 300,
    };

    /// Where the kernel's sysfs reads them (core/sysfs.c: out->data + 40,
    /// then the attribute's bit offset).
    #[test]
    fn extended_counters_where_sysfs_reads_them() {
        let mut out = [0xaau8; MAD_LEN];
        let r = process(1, &get(ATTR_PORT_COUNTERS_EXT), &mut out, &C);
        assert_eq!(r, RESULT_SUCCESS | RESULT_REPLY);
        assert_eq!(out[3], METHOD_GET_RESP);
        assert_eq!(&out[4..6], &[0, 0]);
        assert_eq!(be64(&out, 8), 0x1122_3344_5566_7788, "TID kept");
        assert_eq!(be64(&out, 64 + 64 / 8), 1000); // port_xmit_data, 4-byte units
        assert_eq!(be64(&out, 64 + 128 / 8), 2 << 40); // port_rcv_data
        assert_eq!(be64(&out, 64 + 192 / 8), 7);
        assert_eq!(be64(&out, 64 + 256 / 8), 9);
    }

    #[test]
    fn class_port_info_says_extended_width() {
        let mut out = [0u8; MAD_LEN];
        process(1, &get(ATTR_CLASS_PORT_INFO), &mut out, &C);
        assert_eq!(u16::from_be_bytes([out[66], out[67]]), CAP_EXT_WIDTH);
    }

    /// Each at its place in `struct ib_pma_portcounters`, where sysfs reads
    /// it (`PORT_PMA_ATTR`'s bit offsets): the error counters were two bytes
    /// off, in the next counters' places.
    #[test]
    fn narrow_counters_stop_at_all_ones() {
        let mut out = [0u8; MAD_LEN];
        process(1, &get(ATTR_PORT_COUNTERS), &mut out, &C);
        assert_eq!(out[64 + 56 / 8], u8::MAX); // link_downed
        assert_eq!(be16(&out, 64 + 64 / 8), u16::MAX); // port_rcv_errors
        assert_eq!(be16(&out, 64 + 80 / 8), 0); // port_rcv_remote_physical_errors
        assert_eq!(be16(&out, 64 + 112 / 8), 2); // port_xmit_discards
        assert_eq!(out[64 + 128 / 8], 0); // port_xmit_constraint_errors
        assert_eq!(be32(&out, 64 + 192 / 8), 1000); // port_xmit_data
        assert_eq!(be32(&out, 64 + 224 / 8), u32::MAX); // port_rcv_data saturates
    }

    #[test]
    fn what_is_not_answered() {
        let mut out = [0u8; MAD_LEN];
        assert_eq!(
            process(2, &get(ATTR_PORT_COUNTERS), &mut out, &C),
            RESULT_FAILURE
        );
        let mut cm = get(0x0010);
        cm[1] = 0x07;
        assert_eq!(
            process(1, &cm, &mut out, &C),
            RESULT_SUCCESS,
            "CM MADs go to the agents"
        );
        let r = process(1, &get(0x0099), &mut out, &C);
        assert_eq!(r, RESULT_SUCCESS | RESULT_REPLY);
        assert_eq!(
            u16::from_be_bytes([out[4], out[5]]),
            STATUS_UNSUPPORTED_ATTR
        );
        let mut set = get(ATTR_PORT_COUNTERS);
        set[3] = 0x02;
        process(1, &set, &mut out, &C);
        assert_eq!(
            u16::from_be_bytes([out[4], out[5]]),
            STATUS_UNSUPPORTED_METHOD
        );
        assert_eq!(process(1, &[0u8; 10], &mut out, &C), RESULT_FAILURE);
    }

    proptest! {
        #[test]
        fn any_mad_any_buffer_never_panics(
            inp in proptest::collection::vec(any::<u8>(), 0..300),
            outlen in 0usize..300,
            port in 0u32..3,
        ) {
            let mut out = std::vec![0u8; outlen];
            let _ = process(port, &inp, &mut out, &C);
        }
    }
}
