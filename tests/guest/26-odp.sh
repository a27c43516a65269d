#!/bin/sh
# On-demand paging through the stock libibverbs and librxe:
# tests/odp_test.c (kselftest harness). Its reclaim case maps the guest
# kernel's vmlinux, a file whose clean page cache can be reclaimed without
# swap. Afterwards no MR is left on oxe0, the pins are back and the module
# unloads.
. "$(dirname "$0")/../lib.sh"

[ -f "$OXE_KDIR/vmlinux" ] && export OXE_ODP_FILE="$OXE_KDIR/vmlinux"
harness_suite odp tests/bin/odp_test
