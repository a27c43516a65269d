// SPDX-License-Identifier: GPL-2.0

//! Arbitrary bytes as a UDP payload: decoding never panics, and whatever
//! decodes re-encodes to a packet of the same length that decodes to the
//! same headers and payload (ignored bits aside). The same bytes also go
//! through the IP-level parse and ICRC check, which must not panic either.

#![no_main]

use libfuzzer_sys::fuzz_target;
use oxe_common::{ip, wire};

fuzz_target!(|data: &[u8]| {
    let _ = ip::check_icrc(data);
    let Ok(d) = wire::decode(data) else {
        return;
    };
    let payload = d.payload(data);
    assert_eq!(payload.len(), d.payload_len);
    let mut out = vec![0u8; data.len()];
    let n = wire::encode(&d.hdr, payload, &mut out).expect("a decoded Hdr encodes");
    assert_eq!(n, data.len());
    let again = wire::decode(&out).expect("a re-encoded packet decodes");
    assert_eq!(again, d);
    assert_eq!(again.payload(&out), payload);
});
