# Fault injection: unit tests of the accept thread with -Wl,--wrap, and an LD_PRELOAD shim
# (tests/fault/shim.c, driven by LFE_FAULT) under the real daemon for the integration test
# tests/fault/test_fault.c. Both run in `make test`, sanitizer builds included.
# Included by the Makefile (which supplies TOBJ, the cmocka rules, the harness objects).

# The accept thread's unit tests follow the unit-test pattern rule (tests/unit/test_acceptor.c).
UNIT_BINS += $(TOBJ)/test_acceptor
