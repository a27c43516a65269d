// SPDX-License-Identifier: GPL-2.0

//! Logic of oxe that needs no kernel. The kernel crate includes these files
//! with `#[path]`, so they use `core` only; here they build on the host for
//! `cargo test`.

#![cfg_attr(not(test), no_std)]

pub mod access;
pub mod help;
pub mod icrc;
pub mod ip;
pub mod key;
pub mod mtt;
pub mod mw_rules;
pub mod pace;
pub mod packet;
pub mod params;
pub mod pma;
pub mod replay;
pub mod wire;
pub mod wqe;
