// SPDX-License-Identifier: GPL-2.0

//! Multicast groups of a device: which UD QPs are attached to which group
//! (MGID), for delivering a datagram sent to the group to each of them. The
//! groups live with the device's QPs (`QpTable`), as QP numbers, and are
//! read from softirq (the wire's receive): every access is with BH
//! disabled, and allocates atomically.

use kernel::prelude::*;
use kernel::sync::Arc;

use super::{Qp, QpTable};
use crate::irqlock::without_bh;
use crate::params;

/// One group: its MGID and the QPs attached to it.
pub(crate) struct Group {
    mgid: [u8; 16],
    qpns: KVec<u32>,
}

/// What an attach or a detach did to the group, for the netdev's filter.
#[derive(PartialEq, Eq)]
pub(crate) enum Change {
    None,
    /// The group's first QP: its Ethernet address must be let in.
    Created,
    /// Its last QP left: the address may go.
    Removed,
}

impl QpTable {
    /// Attaches QP `qpn` to group `mgid` (again: nothing changes). ENOMEM
    /// past rxe's limits: groups per device, QPs per group, attachments.
    pub(crate) fn attach(&self, mgid: &[u8; 16], qpn: u32) -> Result<Change> {
        without_bh(|| {
            let mut groups = self.groups.lock();
            let total: usize = groups.iter().map(|g| g.qpns.len()).sum();
            let Some(i) = groups.iter().position(|g| g.mgid == *mgid) else {
                if groups.len() >= params::MAX_MCAST_GRP as usize
                    || total >= params::MAX_TOTAL_MCAST_QP_ATTACH as usize
                {
                    return Err(ENOMEM);
                }
                let mut qpns = KVec::new();
                qpns.push(qpn, GFP_ATOMIC)?;
                groups.push(Group { mgid: *mgid, qpns }, GFP_ATOMIC)?;
                return Ok(Change::Created);
            };
            let g = groups.get_mut(i).ok_or(EINVAL)?;
            if g.qpns.contains(&qpn) {
                return Ok(Change::None);
            }
            if g.qpns.len() >= params::MAX_MCAST_QP_ATTACH as usize
                || total >= params::MAX_TOTAL_MCAST_QP_ATTACH as usize
            {
                return Err(ENOMEM);
            }
            g.qpns.push(qpn, GFP_ATOMIC)?;
            Ok(Change::None)
        })
    }

    /// Detaches QP `qpn` from group `mgid`; EINVAL if it was not attached.
    pub(crate) fn detach(&self, mgid: &[u8; 16], qpn: u32) -> Result<Change> {
        without_bh(|| {
            let mut groups = self.groups.lock();
            let i = groups.iter().position(|g| g.mgid == *mgid).ok_or(EINVAL)?;
            let g = groups.get_mut(i).ok_or(EINVAL)?;
            if !g.qpns.contains(&qpn) {
                return Err(EINVAL);
            }
            g.qpns.retain(|q| *q != qpn);
            if !g.qpns.is_empty() {
                return Ok(Change::None);
            }
            groups.retain(|g| g.mgid != *mgid);
            Ok(Change::Removed)
        })
    }

    /// The groups QP `qpn` is attached to, for detaching it when it goes.
    pub(crate) fn groups_of(&self, qpn: u32) -> KVec<[u8; 16]> {
        let mut out = KVec::new();
        without_bh(|| {
            for g in self.groups.lock().iter() {
                if g.qpns.contains(&qpn) && out.push(g.mgid, GFP_ATOMIC).is_err() {
                    break;
                }
            }
        });
        out
    }

    /// The live QPs attached to group `mgid` (from softirq too).
    pub(crate) fn members(&self, mgid: &[u8; 16]) -> KVec<Arc<Qp>> {
        let mut out = KVec::new();
        without_bh(|| {
            let groups = self.groups.lock();
            let Some(g) = groups.iter().find(|g| g.mgid == *mgid) else {
                return;
            };
            let xa = self.xa.lock();
            for &qpn in g.qpns.iter() {
                if let Some(qp) = xa.get(qpn as usize) {
                    if out.push(Arc::from(qp), GFP_ATOMIC).is_err() {
                        break;
                    }
                }
            }
        });
        out
    }
}
