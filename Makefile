# SPDX-License-Identifier: GPL-2.0
# `make` builds rdma_oxe.ko against oxe's cached kernel (KDIR= overrides).

KDIR ?= $(shell $(CURDIR)/scripts/build-kernel.sh)
export LIBCLANG_PATH ?= /usr/lib/llvm-19/lib

.PHONY: all modules kdir clean rust-analyzer host-test check lint fuzz fmt test run bench bench-mr bench-perftest profile tests

KSRC = $(shell readlink -f $(KDIR)/source)
TEST_CFLAGS = -O2 -g -Wall -I$(KSRC)/tools/testing/selftests -I$(KSRC)
TEST_PROGS = tests/bin/mr_test tests/bin/mr_bench tests/bin/dp_test tests/bin/fault_test tests/bin/holder tests/bin/fuzz_verbs tests/bin/xfer_check tests/bin/udp_flood tests/bin/udp_rr tests/bin/ud_test tests/bin/mw_test tests/bin/odp_test tests/bin/dmabuf_test tests/bin/memcpy_bench tests/bin/odp_bench

all: modules

# LLVM=-19 for kernels built with it (the debug flavour).
KFLAGS = $(shell cat $(KDIR)/.oxe-make-flags 2>/dev/null)

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KFLAGS) modules

kdir:
	@echo $(KDIR)

rust-analyzer:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KFLAGS) rust-analyzer

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) $(KFLAGS) clean
	rm -rf rust/bindings_generated.rs tests/bin

# In-guest test programs, against the stock libibverbs.
tests: $(TEST_PROGS)

tests/bin/%: tests/%.c tests/oxe_test.h tests/udp_link.h
	@mkdir -p tests/bin
	$(CC) $(TEST_CFLAGS) -o $@ $< -libverbs -lpthread

# Kernel-independent logic, on the host.
host-test:
	cd rust/common && cargo test --quiet

# The editing tier: host tests, lints, module build, and the core guest
# suites on the plain kernel (a few minutes once the kernel is cached).
check:
	scripts/test.sh --quick

lint:
	cd rust/common && cargo fmt --check && cargo clippy --quiet --all-targets -- -D warnings
	rustfmt --check --edition 2021 --config-path rust/common rust/oxe.rs
	scripts/deps.sh >/dev/null

# The verbs fuzzer with fresh seeds (the suite uses fixed ones).
fuzz:
	OXE_FUZZ_SEEDS="$$(od -An -N4 -tu4 /dev/urandom) $$(od -An -N4 -tu4 /dev/urandom)" scripts/test.sh 70-fuzz

fmt:
	cd rust/common && cargo fmt
	rustfmt --edition 2021 --config-path rust/common rust/oxe.rs

# The whole suite: host tests, build, boot, in-guest KTAP tests.
test:
	scripts/test.sh

# Everything oxe claims about speed, against rdma_rxe and the floors, in one
# run: a table, CSV and JSON, and plots (ROUNDS=N alternating boots each;
# then as many rounds of two guests, oxe<->oxe against rxe<->rxe: PAIR=0
# skips them, PAIR_ROUNDS=N sets their number).
bench:
	scripts/bench.sh

# reg+dereg cost on oxe and on rdma_rxe (separate boots, alternating).
bench-mr:
	scripts/bench-mr.sh

# The seven perftests on oxe and on rdma_rxe (separate boots, alternating).
bench-perftest:
	scripts/bench-perftest.sh $(MODE)

# One perftest case profiled in its steady state (perf, and with TRACE=1 a
# timeline of oxe's tasks), on oxe or with RXE=1 on rdma_rxe.
profile:
	scripts/profile.sh $(if $(RXE),-r) $(if $(TRACE),--trace) $(CASE)

# Build, boot, create oxe0 and show it.
run:
	scripts/run.sh
