/* Unit tests of the Lua bridge: load errors with FILE:LINE, calls and replies, the conn object,
 * conn.ctx across two states (two workers), the memory cap, the timeout abort, reloads (a
 * failed one keeps the old script), the sandbox, lfe.shared. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "script.h"

static char path[64];
static struct worker_stats st;

static void write_script(const char *text)
{
    FILE *f;

    if (!path[0]) {
        int fd;
        snprintf(path, sizeof(path), "/tmp/lfe-test-XXXXXX.lua");
        fd = mkstemps(path, 4);
        assert_true(fd >= 0);
        close(fd);
    }
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static struct script_opts opts(void)
{
    return (struct script_opts){
        .path = path, .mem_cap = 8 << 20, .timeout_ms = 0, .shared_bytes = 1 << 20};
}

static struct script_env *env_of(const char *text, const struct script_opts *o, char *err)
{
    write_script(text);
    return script_env_new(o, err, 512);
}

/* Loads text and expects a load error containing FILE:LINE and needle. */
static void load_fails(const char *text, int line, const char *needle)
{
    struct script_opts o = opts();
    char err[512], where[96];
    struct script_env *e = env_of(text, &o, err);

    assert_null(e);
    snprintf(where, sizeof(where), "%s:%d:", path, line);
    if (!strstr(err, where) || !strstr(err, needle))
        fail_msg("want '%s' and '%s' in: %s", where, needle, err);
    assert_null(strchr(err, '\n')); /* one line */
}

static void test_load_errors(void **state)
{
    struct script_opts o = {.path = "/nonexistent/x.lua", .shared_bytes = 1 << 20};
    char err[512];

    (void)state;
    assert_null(script_env_new(&o, err, sizeof(err)));
    assert_non_null(strstr(err, "cannot open /nonexistent/x.lua: No such file"));
    load_fails("local x = 1\nreturn {on_data = function(c, f) return f end\n", 3, "expected");
    load_fails("local t = {}\n\nreturn t\n", 3, "no on_data function");
    load_fails("return 42\n", 1, "returns number");
    load_fails("local a = nil\nreturn a.b\n", 2, "attempt to index");
    load_fails("return {on_data = function() end,\n framing = 'xml'}\n", 2, "framing must be");
    load_fails("return {on_data = function() end, on_close = 3}\n", 1,
               "on_close must be a function");
    load_fails("return {on_data = function() end, framing = 'fixed'}\n", 1, "frame_size");
    load_fails("return {on_data = function() end, max_frame = 0}\n", 1, "max_frame");
}

static enum script_rc data(struct script *sc, struct script_conn *c, const char *frame,
                           struct outbuf *out)
{
    return script_on_data(sc, c, frame, strlen(frame), out);
}

static void out_is(struct outbuf *out, const char *want)
{
    if (out->len != strlen(want) || memcmp(out->data, want, out->len) != 0)
        fail_msg("want '%s', got '%.*s'", want, (int)out->len, out->data ? out->data : "");
    out->len = 0;
}

static void test_calls(void **state)
{
    static const char text[] =
        "return {framing = 'line', max_frame = 100,\n"
        "on_data = function(conn, f)\n"
        "  if f == 'nil' then return nil end\n"
        "  if f == 'close' then return false end\n"
        "  if f == 'send' then conn:send('a'); conn:send('b'); return 'c' end\n"
        "  if f == 'sendclose' then conn:send('bye'); conn:close(); return nil end\n"
        "  if f == 'err' then conn:send('lost'); error('boom') end\n"
        "  if f == 'table' then return {} end\n"
        "  if f == 'id' then return conn.id .. ' ' .. tostring(conn) end\n"
        "  if f == 'set' then conn.id = 3 end\n"
        "  if f == 'tls' then return tostring(conn.tls) end\n"
        "  return '<' .. f .. '>'\n"
        "end}\n";
    struct script_opts o = opts();
    char err[512];
    struct script_env *e = env_of(text, &o, err);
    struct script *sc;
    struct script_conn c = {.id = 42, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    assert_non_null(e);
    sc = script_new(e, "0.0", &st, err, sizeof(err));
    assert_non_null(sc);
    assert_int_equal(script_framing(sc)->kind, FRAME_LINE);
    assert_int_equal(script_framing(sc)->max_frame, 100);
    assert_int_equal(data(sc, &c, "x\0", &out), SCRIPT_OK);
    out_is(&out, "<x>");
    assert_int_equal(script_on_data(sc, &c, "a\0b", 3, &out), SCRIPT_OK); /* binary-safe */
    assert_int_equal(out.len, 5);
    assert_memory_equal(out.data, "<a\0b>", 5);
    out.len = 0;
    assert_int_equal(data(sc, &c, "nil", &out), SCRIPT_OK);
    out_is(&out, "");
    assert_int_equal(data(sc, &c, "close", &out), SCRIPT_CLOSE);
    assert_int_equal(data(sc, &c, "send", &out), SCRIPT_OK);
    out_is(&out, "abc");
    assert_int_equal(data(sc, &c, "sendclose", &out), SCRIPT_CLOSE);
    out_is(&out, "bye");
    assert_int_equal(outbuf_put(&out, "kept", 4), 0);
    assert_int_equal(data(sc, &c, "err", &out), SCRIPT_ERROR);
    out_is(&out, "kept"); /* what the failed call sent is taken back, earlier output stays */
    assert_int_equal(data(sc, &c, "table", &out), SCRIPT_ERROR);
    assert_int_equal(data(sc, &c, "set", &out), SCRIPT_ERROR);
    assert_int_equal(data(sc, &c, "id", &out), SCRIPT_OK);
    out_is(&out, "42 conn 42");
    assert_int_equal(data(sc, &c, "tls", &out), SCRIPT_OK);
    out_is(&out, "nil"); /* plain TCP: no TLS facts (test_tls has them over TLS) */
    assert_int_equal(st.lua_errors, 3);
    assert_true(st.lua_calls >= 10);
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

static void test_dead_conn(void **state)
{
    static const char text[] = "local saved\n"
                               "return {on_data = function(conn, f)\n"
                               "  if f == 'keep' then saved = conn; return 'kept' end\n"
                               "  return saved:send('x')\n"
                               "end}\n";
    struct script_opts o = opts();
    char err[512];
    struct script_env *e = env_of(text, &o, err);
    struct script *sc = script_new(e, "0.0", &st, err, sizeof(err));
    struct script_conn c1 = {.id = 1, .fd = -1}, c2 = {.id = 2, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    assert_int_equal(data(sc, &c1, "keep", &out), SCRIPT_OK);
    out.len = 0;
    /* c1's conn object, stashed, must not write into c2's output */
    assert_int_equal(data(sc, &c2, "use", &out), SCRIPT_ERROR);
    assert_int_equal(out.len, 0);
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

static void test_ctx_across_states(void **state)
{
    static const char text[] =
        "return {framing = 'line', on_data = function(conn, f)\n"
        "  local ctx = conn.ctx\n"
        "  if f == 'fn' then ctx.f = print; return 'x' end\n"
        "  if f == 'cycle' then ctx.me = ctx; return 'x' end\n"
        "  if f == 'reset' then conn.ctx = {n = 100}; return 'r' end\n"
        "  if f == 'clear' then conn.ctx = {}; return 'c' end\n"
        "  if f == 'peek' then return tostring(ctx.n) end\n"
        "  ctx.n = (ctx.n or 0) + 1\n"
        "  ctx.t = ctx.t or {list = {}, [1.5] = true, [7] = 'seven'}\n"
        "  table.insert(ctx.t.list, f)\n"
        "  return ctx.n .. ':' .. table.concat(ctx.t.list, ',') .. ':' .. ctx.t[7] ..\n"
        "         tostring(ctx.t[1.5]) .. ':' .. lfe.worker\n"
        "end}\n";
    struct script_opts o = opts();
    char err[512];
    struct script_env *e = env_of(text, &o, err);
    struct script *a = script_new(e, "0.0", &st, err, sizeof(err));
    struct script *b = script_new(e, "0.1", &st, err, sizeof(err));
    struct script_conn c = {.id = 1, .fd = -1}, other = {.id = 2, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(data(a, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "1:x:seventrue:0.0");
    assert_int_equal(data(b, &c, "y", &out), SCRIPT_OK); /* the next event on another worker */
    out_is(&out, "2:x,y:seventrue:0.1");
    assert_int_equal(data(a, &other, "z", &out), SCRIPT_OK); /* another connection: its own */
    out_is(&out, "1:z:seventrue:0.0");
    assert_int_equal(data(a, &c, "w", &out), SCRIPT_OK);
    out_is(&out, "3:x,y,w:seventrue:0.0");
    assert_int_equal(data(b, &c, "reset", &out), SCRIPT_OK);
    out.len = 0;
    assert_int_equal(data(a, &c, "peek", &out), SCRIPT_OK);
    out_is(&out, "100");
    assert_int_equal(data(a, &c, "clear", &out), SCRIPT_OK);
    out.len = 0;
    assert_null(c.ctx); /* an empty ctx costs nothing */
    assert_int_equal(data(b, &c, "fn", &out), SCRIPT_ERROR);
    assert_int_equal(data(b, &c, "cycle", &out), SCRIPT_ERROR);
    script_conn_release(&c);
    script_conn_release(&other);
    script_free(a);
    script_free(b);
    script_env_free(e);
    free(out.data);
}

/* The per-state cache of conn.ctx tables: a hit gives what the last save left, a failed call's
 * changes are dropped, a save by another state makes this one rebuild, big tables are not
 * cached, and thousands of connections keep the state's memory bounded. */
static void test_ctx_cache(void **state)
{
    static const char text[] =
        "return {on_data = function(conn, f)\n"
        "  local ctx = conn.ctx\n"
        "  if f == 'boom' then ctx.n = 999; ctx.t.x = 'changed'; error('boom') end\n"
        "  if f == 'big' then ctx.pad = string.rep('p', 4000) end\n"
        "  if f == 'peek' then return tostring(ctx.n) .. ':' .. tostring(ctx.t and ctx.t.x) end\n"
        "  ctx.n = (ctx.n or 0) + 1\n"
        "  ctx.t = ctx.t or {x = 'kept'}\n"
        "  return tostring(ctx.n)\n"
        "end}\n";
    struct script_opts o = opts();
    char err[512], want[32];
    struct script_env *e = env_of(text, &o, err);
    struct script *a = script_new(e, "0.0", &st, err, sizeof(err));
    struct script *b = script_new(e, "0.1", &st, err, sizeof(err));
    struct script_conn c = {.id = 1, .fd = -1}, *many;
    struct outbuf out = {0};

    (void)state;
    assert_int_equal(data(a, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "1");
    assert_ptr_equal(c.ctx_owner, a); /* a holds the table of this save */
    assert_int_equal(data(a, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "2");
    /* a failed call changed the cached table: the next call must not see it */
    assert_int_equal(data(a, &c, "boom", &out), SCRIPT_ERROR);
    assert_null(c.ctx_owner);
    out.len = 0;
    assert_int_equal(data(a, &c, "peek", &out), SCRIPT_OK);
    out_is(&out, "2:kept");
    /* another state saves: a's table is stale and must be rebuilt */
    assert_int_equal(data(a, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "3");
    assert_int_equal(data(b, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "4");
    assert_ptr_equal(c.ctx_owner, b);
    assert_int_equal(data(a, &c, "peek", &out), SCRIPT_OK);
    out_is(&out, "4:kept");
    assert_int_equal(data(a, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "5");
    /* a table over 256 bytes serialized is saved but not cached */
    assert_int_equal(data(a, &c, "big", &out), SCRIPT_OK);
    out_is(&out, "6");
    assert_null(c.ctx_owner);
    assert_int_equal(data(a, &c, "peek", &out), SCRIPT_OK);
    out_is(&out, "6:kept");
    /* 5,000 connections, each twice: right counts, and the cache starts over instead of
     * holding every table it ever saw */
    many = calloc(5000, sizeof(*many));
    assert_non_null(many);
    for (int round = 1; round <= 2; round++)
        for (int i = 0; i < 5000; i++) {
            many[i].id = 100 + (uint64_t)i;
            many[i].fd = -1;
            assert_int_equal(data(a, &many[i], "x", &out), SCRIPT_OK);
            snprintf(want, sizeof(want), "%d", round);
            out_is(&out, want);
        }
    assert_true(script_mem(a) < (4u << 20));
    for (int i = 0; i < 5000; i++)
        script_conn_release(&many[i]);
    free(many);
    script_conn_release(&c);
    script_free(a);
    script_free(b);
    script_env_free(e);
    free(out.data);
}

static void test_memory_cap(void **state)
{
    static const char text[] =
        "keep = {}\n"
        "return {on_data = function(conn, f)\n"
        "  if f == 'grow' then local t = {}\n"
        "    while true do t[#t + 1] = string.rep('x', 1000) .. #t end\n"
        "  end\n"
        "  if f == 'hoard' then\n"
        "    while true do keep[#keep + 1] = string.rep('y', 1000) .. #keep end\n"
        "  end\n"
        "  return 'ok'\n"
        "end}\n";
    struct script_opts o = opts();
    char err[512];
    struct script_env *e;
    struct script *sc;
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};
    uint64_t nomem = st.lua_nomem;

    (void)state;
    o.mem_cap = 2 << 20;
    e = env_of(text, &o, err);
    sc = script_new(e, "0.0", &st, err, sizeof(err));
    assert_int_equal(data(sc, &c, "grow", &out), SCRIPT_NOMEM);
    assert_int_equal(st.lua_nomem, nomem + 1);
    assert_true(script_mem(sc) < (1 << 20)); /* the garbage was collected */
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "ok");
    /* Live data at the cap: the state is rebuilt, and serves again. */
    assert_int_equal(data(sc, &c, "hoard", &out), SCRIPT_NOMEM);
    assert_true(script_mem(sc) < (1 << 20));
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "ok");
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

static long mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static void test_timeout(void **state)
{
    static const char text[] = "return {on_data = function(conn, f)\n"
                               "  if f == 'spin' then\n"
                               "    while true do pcall(function() end) end\n"
                               "  end\n"
                               "  return 'ok'\n"
                               "end}\n";
    struct script_opts o = opts();
    char err[512];
    struct script_env *e;
    struct script *sc;
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};
    long t0, took;

    (void)state;
    o.timeout_ms = 100;
    e = env_of(text, &o, err);
    sc = script_new(e, "0.0", &st, err, sizeof(err));
    assert_int_equal(script_env_start(e), 0);
    script_env_bind(sc);
    t0 = mono_ms();
    assert_int_equal(data(sc, &c, "spin", &out), SCRIPT_TIMEOUT);
    took = mono_ms() - t0;
    assert_true(took >= 90);
    assert_true(took < 5000);
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK); /* the hook is gone */
    out_is(&out, "ok");
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

static void test_reload(void **state)
{
    struct script_opts o = opts();
    char err[512];
    struct script_env *e = env_of("return {on_data = function() return 'v1' end}\n", &o, err);
    struct script *sc = script_new(e, "0.0", &st, err, sizeof(err));
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    write_script("return {on_data = function() return 'v2' end\n"); /* broken */
    assert_int_equal(script_env_reload(e, err, sizeof(err)), -1);
    assert_non_null(strstr(err, path));
    assert_int_equal(script_refresh(sc), 0);
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "v1"); /* the old script stays */
    write_script("return {on_connect = function() end, on_data = function() return 'v2' end}\n");
    assert_int_equal(script_env_reload(e, err, sizeof(err)), 2);
    assert_true(script_env_connect_first(e));
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "v1"); /* until the worker is between requests */
    assert_int_equal(script_refresh(sc), 1);
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "v2");
    assert_int_equal(script_refresh(sc), 0);
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

static void test_sandbox_and_shared(void **state)
{
    static const char text[] =
        "lfe.shared:set('boot', 1)\n"
        "return {on_data = function(conn, f)\n"
        "  if f == 'libs' then\n"
        "    return tostring(io) .. tostring(dofile) .. tostring(os.execute) .. type(os.time) ..\n"
        "           type(os.clock) .. type(string.pack) .. type(utf8.char) .. type(math.sin)\n"
        "  end\n"
        "  local sh = lfe.shared\n"
        "  sh:set('s', 'str'); sh.set('n', 41)\n"
        "  local ok, err = sh:set('big', string.rep('x', 100000))\n"
        "  return sh:get('s') .. sh:incr('n') .. tostring(sh:get('none')) ..\n"
        "         tostring(ok) .. (err and 'E' or '') .. tostring(sh:delete('s')) ..\n"
        "         tostring(sh:get('boot'))\n"
        "end}\n";
    struct script_opts o = opts();
    char err[512];
    struct script_env *e;
    struct script *sc;
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    o.shared_bytes = 64 * 1024;
    e = env_of(text, &o, err);
    assert_non_null(e);
    sc = script_new(e, "0.0", &st, err, sizeof(err));
    assert_int_equal(data(sc, &c, "libs", &out), SCRIPT_OK);
    out_is(&out, "nilnilnilfunctionfunctionfunctionfunctionfunction");
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "str42nilnilEtrue1");
    script_free(sc);
    script_env_free(e);
    o.unsafe = true;
    e = env_of(text, &o, err);
    sc = script_new(e, "0.0", &st, err, sizeof(err));
    assert_int_equal(data(sc, &c, "libs", &out), SCRIPT_OK);
    assert_null(memmem(out.data, out.len, "nil", 3)); /* --lua-unsafe: io, dofile, os.execute */
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

/* Captures what the process writes to stderr (the log) between two calls. */
static int saved_stderr = -1;
static char cap_path[64];

static void capture_start(void)
{
    int fd;

    snprintf(cap_path, sizeof(cap_path), "/tmp/lfe-log-XXXXXX");
    fd = mkstemp(cap_path);
    assert_true(fd >= 0);
    saved_stderr = dup(2);
    dup2(fd, 2);
    close(fd);
    log_threshold = LOG_INFO;
}

static char *capture_end(void)
{
    static char text[16384];
    FILE *f;
    size_t n;

    dup2(saved_stderr, 2);
    close(saved_stderr);
    log_threshold = LOG_ERR;
    f = fopen(cap_path, "r");
    assert_non_null(f);
    n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(cap_path);
    return text;
}

/* Defect 1: the frame (and the conn object) were pushed outside the protected call; at the cap
 * that allocation raised unprotected and lua_atpanic aborted the process. */
static void test_alloc_outside_pcall_at_cap(void **state)
{
    static const char text[] = "keep = {}\n"
                               "return {framing = 'line', max_frame = 600000,\n"
                               "on_data = function(conn, f)\n"
                               "  keep[#keep + 1] = f\n"
                               "  return 'kept ' .. #keep\n"
                               "end}\n";
    struct script_opts o = opts();
    char err[512], *frame = malloc(600000);
    struct script_env *e;
    struct script *sc;
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};
    int nomem = 0;

    (void)state;
    o.mem_cap = 1 << 20;
    memset(frame, 'f', 600000);
    e = env_of(text, &o, err);
    assert_non_null(e);
    sc = script_new(e, "0.0", &st, err, sizeof(err));
    assert_non_null(sc);
    /* each frame that cannot be copied into the state fails its call; none aborts */
    for (int i = 0; i < 6; i++) {
        enum script_rc rc = script_on_data(sc, &c, frame, 600000, &out);
        out.len = 0;
        if (rc == SCRIPT_NOMEM)
            nomem++;
        else
            assert_int_equal(rc, SCRIPT_OK);
    }
    assert_true(nomem >= 4);
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK); /* the state serves on */
    out.len = 0;
    script_free(sc);
    script_env_free(e);
    free(frame);
    free(out.data);
}

/* Defect 1: a max_frame that cannot fit beside the loaded script is refused with both numbers;
 * the default one yields to a small cap. */
static void test_max_frame_that_cannot_fit_is_refused(void **state)
{
    struct script_opts o = opts();
    char err[512];
    struct script_env *e;

    (void)state;
    o.mem_cap = 64 << 20;
    write_script("return {framing = 'len32', max_frame = 64 * 1024 * 1024,\n"
                 "on_data = function(c, f) return f end}\n");
    e = script_env_new(&o, err, sizeof(err));
    assert_null(e);
    if (!strstr(err, "max_frame 67108864") || !strstr(err, "--lua-mem-mb 64"))
        fail_msg("want both numbers in: %s", err);
    o.mem_cap = 1 << 20;
    write_script("return {framing = 'line', on_data = function(c, f) return f end}\n");
    e = script_env_new(&o, err, sizeof(err));
    assert_non_null(e);
    script_env_free(e);
}

/* Defect 2: reading the returned table ran its metamethods unprotected: a "strict" __index
 * that raises on a missing key (on_connect is optional) aborted the daemon at load. */
static void test_strict_index_on_load_and_reload(void **state)
{
    static const char text[] =
        "local strict = {__index = function(t, k) error('strict: no field ' .. k, 2) end}\n"
        "return setmetatable({on_data = function(c, f) return 'strict ok' end}, strict)\n";
    struct script_opts o = opts();
    char err[512];
    struct script_env *e = env_of("return {on_data = function() return 'v1' end}\n", &o, err);
    struct script *sc = script_new(e, "0.0", &st, err, sizeof(err));
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    write_script(text);
    assert_int_equal(script_env_reload(e, err, sizeof(err)), 2);
    assert_int_equal(script_refresh(sc), 1);
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "strict ok");
    /* a load that runs out of memory is an error, not an abort */
    write_script("local t = {} for i = 1, 1e7 do t[i] = i end\n"
                 "return {on_data = function() end}\n");
    assert_int_equal(script_env_reload(e, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "not enough memory"));
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "strict ok");
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

/* Defect 3: the count hook never fires inside string.find and friends, so a backtracking
 * pattern held the worker for as long as it ran; and finalizers run with hooks off. */
static void test_timeout_bounds_pattern_matching(void **state)
{
    static const char text[] =
        "return {on_data = function(conn, f)\n"
        "  local s = string.rep('a', 300000)\n"
        "  if f == 'find' then return tostring(s:find('.-.-.-b')) end\n"
        "  if f == 'gsub' then return tostring(select(2, s:gsub('a-a-a-b', ''))) end\n"
        "  if f == 'gmatch' then for _ in s:gmatch('.-.-b') do end return 'x' end\n"
        "  return 'ok'\n"
        "end}\n";
    static const char *const calls[] = {"find", "gsub", "gmatch"};
    struct script_opts o = opts();
    char err[512];
    struct script_env *e;
    struct script *sc;
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    o.timeout_ms = 100;
    e = env_of(text, &o, err);
    sc = script_new(e, "0.0", &st, err, sizeof(err));
    assert_int_equal(script_env_start(e), 0);
    script_env_bind(sc);
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        long t0 = mono_ms();
        assert_int_equal(data(sc, &c, calls[i], &out), SCRIPT_TIMEOUT);
        /* unbounded, each runs for hours; a generous bound, not a speed claim */
        if (mono_ms() - t0 > 10000)
            fail_msg("%s ran %ld ms at --lua-timeout-ms 100", calls[i], mono_ms() - t0);
    }
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "ok");
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

/* Found attacking the change: C loops of the standard library that allocate nothing, so the
 * memory cap does not bound them and the count hook never runs: string.rep of empty strings,
 * table.move over absent keys, table.insert/remove under a __len that lies. The timeout stops
 * them now, and they still do what Lua's do (moves in slices, both directions). */
static void test_stdlib_loops_stop(void **state)
{
    static const char text[] =
        "local big = 1 << 62\n"
        "local liar = {__len = function() return big end}\n"
        "local function same(a, b, n) for i = 1, n do if a[i] ~= b[i] then return false end end\n"
        "  return true end\n"
        "return {on_data = function(conn, f)\n"
        "  if f == 'rep' then return string.rep('', big) .. string.rep('', big, '') end\n"
        "  if f == 'move' then table.move({}, 1, big, 1, {}) end\n"
        "  if f == 'insert' then table.insert(setmetatable({}, liar), 1, 'x') end\n"
        "  if f == 'remove' then table.remove(setmetatable({}, liar), 1) end\n"
        "  if f == 'works' then\n"
        "    local n, a, b, r = 10000, {}, {}, {}\n"
        "    for i = 1, n do a[i] = i; b[i] = i end\n"
        "    table.move(a, 1, 9000, 500)                      -- overlapping: backward\n"
        "    for i = 9000, 1, -1 do b[i + 499] = b[i] end\n"
        "    local ok1 = same(a, b, n + 500)\n"
        "    for i = 1, n do a[i] = i; b[i] = i end\n"
        "    table.move(a, 500, 9999, 1)                      -- overlapping: forward\n"
        "    for i = 500, 9999 do b[i - 499] = b[i] end\n"
        "    local ok2 = same(a, b, n)\n"
        "    table.move(a, 1, n, 1, r)                        -- another table\n"
        "    local ok3 = same(a, r, n)\n"
        "    for i = 1, n do a[i] = i end\n"
        "    table.insert(a, 1, 0); table.insert(a, 'last')\n"
        "    local ok4 = a[1] == 0 and a[2] == 1 and a[n + 1] == n and a[n + 2] == 'last'\n"
        "    local x = table.remove(a, 1); local y = table.remove(a)\n"
        "    local ok5 = x == 0 and y == 'last' and #a == n and a[1] == 1 and a[n] == n\n"
        "    local e1 = select(2, pcall(table.insert, a, n + 5, 1))\n"
        "    local e2 = select(2, pcall(table.move, a, 1, math.maxinteger, 2))\n"
        "    return tostring(ok1 and ok2 and ok3 and ok4 and ok5) .. ' ' .. string.rep('ab', 3, "
        "'-')\n"
        "           .. ' ' .. tostring(e1:find('position out of bounds') ~= nil)\n"
        "           .. ' ' .. tostring(e2:find('wrap around') ~= nil)\n"
        "  end\n"
        "  return 'ok'\n"
        "end}\n";
    static const char *const calls[] = {"rep", "move", "insert", "remove"};
    struct script_opts o = opts();
    char err[512];
    struct script_env *e;
    struct script *sc;
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    o.timeout_ms = 100;
    e = env_of(text, &o, err);
    assert_non_null(e);
    sc = script_new(e, "0.0", &st, err, sizeof(err));
    assert_int_equal(script_env_start(e), 0);
    script_env_bind(sc);
    assert_int_equal(data(sc, &c, "works", &out), SCRIPT_OK);
    out_is(&out, "true ab-ab-ab true true");
    for (size_t i = 0; i < sizeof(calls) / sizeof(calls[0]); i++) {
        long t0 = mono_ms();
        enum script_rc rc = data(sc, &c, calls[i], &out);

        out.len = 0;
        if (i == 0) /* string.rep of empty strings: "" at once */
            assert_int_equal(rc, SCRIPT_OK);
        else
            assert_int_equal(rc, SCRIPT_TIMEOUT);
        if (mono_ms() - t0 > 10000) /* unbounded, each runs for centuries */
            fail_msg("%s ran %ld ms at --lua-timeout-ms 100", calls[i], mono_ms() - t0);
    }
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

static void test_gc_metamethods_refused(void **state)
{
    struct script_opts o = opts();
    char err[512];
    struct script_env *e;

    (void)state;
    load_fails("setmetatable({}, {__gc = function() while true do end end})\n"
               "return {on_data = function() end}\n",
               1, "__gc metamethods are refused");
    o.unsafe = true;
    write_script("local mt = setmetatable({}, {__gc = function() end})\n"
                 "return {on_data = function() end}\n");
    e = script_env_new(&o, err, sizeof(err));
    assert_non_null(e); /* --lua-unsafe allows them */
    script_env_free(e);
}

/* Defect 4: conn:send appended without bound and the reply went whole into the connection's
 * output, ignoring --max-pending. */
static void test_lua_send_bounded_by_max_pending(void **state)
{
    static const char text[] = "return {on_data = function(conn, f)\n"
                               "  local mib = string.rep('x', 1024 * 1024)\n"
                               "  if f == 'flood' then for i = 1, 400 do conn:send(mib) end end\n"
                               "  if f == 'reply' then return mib end\n"
                               "  return string.rep('y', 60000)\n"
                               "end}\n";
    struct script_opts o = opts();
    char err[512];
    struct script_env *e;
    struct script *sc;
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    o.max_output = 64 * 1024;
    e = env_of(text, &o, err);
    sc = script_new(e, "0.0", &st, err, sizeof(err));
    capture_start();
    assert_int_equal(data(sc, &c, "flood", &out), SCRIPT_ERROR);
    assert_int_equal(out.len, 0);
    assert_true(out.cap <= 128 * 1024); /* never grew past the bound */
    assert_int_equal(data(sc, &c, "reply", &out), SCRIPT_ERROR);
    assert_int_equal(out.len, 0);
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK); /* under the bound */
    assert_int_equal(out.len, 60000);
    out.len = 0;
    assert_non_null(strstr(capture_end(), "would pass --max-pending (65536 bytes"));
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

/* Defect 4: conn.ctx on the C heap had a per-connection bound only; all connections together
 * are bounded by --lua-ctx-mb (ctx_total). */
static void test_ctx_total_bounded(void **state)
{
    static const char text[] = "return {on_data = function(conn, f)\n"
                               "  conn.ctx.pad = string.rep('p', tonumber(f))\n"
                               "  return 'ok'\n"
                               "end}\n";
    struct script_opts o = opts();
    char err[512];
    struct script_env *e;
    struct script *sc;
    struct script_conn c[3] = {{.id = 1, .fd = -1}, {.id = 2, .fd = -1}, {.id = 3, .fd = -1}};
    struct outbuf out = {0};

    (void)state;
    o.ctx_total = 1 << 20;
    e = env_of(text, &o, err);
    sc = script_new(e, "0.0", &st, err, sizeof(err));
    capture_start();
    assert_int_equal(data(sc, &c[0], "600000", &out), SCRIPT_OK);
    assert_int_equal(data(sc, &c[1], "600000", &out), SCRIPT_ERROR); /* 1.2 MB > 1 MiB */
    assert_null(c[1].ctx);
    assert_int_equal(data(sc, &c[0], "100", &out), SCRIPT_OK); /* shrinks: refunded */
    assert_int_equal(data(sc, &c[1], "600000", &out), SCRIPT_OK);
    script_conn_release(&c[1]); /* released: refunded */
    assert_int_equal(data(sc, &c[2], "600000", &out), SCRIPT_OK);
    assert_non_null(strstr(capture_end(), "--lua-ctx-mb"));
    for (int i = 0; i < 3; i++)
        script_conn_release(&c[i]);
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

/* Defect 5: incr accepted "5" (luaL_checknumber converts) but stored it as a string and read
 * it as a number: incr(k, 1, "5") returned 1.0. */
static void test_shared_incr_numeric_strings(void **state)
{
    static const char text[] =
        "return {on_data = function(conn, f)\n"
        "  local sh = lfe.shared\n"
        "  local a = sh:incr('a', 1, '5')\n"
        "  local b = sh:incr('b', '2', 0)\n"
        "  local c = sh:incr('c', '0.5', '1')\n"
        "  local ok = pcall(sh.incr, sh, 'd', 1, 'five')\n"
        "  return math.type(a) .. a .. ' ' .. math.type(b) .. b .. ' ' .. c .. ' ' ..\n"
        "         tostring(ok) .. ' ' .. tostring(sh:get('d'))\n"
        "end}\n";
    struct script_opts o = opts();
    char err[512];
    struct script_env *e = env_of(text, &o, err);
    struct script *sc = script_new(e, "0.0", &st, err, sizeof(err));
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    assert_int_equal(data(sc, &c, "x", &out), SCRIPT_OK);
    out_is(&out, "integer6 integer2 1.5 false nil");
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

/* Defect 6: the cache handed out the live table, so a change through a reference kept
 * elsewhere (a registry of sessions) showed on the worker that cached it and not on others. */
static void test_ctx_same_whatever_the_worker(void **state)
{
    static const char text[] =
        "sessions = {}\n"
        "return {framing = 'line', on_data = function(conn, f)\n"
        "  if f == 'save' then conn.ctx.v = 1; sessions[conn.id] = conn.ctx; return 's' end\n"
        "  if f == 'mutate' then for _, t in pairs(sessions) do t.v = 99 end return 'm' end\n"
        "  return tostring(conn.ctx.v)\n"
        "end}\n";
    struct script_opts o = opts();
    char err[512];
    struct script_env *e = env_of(text, &o, err);
    struct script *a = script_new(e, "0.0", &st, err, sizeof(err));
    struct script *b = script_new(e, "0.1", &st, err, sizeof(err));
    struct script_conn c = {.id = 1, .fd = -1}, other = {.id = 2, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    assert_int_equal(data(a, &c, "save", &out), SCRIPT_OK);
    out_is(&out, "s");
    assert_int_equal(data(a, &other, "mutate", &out), SCRIPT_OK); /* not c's callback */
    out_is(&out, "m");
    assert_int_equal(data(a, &c, "get", &out), SCRIPT_OK); /* a cached the table */
    out_is(&out, "1");
    assert_int_equal(data(b, &c, "get", &out), SCRIPT_OK); /* b rebuilds it: the same */
    out_is(&out, "1");
    script_conn_release(&c);
    script_conn_release(&other);
    script_free(a);
    script_free(b);
    script_env_free(e);
    free(out.data);
}

/* Defect 8: load took binary chunks, string.dump was there, print wrote to stdout, and client
 * bytes reached the log unescaped. */
static void test_sandbox_holes(void **state)
{
    static const char text[] =
        "return {on_data = function(conn, f)\n"
        "  if f == 'dump' then return tostring(string.dump) end\n"
        "  if f == 'bin' then\n"
        "    local ok, err = pcall(load, '\\27Lua\\84\\0', 'x', 'b')\n"
        "    local f2, err2 = load('\\27Lua\\84\\0')\n"
        "    return tostring(ok) .. ' ' .. tostring(f2) .. ' ' .. tostring(err2 ~= nil)\n"
        "  end\n"
        "  if f == 'text' then\n"
        "    local env = {x = 5}\n"
        "    return load('return 1 + 1')() .. ' ' .. load('return x', 'c', 't', env)()\n"
        "  end\n"
        "  if f == 'print' then print('hello', 'from\\nprint'); return 'p' end\n"
        "  if f == 'meta' then\n"
        "    local mt = getmetatable(conn)\n"
        "    local ok = pcall(function() mt.__gc = function() while true do end end end)\n"
        "    local set = pcall(setmetatable, conn, {})\n"
        "    return type(mt) .. ' ' .. tostring(ok) .. ' ' .. tostring(set)\n"
        "  end\n"
        "  lfe.log('client said: ' .. f)\n"
        "  return 'l'\n"
        "end}\n";
    struct script_opts o = opts();
    char err[512], *log;
    struct script_env *e = env_of(text, &o, err);
    struct script *sc = script_new(e, "0.0", &st, err, sizeof(err));
    struct script_conn c = {.id = 1, .fd = -1};
    struct outbuf out = {0};

    (void)state;
    assert_int_equal(data(sc, &c, "dump", &out), SCRIPT_OK);
    out_is(&out, "nil");
    assert_int_equal(data(sc, &c, "bin", &out), SCRIPT_OK);
    out_is(&out, "false nil true");
    assert_int_equal(data(sc, &c, "text", &out), SCRIPT_OK);
    out_is(&out, "2 5");
    /* the conn metatable is out of reach: no __gc on it, no other __index */
    assert_int_equal(data(sc, &c, "meta", &out), SCRIPT_OK);
    out_is(&out, "string false false");
    capture_start();
    assert_int_equal(data(sc, &c, "print", &out), SCRIPT_OK);
    assert_int_equal(data(sc, &c, "evil\n12:00:00.000 lfepolld[1]: error: forged\x1b[2J", &out),
                     SCRIPT_OK);
    log = capture_end();
    out.len = 0;
    assert_non_null(strstr(log, "print: hello\\tfrom\\nprint\n"));
    assert_non_null(
        strstr(log, "client said: evil\\n12:00:00.000 lfepolld[1]: error: forged\\x1b[2J\n"));
    assert_null(strstr(log, "\nforged"));
    assert_null(strstr(log, "\n12:00:00.000"));
    script_free(sc);
    script_env_free(e);
    free(out.data);
}

static int cleanup(void **state)
{
    (void)state;
    if (path[0])
        unlink(path);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_calls),
        cmocka_unit_test(test_dead_conn),
        cmocka_unit_test(test_ctx_across_states),
        cmocka_unit_test(test_ctx_cache),
        cmocka_unit_test(test_memory_cap),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_reload),
        cmocka_unit_test(test_sandbox_and_shared),
        cmocka_unit_test(test_alloc_outside_pcall_at_cap),
        cmocka_unit_test(test_max_frame_that_cannot_fit_is_refused),
        cmocka_unit_test(test_strict_index_on_load_and_reload),
        cmocka_unit_test(test_timeout_bounds_pattern_matching),
        cmocka_unit_test(test_gc_metamethods_refused),
        cmocka_unit_test(test_stdlib_loops_stop),
        cmocka_unit_test(test_lua_send_bounded_by_max_pending),
        cmocka_unit_test(test_ctx_total_bounded),
        cmocka_unit_test(test_shared_incr_numeric_strings),
        cmocka_unit_test(test_ctx_same_whatever_the_worker),
        cmocka_unit_test(test_sandbox_holes),
    };

    log_threshold = LOG_ERR; /* the failures these tests provoke are logged as warnings */
    return cmocka_run_group_tests(tests, NULL, cleanup);
}
