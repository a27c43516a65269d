// SPDX-License-Identifier: GPL-2.0

//! Protection domains. A PD is only an identity: every key check compares
//! the registration's PD with the one presented. Its entry points are in
//! `ffi/pd.rs`.

use kernel::types::Opaque;

use crate::access::PdId;
use crate::bindings as b;
use crate::ib;

/// The core allocates it (`size_ib_pd`); `id` is written in place by
/// `alloc_pd`.
#[repr(C)]
pub(crate) struct OxePd {
    ib: Opaque<b::ib_pd>,
    /// Unique among live PDs, and small: a user MR keeps it in one atomic
    /// word with its rights (`access::PdRights`).
    id: PdId,
}
ib::core_object!(OxePd, ib: b::ib_pd, id: PdId);

impl OxePd {
    /// The PD's identity for access checks.
    pub(crate) fn id(&self) -> PdId {
        self.id
    }
}
