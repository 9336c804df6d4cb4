# The benchmark peers: tests/bench/peers/ (README there), built into $(PEER_BIN). The C ones
# with the project's warnings (and sanitizer, where one is asked for: make test runs them); the
# io_uring one where liburing is installed; Go and tokio (plain and TLS) where their toolchains
# are. Each one missing is skipped with one line saying what to install.
# Included by the Makefile (which supplies BUILD, WARN, SAN_FLAGS and HAVE_URING).

PEER_BIN := $(BUILD)/peers
PEER_SRC := tests/bench/peers
PEER_CFLAGS = -std=c11 -D_GNU_SOURCE -g -O2 -pthread $(WARN) $(SAN_FLAGS) $(CFLAGS)
PEER_LDFLAGS = -pthread $(SAN_FLAGS) $(LDFLAGS)
PEERS_C := $(PEER_BIN)/echoload $(PEER_BIN)/epoll_st $(PEER_BIN)/epoll_reuseport $(PEER_BIN)/uv_echo
PEERS_C += $(PEER_BIN)/tls_epoll_echo $(PEER_BIN)/tls_idle_conns
ifeq ($(HAVE_URING),1)
PEERS_C += $(PEER_BIN)/uring_echo
endif

.PHONY: peers
peers: $(PEERS_C)
ifneq ($(HAVE_URING),1)
	@echo "liburing-dev not installed: the io_uring peer is skipped (apt-get install liburing-dev)"
endif
	@if command -v go >/dev/null 2>&1; then \
	  (cd $(PEER_SRC)/go && go build -o $(abspath $(PEER_BIN))/go_echo .) || exit 1; \
	  (cd $(PEER_SRC)/gotls && go build -o $(abspath $(PEER_BIN))/go_tls_echo .) || exit 1; \
	else \
	  echo "go not installed: the go peers (go_echo, go_tls_echo) are skipped (apt-get install golang-go)"; \
	fi
	@if ! command -v cargo >/dev/null 2>&1; then \
	  echo "cargo not installed: the tokio peers (tokio_echo, tokio_tls_echo) are skipped (https://rustup.rs: their pinned crates need Rust 1.85+)"; \
	else \
	  export CARGO_TARGET_DIR=$(abspath $(PEER_BIN))/tokio-target; \
	  for p in tokio:tokio_echo tokiotls:tokio_tls_echo; do \
	    (cd $(PEER_SRC)/$${p%%:*} && { cargo build --release -q --offline 2>/dev/null || \
	      cargo build --release -q >$(abspath $(PEER_BIN))/$${p#*:}-build.log 2>&1; } && \
	    cp $$CARGO_TARGET_DIR/release/$${p#*:} $(abspath $(PEER_BIN))/$${p#*:}) || \
	    echo "cargo cannot build $${p#*:}, offline or online: skipped (see $(PEER_BIN)/$${p#*:}-build.log)"; \
	  done; \
	fi

$(PEER_BIN)/%.o: $(PEER_SRC)/c/%.c
	@mkdir -p $(@D)
	$(CC) $(PEER_CFLAGS) -MMD -MP -c -o $@ $<

# Each C peer is c/NAME.c, linked by one rule with what it adds: PEER_LIBS, other objects.
PEER_C_ALL := echoload epoll_st epoll_reuseport uv_echo uring_echo tls_epoll_echo tls_idle_conns
$(PEER_C_ALL:%=$(PEER_BIN)/%): $(PEER_BIN)/%: $(PEER_BIN)/%.o
	$(CC) $(PEER_LDFLAGS) -o $@ $^ $(PEER_LIBS) $(LDLIBS)

$(PEER_BIN)/epoll_reuseport $(PEER_BIN)/uring_echo: $(PEER_BIN)/cpulist.o
$(PEER_BIN)/echoload: PEER_LIBS := -lm
$(PEER_BIN)/uv_echo: PEER_LIBS = $$(pkg-config --libs libuv)
$(PEER_BIN)/uring_echo: PEER_LIBS = $$(pkg-config --libs liburing)
$(PEER_BIN)/tls_epoll_echo $(PEER_BIN)/tls_idle_conns: PEER_LIBS = $$(pkg-config --libs openssl)

-include $(wildcard $(PEER_BIN)/*.d)
