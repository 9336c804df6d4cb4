/* fuzz_lua: random frames through the shipped scripts (those in lua/) and tests/fuzz/ctx.lua, as
 * lfepolld runs them: one environment, two worker states, a few connections.
 *
 * The input picks the script and the limits (--lua-mem-mb, the conn.ctx limits), then a list of
 * events: a connection's on_connect, bytes arriving on it (framed with the script's framing as
 * lconn frames them), its on_close with any reason. Each event runs on one of the two states,
 * as the worker that takes it would. Invariants: every callback returns one of enum script_rc;
 * a failed one sends nothing; a connection whose callback did not return SCRIPT_OK is closed
 * (on_close, its conn.ctx released) and never used again; nothing leaks once the states and
 * the environment are freed (LeakSanitizer), nothing crashes or reads out of bounds (ASan). Per
 * script: echo.lua replies each frame as it came; kv.lua one line per request, of the forms it
 * documents; http_hello.lua an HTTP/1.1 response; compute.lua 8 bytes per request (counts kept
 * small, a few thousand loops); ctx.lua: each callback finds conn.ctx as the last successful
 * callback on that connection left it, whichever state runs it. */
#include "fuzz.h"

#include "conn.h"
#include "frame.h"
#include "log.h"
#include "script.h"

#define NCONN 4

enum { S_ECHO, S_KV, S_HTTP, S_COMPUTE, S_CTX, S_N };

static const char *const script_path[S_N] = {FUZZ_LUA_DIR "/echo.lua", FUZZ_LUA_DIR "/kv.lua",
                                             FUZZ_LUA_DIR "/http_hello.lua",
                                             FUZZ_LUA_DIR "/compute.lua", FUZZ_DIR "/ctx.lua"};

struct fconn {
    bool open;
    struct script_conn sc;
    struct framing fr;
    char *in; /* an incomplete frame */
    size_t inlen, scanned;
    char *last_end; /* ctx.lua: conn.ctx as the last successful callback left it */
};

struct run {
    int script;
    struct script_env *env;
    struct script *st[2];
    struct fconn c[NCONN];
    uint64_t next_id;
    struct outbuf out;
};

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    log_threshold = LOG_ERR; /* the scripts' errors still show, rate-limited */
    return 0;
}

static bool is_rc(enum script_rc rc)
{
    return rc == SCRIPT_OK || rc == SCRIPT_CLOSE || rc == SCRIPT_ERROR || rc == SCRIPT_TIMEOUT ||
           rc == SCRIPT_NOMEM;
}

/* kv.lua: one line, "VALUE ...", "NOT_FOUND", "STORED", "DELETED", "ERROR ..." or a number. */
static void check_kv(const char *r, size_t n)
{
    static const char *const forms[] = {"VALUE ", "NOT_FOUND\n", "STORED\n", "DELETED\n", "ERROR "};
    bool ok = false;

    FZ_CHECK(n >= 2 && r[n - 1] == '\n' && memchr(r, '\n', n) == r + n - 1,
             "kv.lua: a reply of %zu bytes is not one line", n);
    for (int i = 0; i < 5; i++)
        ok |= n >= strlen(forms[i]) && !memcmp(r, forms[i], strlen(forms[i])) &&
              (forms[i][strlen(forms[i]) - 1] == ' ' || n == strlen(forms[i]));
    if (!ok) { /* INCR: an integer */
        size_t i = r[0] == '-';
        for (ok = i < n - 1; i < n - 1; i++)
            ok &= r[i] >= '0' && r[i] <= '9';
    }
    FZ_CHECK(ok, "kv.lua: '%.*s' is none of the documented replies", (int)n - 1, r);
}

static void check_reply(struct run *R, struct fconn *c, enum script_rc rc, const char *frame,
                        size_t flen, const char *r, size_t n)
{
    switch (R->script) {
    case S_ECHO:
        FZ_CHECK(rc == SCRIPT_OK && n == flen && !memcmp(r, frame, n),
                 "echo.lua: rc %d, %zu bytes back for %zu", (int)rc, n, flen);
        break;
    case S_KV:
        check_kv(r, n);
        break;
    case S_HTTP:
        FZ_CHECK(n > 9 && !memcmp(r, "HTTP/1.1 ", 9) && memmem(r, n, "\r\n\r\n", 4),
                 "http_hello.lua: not an HTTP/1.1 response");
        break;
    case S_COMPUTE:
        FZ_CHECK(rc == SCRIPT_OK && n == 8, "compute.lua: rc %d, %zu bytes", (int)rc, n);
        break;
    case S_CTX: {
        const char *bar = memchr(r, '|', n);
        size_t slen;

        FZ_CHECK(bar && n >= 2 && r[n - 1] == '\n', "ctx.lua: a reply without '|'");
        slen = (size_t)(bar - r);
        FZ_CHECK(strlen(c->last_end) == slen && !memcmp(r, c->last_end, slen),
                 "ctx.lua: connection %llu found conn.ctx %.*s; its last successful callback "
                 "left %s",
                 (unsigned long long)c->sc.id, (int)slen, r, c->last_end);
        free(c->last_end);
        c->last_end = strndup(bar + 1, n - slen - 2);
        FZ_CHECK(c->last_end != NULL, "strndup");
        break;
    }
    }
}

static void conn_close(struct run *R, struct fconn *c, enum conn_why why, int st)
{
    script_on_close(R->st[st], &c->sc, why);
    script_conn_release(&c->sc);
    FZ_CHECK(c->sc.ctx == NULL && c->sc.ctxlen == 0, "conn.ctx kept after release");
    free(c->in);
    free(c->last_end);
    memset(c, 0, sizeof(*c));
}

static void conn_open(struct run *R, struct fconn *c)
{
    memset(c, 0, sizeof(*c));
    c->open = true;
    c->sc.id = ++R->next_id;
    c->sc.fd = -1;
    c->fr = *script_framing(R->st[0]);
    c->last_end = strdup("{}");
    FZ_CHECK(c->last_end != NULL, "strdup");
}

/* One callback's checks. Returns false when the connection is to close. */
static bool after(struct run *R, struct fconn *c, enum script_rc rc, size_t mark, const char *frame,
                  size_t flen, int st)
{
    FZ_CHECK(is_rc(rc), "callback returned %d", (int)rc);
    if (getenv("FUZZ_VERBOSE")) /* to follow a reproducer */
        fprintf(stderr, "conn %llu, state %d: rc %d, %zu bytes: %.*s\n",
                (unsigned long long)c->sc.id, st, (int)rc, R->out.len - mark,
                (int)(R->out.len - mark), R->out.data + mark);
    FZ_CHECK(R->out.len >= mark, "output shrank");
    if (rc == SCRIPT_OK || rc == SCRIPT_CLOSE) {
        if (frame || R->script == S_CTX)
            check_reply(R, c, rc, frame, flen, R->out.data + mark, R->out.len - mark);
    } else {
        FZ_CHECK(R->out.len == mark, "a failed callback (rc %d) sent %zu bytes", (int)rc,
                 R->out.len - mark);
    }
    R->out.len = 0; /* as if written */
    if (rc != SCRIPT_OK) {
        conn_close(R, c,
                   rc == SCRIPT_CLOSE   ? CONN_WHY_CLOSED
                   : rc == SCRIPT_NOMEM ? CONN_WHY_MEMORY
                                        : CONN_WHY_ERROR,
                   st);
        return false;
    }
    return true;
}

static bool data(struct run *R, struct fconn *c, const char *frame, size_t flen, int st)
{
    char fixed[8];
    size_t mark = R->out.len;

    if (R->script == S_COMPUTE) { /* a loop count of at most 4095: an input stays fast */
        memcpy(fixed, frame, 8);
        fixed[1] &= 0x0f;
        memset(fixed + 2, 0, 6);
        frame = fixed;
    }
    return after(R, c, script_on_data(R->st[st], &c->sc, frame, flen, &R->out), mark, frame, flen,
                 st);
}

/* Bytes p[0, n) arrive on c: framed as lconn frames them (in place when nothing waits, else
 * after what waits), each frame through on_data on state st. */
static void arrive(struct run *R, struct fconn *c, const char *p, size_t n, int st)
{
    const char *buf = p;
    size_t len = n, used = 0, local = 0, *scanned = &local;

    if (c->inlen) {
        char *in = realloc(c->in, c->inlen + n);
        FZ_CHECK(in != NULL, "realloc");
        memcpy(in + c->inlen, p, n);
        c->in = in;
        c->inlen += n;
        buf = c->in, len = c->inlen, scanned = &c->scanned;
    }
    while (used < len) {
        const char *frame;
        size_t flen;
        long r = frame_next(&c->fr, buf + used, len - used, scanned, &frame, &flen);

        if (r == 0)
            break;
        if (r < 0) {
            conn_close(R, c, CONN_WHY_FRAME_TOO_BIG, st);
            return;
        }
        used += (size_t)r;
        if (!data(R, c, frame, flen, st))
            return; /* closed: c is gone */
    }
    if (buf == c->in) {
        memmove(c->in, c->in + used, c->inlen - used);
        c->inlen -= used;
    } else if (used < len) {
        char *in = realloc(c->in, len - used); /* what waited was all used: its buffer too */
        FZ_CHECK(in != NULL, "realloc");
        c->in = in;
        memcpy(c->in, buf + used, len - used);
        c->inlen = len - used;
        c->scanned = local;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data_, size_t size)
{
    static struct worker_stats stats;
    static const size_t caps[] = {0, 1u << 20, 4u << 20, 64u << 20};
    struct fz f = {data_, size};
    struct run R = {0};
    struct script_opts o = {0};
    char err[512];
    uint8_t lim = fz_u8(&f);

    R.script = fz_u8(&f) % S_N;
    o.path = script_path[R.script];
    o.mem_cap = caps[lim % 4];
    o.shared_bytes = 1u << 20;
    o.ctx_max = lim & 0x10 ? 64 + fz_u8(&f) * 16u : 0;
    o.ctx_total = lim & 0x20 ? 256 + fz_u8(&f) * 64u : 0;
    o.max_output = lim & 0x40 ? 1 + fz_u8(&f) * 64u : 0;
    R.env = script_env_new(&o, err, sizeof(err));
    while (!R.env && o.mem_cap && o.mem_cap < (64u << 20)) { /* max_frame must fit in the cap */
        FZ_CHECK(strstr(err, "max_frame"), "%s does not load: %s", o.path, err);
        o.mem_cap *= 4;
        R.env = script_env_new(&o, err, sizeof(err));
    }
    FZ_CHECK(R.env != NULL, "%s does not load: %s", o.path, err);
    for (int i = 0; i < 2; i++) {
        R.st[i] = script_new(R.env, i ? "0.1" : "0.0", &stats, err, sizeof(err));
        FZ_CHECK(R.st[i] != NULL, "script_new: %s", err);
    }

    for (int events = 0; f.n && events < 256; events++) {
        uint8_t op = fz_u8(&f);
        struct fconn *c = &R.c[op % NCONN];
        int st = op >> 7;

        switch (op >> 2 & 7) {
        case 0: /* bytes arrive (the connection opens first if need be) */
        case 1:
        case 2:
        case 3: {
            const uint8_t *p;
            size_t n = fz_bytes(&f, &p, 255);

            if (!c->open) {
                size_t mark = R.out.len;
                conn_open(&R, c);
                if (!after(&R, c, script_on_connect(R.st[st], &c->sc, &R.out), mark, NULL, 0, st))
                    break;
            }
            if (n)
                arrive(&R, c, (const char *)p, n, st);
            break;
        }
        case 4: /* a large piece: the same byte many times */
            if (c->open) {
                size_t n = 1 + fz_u8(&f) * 257u;
                char *p = malloc(n);
                FZ_CHECK(p != NULL, "malloc");
                memset(p, fz_u8(&f), n);
                arrive(&R, c, p, n, st);
                free(p);
            }
            break;
        case 5: /* the connection ends */
            if (c->open)
                conn_close(&R, c, (enum conn_why)(CONN_WHY_EOF + fz_u8(&f) % 9), st);
            break;
        default: /* the state between batches */
            FZ_CHECK(script_refresh(R.st[st]) == 0, "refresh without a reload");
            break;
        }
    }

    for (int i = 0; i < NCONN; i++)
        if (R.c[i].open)
            conn_close(&R, &R.c[i], CONN_WHY_SHUTDOWN, i % 2);
    script_free(R.st[0]);
    script_free(R.st[1]);
    script_env_free(R.env);
    free(R.out.data);
    return 0;
}
