# Fault injection: unit tests of the accept thread with -Wl,--wrap, and an LD_PRELOAD shim
# (tests/fault/shim.c, driven by LFE_FAULT) under the real daemon for the integration test
# tests/fault/test_fault.c. Both run in `make test`, sanitizer builds included.
# Included by the Makefile (which supplies TOBJ, the cmocka rules, the harness objects).

# The accept thread's unit tests (tests/unit/test_acceptor.c) are in the Makefile's UNIT list.
# `integration` listed its binaries before this file was read: added here too.
integration: $(TOBJ)/test_fault

# The shim is built plain (no sanitizer: it only forwards calls) and preloaded into lfepolld by
# the test, which finds it through LFE_FAULT_SHIM.
FAULT_SHIM := $(TOBJ)/lfe-fault.so
INT_BINS += $(TOBJ)/test_fault
TEST_ENV += LFE_FAULT_SHIM=$(abspath $(FAULT_SHIM))

$(FAULT_SHIM): tests/fault/shim.c
	@mkdir -p $(@D)
	$(CC) -std=c11 -g -O2 -fPIC -shared $(WARN) $(CFLAGS) -o $@ $< -ldl

$(TOBJ)/fault_%.o: tests/fault/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) -Itests/integration $(TEST_CFLAGS) -c -o $@ $<

$(TOBJ)/test_fault: $(TOBJ)/fault_test_fault.o $(TOBJ)/int_harness.o $(TOBJ)/int_load.o \
                    | $(FAULT_SHIM)
	$(CC) $(ALL_LDFLAGS) -o $@ $^ -lcmocka -lm $(LDLIBS)

# Only the fault tests: make fault-test [SANITIZER=...]
.PHONY: fault-test
fault-test: $(LFEPOLLD) $(TOBJ)/test_acceptor $(TOBJ)/test_fault
	@$(TEST_ENV) tests/run.sh $(TOBJ)/test_acceptor $(TOBJ)/test_fault
