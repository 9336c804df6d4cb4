# lfepoll: lfepolld (the daemon) and lfbench (the load client).
#
#   make run          install missing run packages (as root; RUN_PKGS), build, run lfepolld
#   make test         install the test packages too (TEST_PKGS; make deps), unit + integration
#                     tests; ends with "N passed, N failed"
#   make sysctl-check this kernel against sysctl.conf (a report: exits 0 unless the check fails)
#   make sysctl-apply, sysctl-undo   as root: set sysctl.conf's values (saving what was there), put those back
#   make verify-units systemd-analyze verify of systemd/*.service, *.socket in the clone
#   make WERROR=1     warnings are errors (CI)
#   make SANITIZER=address|undefined|thread   instrumented build in build-$(SANITIZER)/
#   make bench        every benchmark, with the peers of tests/bench/peers/ side by side
#   make bench-tls-libs  client TLS handshakes with OpenSSL, GnuTLS, wolfSSL (docs/bench.md)
#   make peers        the peer echo servers and echoload, into build/peers/ (make bench does it)
#   make install      binaries, man pages, units, Lua scripts, configs under $(DESTDIR)$(PREFIX) (make uninstall)
#   make fuzz, make soak   libFuzzer targets (tests/fuzz), the long soak run (tests/soak)
#   make scaleout-test     backends, balancer and clients in network namespaces (root; SCALEOUT_SHORT=1: CI)

PREFIX ?= /usr/local
OPT ?= -O2
SANITIZER ?=
WERROR ?=

# What make run needs (building lfepolld and lfbench, and running them), then what make test adds.
# README.md lists the same two sets; tests/integration/test_makefile.sh holds them together.
RUN_PKGS := build-essential pkg-config libjemalloc-dev liblua5.4-dev libev-dev
RUN_PKGS += zlib1g-dev # lfbench --hdr-log
RUN_PKGS += libssl-dev # TLS: lfbench --tls, lfepolld's TLS listeners (OpenSSL 3, README: Dependencies)
TEST_PKGS := libcmocka-dev # the unit and integration tests
TEST_PKGS += procps # tests/integration/test_sysctl.c: sysctl -p
TEST_PKGS += wrk # tests/bench: a peer client
TEST_PKGS += gnuplot-nox # tests/integration/test_plot.c: lfbench plot runs gnuplot
TEST_PKGS += nginx-light # tests/integration/test_lfbench_http.c: a real HTTP server
TEST_PKGS += prometheus # tests/integration/test_admin.c: promtool, and a server that scrapes
TEST_PKGS += systemd # tests/integration/test_units.sh: systemd-analyze verify of the unit files
TEST_PKGS += man-db # tests/integration/test_install.sh: man -l on the man pages
TEST_PKGS += haproxy # tests/integration/test_hygiene.c: a real PROXY protocol sender
TEST_PKGS += nftables # tests/scaleout: the kernel balancer
TEST_PKGS += curl iproute2 # tests/integration/test_docs_examples.sh: the documents' examples
# The benchmark peers (tests/bench/peers/; make test runs the C ones). Go and Rust are
# optional: without them make peers skips those two peers, saying so.
TEST_PKGS += libuv1-dev # tests/bench/peers/c/uv_echo.c
TEST_PKGS += liburing-dev # tests/bench/peers/c/uring_echo.c
TEST_PKGS += openssl libnginx-mod-stream # the TLS tests: certificates made at test time, s_server, nginx's stream ssl
TEST_PKGS += python3 # tests/integration/test_tls_conf.c: Python's ssl module, a TLS client of another make
DEB_PKGS := $(RUN_PKGS) $(TEST_PKGS)

WARN := -Wall -Wextra -Wshadow -Wundef -Wwrite-strings -Wstrict-prototypes \
        -Wmissing-prototypes -Wold-style-definition -Wformat=2 -Wvla
ifeq ($(WERROR),1)
WARN += -Werror
endif

ifeq ($(SANITIZER),)
BUILD ?= build
BINDIR ?= .
ALLOC_LIBS = $(shell pkg-config --libs jemalloc)
ALLOC_DEFS := $(shell pkg-config --exists jemalloc 2>/dev/null && echo -DLFE_JEMALLOC)
else
BUILD ?= build-$(SANITIZER)
BINDIR ?= $(BUILD)
ALLOC_LIBS :=   # the sanitizers bring their own malloc
ALLOC_DEFS :=
ifeq ($(SANITIZER),address)
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
else ifeq ($(SANITIZER),undefined)
SAN_FLAGS := -fsanitize=undefined -fno-sanitize-recover=undefined
else ifeq ($(SANITIZER),thread)
SAN_FLAGS := -fsanitize=thread
else
$(error SANITIZER must be address, undefined or thread)
endif
endif

# Lua 5.4 (Debian's liblua5.4-dev); the fallbacks are its paths when pkg-config is not there yet.
LUA_CFLAGS = $(shell pkg-config --cflags lua5.4 2>/dev/null || echo -I/usr/include/lua5.4)
LUA_LIBS = $(shell pkg-config --libs lua5.4 2>/dev/null || echo -llua5.4) -lm
# OpenSSL 3 (Debian's libssl-dev): lfepolld's TLS listeners (src/tls_conf.c, src/tls.c) and
# lfbench --tls (client/btls.c).
SSL_LIBS = $(shell pkg-config --libs openssl 2>/dev/null || echo -lssl -lcrypto)

# LFE_JEMALLOC: jemalloc is the allocator (not under a sanitizer): OpenSSL's goes to glibc's
# (src/tls_conf.c tls_alloc_init says why)
LFE_CPPFLAGS = -D_GNU_SOURCE -Iinclude $(LUA_CFLAGS) $(ALLOC_DEFS)
LFE_CFLAGS := -std=c11 -g -pthread -MMD -MP $(WARN) $(SAN_FLAGS)
LFE_LDFLAGS := -pthread $(SAN_FLAGS)
ALL_CPPFLAGS = $(LFE_CPPFLAGS) $(CPPFLAGS)
ALL_CFLAGS = $(LFE_CFLAGS) $(OPT) $(CFLAGS)
ALL_LDFLAGS = $(LFE_LDFLAGS) $(LDFLAGS)

SRV_MODS := log args file opt topo net obuf conn pool idle stats report metrics admin sdnotify takeover iplimit proxy dispatch \
            server acceptor worker tune pidfile listeners sysrestore tls_conf tls
# The Lua wing (src/lua/): the rest of the daemon includes include/script.h only.
LUA_MODS := frame shdict ctx lstate script script_env lio lfelib lpattern lstop lconn
SRV_MODS += $(LUA_MODS:%=lua/%)
SRV_OBJS := $(SRV_MODS:%=$(BUILD)/src/%.o) $(BUILD)/src/tune_conf.o
LFEPOLLD := $(BINDIR)/lfepolld

# lfbench: the only user of libev (Debian's libev-dev ships no pkg-config file: -lev).
CLI_MODS := bcount bopt bscript cphase hist payload verify rate bconn engine kstat sweep hdr http json result result_json merge plot ports \
            btune btune_ns btune_stat btune_out tunewrite btls
CLI_OBJS := $(CLI_MODS:%=$(BUILD)/client/%.o) $(BUILD)/src/topo.o $(BUILD)/src/args.o \
            $(BUILD)/src/file.o
# kstat's hints judge a sysctl with --check-sysctl's own code and table (tune_judge).
CLI_OBJS += $(BUILD)/src/tune.o $(BUILD)/src/tune_conf.o $(BUILD)/src/log.o $(BUILD)/src/net.o
# lfbench tune --host changes host-wide keys through sysrestore's record, as --apply-sysctl does.
CLI_OBJS += $(BUILD)/src/sysrestore.o
LFBENCH := $(BINDIR)/lfbench

# Unit tests: one binary per module, at -O0 without _FORTIFY_SOURCE (so --wrap sees every call);
# the -Wl,--wrap list is generated from the __wrap_* functions each test defines.
UNIT := opt topo dispatch obuf conn net hist rate bopt verify frame shdict ctx script tune kstat \
        btune btune_stat \
        lpattern lconn file hdr http json result sweep ports iplimit proxy acceptor idle cphase tunewrite \
        sysrestore
CLI_TMODS := bcount bopt cphase hist payload verify rate kstat hdr http json result result_json merge sweep \
             btune btune_ns btune_stat btune_out \
             ports tunewrite
TOBJ := $(BUILD)/t
UNIT_BINS := $(UNIT:%=$(TOBJ)/test_%)
INT_BINS := $(TOBJ)/test_daemon $(TOBJ)/test_lua $(TOBJ)/test_lfbench $(TOBJ)/test_sysctl $(TOBJ)/test_sysctl_undo \
            $(TOBJ)/test_lfbench_http $(TOBJ)/test_plot $(TOBJ)/test_merge $(TOBJ)/test_lfbench_runs \
            $(TOBJ)/test_lfbench_counts $(TOBJ)/test_lfbench_script $(TOBJ)/test_lfbench_tls \
            tests/integration/test_hdr_interop.sh
INT_BINS += $(TOBJ)/test_admin $(TOBJ)/test_systemd $(TOBJ)/test_takeover $(TOBJ)/test_hygiene $(TOBJ)/test_lua_io $(TOBJ)/test_tls tests/integration/test_units.sh \
            tests/integration/test_install.sh tests/integration/test_newcomer.sh \
            tests/integration/test_docs_examples.sh tests/integration/test_fastopen.sh
INT_BINS += tests/integration/test_peers.sh tests/integration/test_bench_tls.sh tests/integration/test_tune.sh
# test_bench_tls.sh runs tests/bench/tls_libs.sh with OpenSSL's client (make bench-tls-libs)
TLS_BENCH_T := $(BUILD)/bench/tls_libs_openssl
INT_BINS += $(TOBJ)/test_tls_conf
BADSERVER := $(TOBJ)/badserver

.PHONY: all run test unit integration test-accept-threads deps deps-run bench bench-tls-libs format \
        format-check \
        format-deps install \
        uninstall clean sysctl-check sysctl-apply sysctl-undo verify-units
all: $(LFEPOLLD) $(LFBENCH)

$(BUILD)/src/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

# sysctl.conf, compiled in: lfepolld --check-sysctl needs no file beside it.
$(BUILD)/gen/tune_conf.c: sysctl.conf
	@mkdir -p $(@D)
	{ echo '/* generated from sysctl.conf by the Makefile */'; echo '#include "tune.h"'; \
	  echo 'const char tune_default_conf[] ='; \
	  sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/    "/' -e 's/$$/\\n"/' $<; echo '    ;'; } >$@

$(BUILD)/src/tune_conf.o: $(BUILD)/gen/tune_conf.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

$(LFEPOLLD): $(SRV_OBJS) $(BUILD)/src/main.o
	$(CC) $(ALL_LDFLAGS) -o $@ $^ $(LUA_LIBS) $(SSL_LIBS) $(ALLOC_LIBS) $(LDLIBS)

$(BUILD)/client/%.o: client/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) -Iclient $(ALL_CFLAGS) -c -o $@ $<

$(LFBENCH): $(CLI_OBJS) $(BUILD)/client/lfbench.o
	$(CC) $(ALL_LDFLAGS) -o $@ $^ -lev -lz $(SSL_LIBS) $(LUA_LIBS) $(LDLIBS)

# --- tests -------------------------------------------------------------------------------
# The benchmark peers (tests/bench/peers/), which test_peers.sh runs: read before the rules
# that name PEERS_C (a prerequisite list is expanded where it is read). The io_uring peer and
# accept_cost share the probe for liburing.
HAVE_URING := $(shell pkg-config --exists liburing 2>/dev/null && echo 1)
include tests/bench/peers/peers.mk

TEST_CFLAGS = $(LFE_CFLAGS) -O0 -U_FORTIFY_SOURCE -DLFE_SYSC_LIBC $(CFLAGS)

$(TOBJ)/src/%.o: src/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) $(TEST_CFLAGS) -c -o $@ $<

$(TOBJ)/libsrv.a: $(SRV_MODS:%=$(TOBJ)/src/%.o) $(BUILD)/src/tune_conf.o
	rm -f $@ && ar rcs $@ $^

$(TOBJ)/client/%.o: client/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) -Iclient $(TEST_CFLAGS) -c -o $@ $<

$(TOBJ)/libcli.a: $(CLI_TMODS:%=$(TOBJ)/client/%.o)
	rm -f $@ && ar rcs $@ $^

# Unit tests reach inside the Lua wing (its own headers, src/lua/) as they do inside client/.
$(TOBJ)/%.o: tests/unit/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) -Iclient -Isrc/lua $(TEST_CFLAGS) -c -o $@ $<

$(TOBJ)/int_%.o: tests/integration/%.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) -Itests/integration $(TEST_CFLAGS) -c -o $@ $<

# An integration test is tests/integration/test_NAME.c, linked by one rule with what it adds:
# the helpers it calls (harness.o: a daemon on a free port; load.o: the integration client,
# optimised: it checks every byte of hundreds of megabytes; lfb_util.o: what the lfbench tests
# share, a server on a free port, lfbench run and read) and its libraries (TEST_LIBS).
INT_C := daemon lua admin systemd takeover hygiene lua_io tls lfbench lfbench_runs lfbench_counts \
         lfbench_http lfbench_script lfbench_tls merge sysctl sysctl_undo plot tls_conf
$(INT_C:%=$(TOBJ)/test_%): $(TOBJ)/test_%: $(TOBJ)/int_test_%.o
	$(CC) $(ALL_LDFLAGS) -o $@ $^ -lcmocka $(TEST_LIBS) $(LDLIBS)

$(addprefix $(TOBJ)/test_,daemon lua admin systemd takeover hygiene lua_io tls merge tls_conf): $(TOBJ)/int_harness.o
$(TOBJ)/test_tls: TEST_LIBS = $(SSL_LIBS)
$(TOBJ)/test_daemon $(TOBJ)/test_lua: $(TOBJ)/int_load.o
$(addprefix $(TOBJ)/test_,lfbench lfbench_runs lfbench_counts lfbench_http lfbench_script lfbench_tls merge plot): \
    $(TOBJ)/int_lfb_util.o
$(TOBJ)/test_plot: $(TOBJ)/libcli.a $(TOBJ)/libsrv.a
$(TOBJ)/test_sysctl_undo: $(TOBJ)/libcli.a $(TOBJ)/libsrv.a
$(TOBJ)/int_test_sysctl_undo.o: TEST_CFLAGS += -Iclient
$(TOBJ)/int_test_plot.o: TEST_CFLAGS += -Iclient
$(addprefix $(TOBJ)/test_,daemon lua lfbench_runs lfbench_counts lfbench_script lfbench_tls merge): TEST_LIBS := -lm
$(TOBJ)/test_plot: TEST_LIBS := -lz -lm
$(TOBJ)/test_tls_conf: TEST_LIBS = $(SSL_LIBS) # its own client, where a ticket's bytes matter

$(BADSERVER): tests/integration/badserver.c
	@mkdir -p $(@D)
	$(CC) -O2 -o $@ $<

$(TOBJ)/int_load.o: TEST_CFLAGS = $(LFE_CFLAGS) -O2 $(CFLAGS)

$(TOBJ)/test_hdr: TEST_LIBS := -lz

# A test that includes mock_sys.h gets tests/unit/mock_sys.c's fakes and their --wrap flags.
$(TOBJ)/test_%: $(TOBJ)/test_%.o $(TOBJ)/mock_sys.o $(TOBJ)/libcli.a $(TOBJ)/libsrv.a
	@mock=$$(grep -l '"mock_sys.h"' tests/unit/test_$*.c); \
	set -x; $(CC) $(ALL_LDFLAGS) -o $@ $< $${mock:+$(TOBJ)/mock_sys.o} \
	  $$(sed -n 's/.*\b__wrap_\([a-z_0-9]*\)(.*/-Wl,--wrap=\1/p' tests/unit/test_$*.c \
	     $${mock:+tests/unit/mock_sys.c} 2>/dev/null | sort -u) \
	  $(TOBJ)/libcli.a $(TOBJ)/libsrv.a -lcmocka $(LUA_LIBS) $(SSL_LIBS) $(TEST_LIBS) $(LDLIBS)

# TSan cannot see the hand-off ordered by EPOLL_CTL_MOD: see tests/tsan.supp.
export TSAN_OPTIONS ?= suppressions=$(abspath tests/tsan.supp) second_deadlock_stack=1

TEST_ENV = LFEPOLLD=$(abspath $(LFEPOLLD)) LFBENCH=$(abspath $(LFBENCH)) \
           BADSERVER=$(abspath $(BADSERVER)) LFE_SANITIZER=$(SANITIZER) PEER_BIN=$(abspath $(PEER_BIN)) \
           TLS_LIBS_BIN=$(abspath $(BUILD)/bench)

# What make test runs: every test (the default), or TESTS=threads, the suites that drive the
# threads of both programs (the daemon's, lfbench's; test_fault also builds the fault shim that
# test_lfbench preloads), which is what the ThreadSanitizer pass of .ci/run needs.
# ACCEPT_THREADS=N runs the daemon's suites with N accept threads (LFE_ACCEPT_THREADS,
# harness.c), ONESHOT=always with --oneshot always (LFE_ONESHOT: EPOLLONESHOT and a re-arm per
# event in every group, where the default registers a one-worker group level-triggered): the
# AddressSanitizer pass of .ci/run runs them with both.
THREAD_BINS = $(UNIT_BINS) $(DAEMON_INT) $(TOBJ)/test_fault $(TOBJ)/test_lfbench $(TOBJ)/test_lfbench_counts \
              $(TOBJ)/test_lfbench_script $(TOBJ)/test_lfbench_tls
RUN_BINS = $(if $(filter threads,$(TESTS)),$(THREAD_BINS),$(UNIT_BINS) $(INT_BINS))
RUN_LIST = $(filter-out $(DAEMON_INT),$(RUN_BINS)) \
           $(if $(ACCEPT_THREADS),LFE_ACCEPT_THREADS=$(ACCEPT_THREADS)) \
           $(if $(ONESHOT),LFE_ONESHOT=$(ONESHOT)) $(filter $(DAEMON_INT),$(RUN_BINS))

test: deps
	@$(MAKE) --no-print-directory $(LFEPOLLD) $(LFBENCH) $(BADSERVER) $(PEERS_C) $(TLS_BENCH_T) $(RUN_BINS)
	@$(TEST_ENV) tests/run.sh $(RUN_LIST)

unit: $(UNIT_BINS)
	@tests/run.sh $(UNIT_BINS)

integration: $(LFEPOLLD) $(LFBENCH) $(BADSERVER) $(PEERS_C) $(TLS_BENCH_T) $(INT_BINS)
	@$(TEST_ENV) tests/run.sh $(INT_BINS)

# The daemon's integration tests again with two accept threads (two SO_REUSEPORT shards per
# address, harness.c reads LFE_ACCEPT_THREADS): every promise holds with more than one (.ci/run).
DAEMON_INT := $(addprefix $(TOBJ)/,test_daemon test_lua test_admin test_systemd test_takeover \
                                   test_hygiene test_lua_io test_tls test_tls_conf)
test-accept-threads: deps
	@$(MAKE) --no-print-directory $(LFEPOLLD) $(LFBENCH) $(BADSERVER) $(DAEMON_INT)
	@LFE_ACCEPT_THREADS=2 $(TEST_ENV) tests/run.sh $(DAEMON_INT)

# --- the two commands' prerequisites ---------------------------------------------------------
# deps-run: what make run needs; deps: that and the test stack (make test, CI). scripts/deps.sh
# installs what is missing as root, and otherwise prints the line that would (exit 1).
DEPS := scripts/deps.sh
deps-run:
	@$(DEPS) debs $(RUN_PKGS)

deps:
	@$(DEPS) debs $(DEB_PKGS)
	@$(DEPS) pip hdrh hdrhistogram tests/integration/hdr_interop.py \
	  'the --hdr-log interop tests skip without it, fail in CI'

run: deps-run
	@$(MAKE) --no-print-directory $(LFEPOLLD)
	$(LFEPOLLD) $(ARGS)

# Every benchmark, one report: docs/bench-report.md and docs/bench/*.png (tests/bench/report.sh).
# QUICK=1: under 5 minutes; REPS, DUR, SKIP pass through.
bench: $(LFEPOLLD) $(LFBENCH) $(BUILD)/bench/lua_call peers
	QUICK=$(QUICK) tests/bench/report.sh

# The cost of one Lua callback without sockets (optimised objects, as lfepolld runs them).
$(BUILD)/bench/lua_call: tests/bench/lua_call.c $(SRV_OBJS)
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $^ $(LUA_LIBS) $(SSL_LIBS) $(ALLOC_LIBS) $(LDLIBS)

# What the accept thread's and the re-arm's syscalls cost, alone (docs/bench.md, "Many cores").
# With liburing (as for the io_uring peer), also io_uring's re-arms against epoll_ctl's.
$(BUILD)/bench/accept_cost: tests/bench/accept_cost.c
	@mkdir -p $(@D)
	$(CC) $(ALL_CPPFLAGS) $(if $(HAVE_URING),-DLFE_HAVE_URING) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< \
	  $(if $(HAVE_URING),$$(pkg-config --libs liburing)) $(LDLIBS)

# Client TLS 1.3 handshakes with OpenSSL 3, GnuTLS and wolfSSL against one nginx, per client
# CPU second and in instructions (tests/bench/tls_libs.sh; docs/bench.md, "TLS libraries"): the
# measurement behind README's choice of OpenSSL. GnuTLS and wolfSSL are the benchmark's alone,
# not dependencies of lfepoll: each one missing is skipped, saying what to install.
bench-tls-libs:
	@libs=; for l in openssl:libssl-dev gnutls:libgnutls28-dev wolfssl:libwolfssl-dev; do \
	  if pkg-config --exists $${l%%:*}; then \
	    $(MAKE) --no-print-directory $(BUILD)/bench/tls_libs_$${l%%:*} || exit 1; libs="$$libs $${l%%:*}"; \
	  else echo "$${l#*:} not installed: $${l%%:*} is skipped (apt-get install $${l#*:})"; fi; \
	done; LIBS="$$libs" TLS_LIBS_BIN=$(abspath $(BUILD)/bench) QUICK=$(QUICK) tests/bench/tls_libs.sh

$(BUILD)/bench/tls_libs_%: tests/bench/tls_libs/main.c tests/bench/tls_libs/%.c tests/bench/tls_libs/tls_lib.h
	@mkdir -p $(@D)
	$(CC) -std=c11 -D_GNU_SOURCE -g -O2 -pthread $(WARN) $(CFLAGS) $(LDFLAGS) -o $@ $(filter %.c,$^) \
	  $$(pkg-config --cflags --libs $*) $(LDLIBS)

# The kernel's network parameters against sysctl.conf: a report. It exits 0 whether or not keys
# need attention (make's "Error 1" would read as a failed build), non-zero only when the checker
# itself fails. Scripts that want the verdict as an exit status run lfepolld --check-sysctl (1).
sysctl-check: $(LFEPOLLD)
	@$(LFEPOLLD) --check-sysctl --sysctl-conf sysctl.conf; rc=$$?; case $$rc in \
	0) echo "sysctl-check: done: this kernel matches sysctl.conf" ;; \
	1) echo "sysctl-check: done: the lines above say what to change (a report, not a failure)" ;; \
	*) echo "sysctl-check: the checker failed (exit $$rc)"; exit $$rc ;; esac

# The unit files as a clone can check them: ExecStart= pointed at the built binary (the units
# name /usr/local/bin/lfepolld, there after make install) and --man=no (man:lfepolld(8) is
# there after make install too). After make install: systemd-analyze verify lfepolld.service.
verify-units: $(LFEPOLLD)
	@d=$$(mktemp -d /tmp/lfe-units-XXXXXX) || exit 1; \
	sed 's|^ExecStart=/usr/local/bin/lfepolld|ExecStart=$(abspath $(LFEPOLLD))|' \
	  systemd/lfepolld.service >$$d/lfepolld.service && cp systemd/lfepolld.socket $$d/ && \
	systemd-analyze verify --man=no $$d/lfepolld.socket $$d/lfepolld.service; rc=$$?; \
	rm -rf $$d; [ $$rc = 0 ] && echo "verify-units: lfepolld.service and lfepolld.socket pass"; \
	exit $$rc

# As root: set what is below the recommendation (never lowering), then check again. Done (exit
# 0) when every key sysctl.conf sets is right afterwards, whatever is left that it cannot set
# here (host-wide keys in a namespace, RLIMIT_NOFILE: the report's count says each remedy);
# failed only when a key it should set could not be (the checker's exit 3). What it changed is
# saved in SYSCTL_UNDO (lfepolld's default when empty); make sysctl-undo puts it back.
SYSCTL_UNDO ?=
UNDO_OPT = $(if $(SYSCTL_UNDO),--undo-file $(SYSCTL_UNDO))
sysctl-apply: $(LFEPOLLD)
	@[ "$$(id -u)" = 0 ] || { echo "sysctl-apply changes kernel settings: run it as root (sudo make sysctl-apply)"; exit 1; }
	@out=$$($(LFEPOLLD) --apply-sysctl --sysctl-conf sysctl.conf $(UNDO_OPT)); rc=$$?; printf '%s\n' "$$out"; \
	set=$$(printf '%s\n' "$$out" | grep -c '^set '); \
	left=$$(printf '%s\n' "$$out" | sed -n 's/^\([0-9]*\) of [0-9]* need attention:$$/\1/p'); \
	case $$rc in \
	0) echo "sysctl-apply: done: $$set set; this kernel now matches sysctl.conf" ;; \
	1) echo "sysctl-apply: done: $$set set; $$left left that cannot be set here (see above)" ;; \
	3) echo "sysctl-apply: failed: $$set set, but a key sysctl.conf sets is still not right (see above)"; exit 1 ;; \
	*) echo "sysctl-apply: the checker failed (exit $$rc)"; exit $$rc ;; esac

# As root: what make sysctl-apply (lfepolld --apply-sysctl) changed, put back.
sysctl-undo: $(LFEPOLLD)
	@[ "$$(id -u)" = 0 ] || { echo "sysctl-undo changes kernel settings: run it as root (sudo make sysctl-undo)"; exit 1; }
	@$(LFEPOLLD) --undo-sysctl $(UNDO_OPT)

# Every C file of the project, for clang-format (.clang-format).
C_FILES = $(wildcard src/*.c src/*.h src/lua/*.c src/lua/*.h include/*.h client/*.c client/*.h tests/unit/*.c \
            tests/unit/*.h tests/integration/*.c tests/integration/*.h tests/bench/*.c \
            tests/fault/*.c tests/soak/*.c tests/fuzz/*.c tests/fuzz/*.h tests/bench/peers/c/*.c \
            tests/bench/peers/c/*.h tests/bench/tls_libs/*.c tests/bench/tls_libs/*.h)

format: format-deps
	clang-format -i $(C_FILES)

# CI: a file is a test: it fails, naming each place, where it is not as clang-format writes it.
format-check: format-deps
	@p=0; f=0; for c in $(C_FILES); do \
	  if clang-format --dry-run --Werror "$$c"; then p=$$((p + 1)); else f=$$((f + 1)); fi; \
	done; echo "$$p passed, $$f failed"; [ "$$f" -eq 0 ]

format-deps:
	@$(DEPS) tool clang-format clang-format

# make install: the binaries, man pages, systemd units (ExecStart= pointed at $(PREFIX)/bin), the
# Lua scripts, sysctl.conf as sysctl.d/60-lfepoll.conf (installed, never applied: see
# make sysctl-apply) and the example config, which is not overwritten when one is there already.
# make uninstall removes exactly these (the config only while it is still the example).
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
LUA_SCRIPTS := $(wildcard lua/*.lua) lua/README.md
# lfbench --script's examples: lua/bench/ (kv_mix.lua) and wrk's eight, rewritten (lua/bench/wrk/)
LUA_BENCH := $(wildcard lua/bench/*.lua)
LUA_WRK := $(wildcard lua/bench/wrk/*.lua)
INSTALLED := $(PREFIX)/bin/lfepolld $(PREFIX)/bin/lfbench $(PREFIX)/share/man/man8/lfepolld.8 \
             $(PREFIX)/share/man/man1/lfbench.1 $(UNITDIR)/lfepolld.service $(UNITDIR)/lfepolld.socket \
             $(LUA_SCRIPTS:lua/%=$(PREFIX)/share/lfepoll/lua/%) $(SYSCONFDIR)/sysctl.d/60-lfepoll.conf \
             $(LUA_BENCH:lua/%=$(PREFIX)/share/lfepoll/lua/%) $(LUA_WRK:lua/%=$(PREFIX)/share/lfepoll/lua/%)

install: $(LFEPOLLD) $(LFBENCH)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man8 \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(UNITDIR) $(DESTDIR)$(PREFIX)/share/lfepoll/lua \
	  $(DESTDIR)$(PREFIX)/share/lfepoll/lua/bench/wrk \
	  $(DESTDIR)$(SYSCONFDIR)/sysctl.d
	install -m 755 $(LFEPOLLD) $(LFBENCH) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 man/lfepolld.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	install -m 644 man/lfbench.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	sed 's|^ExecStart=/usr/local/bin/lfepolld|ExecStart=$(PREFIX)/bin/lfepolld|' systemd/lfepolld.service \
	  >$(DESTDIR)$(UNITDIR)/lfepolld.service && chmod 644 $(DESTDIR)$(UNITDIR)/lfepolld.service
	install -m 644 systemd/lfepolld.socket $(DESTDIR)$(UNITDIR)/
	install -m 644 $(LUA_SCRIPTS) $(DESTDIR)$(PREFIX)/share/lfepoll/lua/
	install -m 644 $(LUA_BENCH) $(DESTDIR)$(PREFIX)/share/lfepoll/lua/bench/
	install -m 644 $(LUA_WRK) $(DESTDIR)$(PREFIX)/share/lfepoll/lua/bench/wrk/
	install -m 644 sysctl.conf $(DESTDIR)$(SYSCONFDIR)/sysctl.d/60-lfepoll.conf
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/lfepolld.conf ]; then \
	  echo "$(DESTDIR)$(SYSCONFDIR)/lfepolld.conf exists: left as it is (the example is etc/lfepolld.conf)"; \
	else install -m 644 etc/lfepolld.conf $(DESTDIR)$(SYSCONFDIR)/lfepolld.conf; fi

uninstall:
	rm -f $(INSTALLED:%=$(DESTDIR)%)
	@if cmp -s etc/lfepolld.conf $(DESTDIR)$(SYSCONFDIR)/lfepolld.conf; then \
	  rm -f $(DESTDIR)$(SYSCONFDIR)/lfepolld.conf; \
	elif [ -e $(DESTDIR)$(SYSCONFDIR)/lfepolld.conf ]; then \
	  echo "$(DESTDIR)$(SYSCONFDIR)/lfepolld.conf differs from the example: kept"; fi
	-rmdir $(DESTDIR)$(PREFIX)/share/lfepoll/lua/bench/wrk $(DESTDIR)$(PREFIX)/share/lfepoll/lua/bench \
	  $(DESTDIR)$(PREFIX)/share/lfepoll/lua $(DESTDIR)$(PREFIX)/share/lfepoll 2>/dev/null

clean:
	rm -rf build build-address build-undefined build-thread lfepolld lfbench

# Scale-out (tests/scaleout/run.sh, docs/scale-out.md): three lfepolld backends behind HAProxy
# and nftables, two lfbench agents, all in network namespaces. Root only; not part of make test.
SCALEOUT_SHORT ?= 0
.PHONY: scaleout-test
scaleout-test:
	@if [ "$$(id -u)" != 0 ]; then echo "scaleout-test: skipped: needs root (network namespaces)"; exit 0; fi; \
	if ! ip netns list >/dev/null 2>&1; then echo "scaleout-test: skipped: ip netns cannot be used here"; exit 0; fi; \
	$(MAKE) --no-print-directory deps $(LFEPOLLD) $(LFBENCH) && \
	SCALEOUT_SHORT=$(SCALEOUT_SHORT) LFEPOLLD=$(abspath $(LFEPOLLD)) LFBENCH=$(abspath $(LFBENCH)) \
	  timeout -k 5 $$(if [ "$(SCALEOUT_SHORT)" = 1 ]; then echo 240; else echo 600; fi) tests/scaleout/run.sh

# Fuzzing, fault injection and the soak run keep their rules beside their sources.
-include tests/fuzz/fuzz.mk tests/fault/fault.mk tests/soak/soak.mk

-include $(wildcard $(BUILD)/src/*.d $(BUILD)/src/lua/*.d $(BUILD)/client/*.d $(TOBJ)/*.d $(TOBJ)/src/*.d \
                   $(TOBJ)/src/lua/*.d $(TOBJ)/client/*.d)
