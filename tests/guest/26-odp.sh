#!/bin/sh
# On-demand paging through the stock libibverbs and librxe:
# tests/odp_test.c (kselftest harness). Afterwards no MR is left on oxe0,
# the pins are back and the module unloads.
. "$(dirname "$0")/../lib.sh"

harness_suite odp tests/bin/odp_test
