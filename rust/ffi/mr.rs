// SPDX-License-Identifier: GPL-2.0

//! MR entry points.

pub(super) use crate::mr::{
    alloc_mr, dereg_mr, fill_res_mr_entry, get_dma_mr, map_mr_sg, reg_user_mr, rereg_user_mr,
};
