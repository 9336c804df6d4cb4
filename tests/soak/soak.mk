# Soak: lfepolld in echo and in Lua (lua/kv.lua) mode for SOAK_SECONDS under a mix of clients,
# then descriptors, RSS, counters and the log checked against a baseline (tests/soak/soak.c).
#
#   make soak                      10 minutes
#   make soak SOAK_SECONDS=60      what .ci/run does
#
# Not part of `make test`. Included by the Makefile (TOBJ, the harness object, LFEPOLLD, deps).

SOAK_SECONDS ?= 600
SOAK_BIN := $(TOBJ)/soak

# Optimised like the integration client: it checks every byte it gets back.
$(TOBJ)/soak_%.o: tests/soak/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) -Itests/integration $(LFE_CFLAGS) -O2 $(CFLAGS) -c -o $@ $<

$(SOAK_BIN): $(TOBJ)/soak_soak.o $(TOBJ)/int_harness.o
	$(CC) $(ALL_LDFLAGS) -o $@ $^ -lcmocka $(LDLIBS)

.PHONY: soak
soak: deps
	@$(MAKE) --no-print-directory $(LFEPOLLD) $(SOAK_BIN)
	@LFEPOLLD=$(abspath $(LFEPOLLD)) LFE_SANITIZER=$(SANITIZER) SOAK_SECONDS=$(SOAK_SECONDS) \
	  timeout -k 5 $$(( $(SOAK_SECONDS) + 300 )) $(SOAK_BIN)
