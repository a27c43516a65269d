#!/bin/sh
# Memory windows through the stock libibverbs and librxe: tests/mw_test.c
# (kselftest harness). Afterwards no MR or PD is left on oxe0 (windows freed
# first, then their MRs), the pins are back and the module unloads.
. "$(dirname "$0")/../lib.sh"

harness_suite mw tests/bin/mw_test
