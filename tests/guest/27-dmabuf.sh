#!/bin/sh
# dma-buf MRs: memory udmabuf exports, through tests/dmabuf_test.c
# (kselftest harness). Afterwards no MR is left on oxe0, the pins are back
# and the module unloads.
. "$(dirname "$0")/../lib.sh"

harness_suite dmabuf tests/bin/dmabuf_test
