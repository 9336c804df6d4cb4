# Fuzzing: libFuzzer targets, built with clang under AddressSanitizer + UBSan, one per parser or
# state machine that takes outside bytes (tests/fuzz/README.md says what each one checks).
#
#   make fuzz                          every target for FUZZ_SECONDS (default 60) each
#   make fuzz FUZZ_TARGETS="frame ctx" FUZZ_SECONDS=300
#   make fuzz-build                    the binaries only: build-fuzz/fuzz_<target>
#
# Each run starts from the seeds in tests/fuzz/corpus/<target>/ and keeps what it finds in
# build-fuzz/corpus/<target>/; a failing input is saved in build-fuzz/artifacts/<target>/.
# Included by the Makefile (which supplies WARN, LUA_CFLAGS, LUA_LIBS, DEPS and the deps target).

FUZZ_SECONDS ?= 60
FUZZ_CC ?= clang
FUZZ_BUILD ?= build-fuzz
FUZZ_ALL := frame ctx opt bopt tune kstat verify lua lpattern json proxy tls
FUZZ_TARGETS ?= $(FUZZ_ALL)

# Every target links the daemon's and lfbench's modules (SRV_MODS, CLI_MODS of the Makefile),
# compiled again with coverage instrumentation, as archives: each takes only what it calls
# (OpenSSL itself is not instrumented: fuzz_tls covers lfepolld's use of it, src/tls*.c).
FUZZ_LIBS := $(FUZZ_BUILD)/libcli.a $(FUZZ_BUILD)/libsrv.a

FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CPPFLAGS = -D_GNU_SOURCE -Iinclude -Isrc/lua -Iclient -Itests/fuzz $(LUA_CFLAGS) \
                -DFUZZ_LUA_DIR='"$(CURDIR)/lua"' -DFUZZ_DIR='"$(CURDIR)/tests/fuzz"'
# The daemon's own files keep their warnings but never fail the fuzz build on one clang sees
# and gcc does not; the fuzz targets themselves follow WERROR.
FUZZ_CFLAGS = -std=c11 -g -O1 -pthread -MMD -MP $(FUZZ_SAN) -fsanitize=fuzzer-no-link $(CFLAGS)

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) $(filter-out -Werror,$(WARN)) -c -o $@ $<

$(FUZZ_BUILD)/obj/tests/fuzz/%.o: tests/fuzz/%.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) $(WARN) -c -o $@ $<

# tune_conf.o is sysctl.conf as data (tune_judge, which lfbench's hints call, reads it)
$(FUZZ_BUILD)/libsrv.a: $(SRV_MODS:%=$(FUZZ_BUILD)/obj/src/%.o) $(BUILD)/src/tune_conf.o
	rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/libcli.a: $(CLI_MODS:%=$(FUZZ_BUILD)/obj/client/%.o)
	rm -f $@ && ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/obj/tests/fuzz/fuzz_%.o $(FUZZ_LIBS)
	$(FUZZ_CC) $(FUZZ_SAN) -fsanitize=fuzzer -pthread -o $@ $^ $(LUA_LIBS) $(SSL_LIBS) -lm

.PRECIOUS: $(FUZZ_BUILD)/obj/tests/fuzz/%.o

.PHONY: fuzz fuzz-build fuzz-deps
fuzz: fuzz-deps
	@$(MAKE) --no-print-directory fuzz-build
	@FUZZ_BUILD=$(FUZZ_BUILD) tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

fuzz-build: $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)

# clang brings libFuzzer and the sanitizers' runtimes (Debian's clang package).
fuzz-deps: deps
	@$(DEPS) tool $(FUZZ_CC) clang 'clang (libFuzzer)'

-include $(wildcard $(FUZZ_BUILD)/obj/*/*.d $(FUZZ_BUILD)/obj/src/lua/*.d $(FUZZ_BUILD)/obj/tests/fuzz/*.d)

clean: fuzz-clean
.PHONY: fuzz-clean
fuzz-clean:
	rm -rf $(FUZZ_BUILD)
