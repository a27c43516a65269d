// SPDX-License-Identifier: GPL-2.0

//! A packet between QPs: the headers the transport reads (`packet::Hdr`)
//! and its payload, owned. Once sent it belongs to the destination, whose
//! tasks take it in their own time.

use kernel::prelude::*;

use crate::packet::Hdr;

pub(crate) struct Packet {
    pub(crate) hdr: Hdr,
    pub(crate) payload: KVec<u8>,
}

impl Packet {
    pub(crate) fn new(hdr: Hdr) -> Self {
        Packet {
            hdr,
            payload: KVec::new(),
        }
    }
}
