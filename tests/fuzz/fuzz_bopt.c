/* fuzz_bopt: lfbench's command line (bopt_parse, bopt_parse_target, bopt_parse_sources).
 *
 * The input is argv, NUL-separated. Invariants: the result is one of the three; an error is one
 * line, the same line cut short in a small buffer; a parse that succeeds gives a configuration
 * inside every documented range (threads <= connections, -d or -n, --source only with an IPv4
 * target, a short mode without pipelining), its target is the address and port the text says
 * (an independent inet_pton reading), its --mix files and weights are the list's; a second parse
 * gives the same configuration; bopt_free frees everything (LeakSanitizer). */
#include "fuzz.h"

#include "bopt.h"

#include <arpa/inet.h>
#include <errno.h>

#define MAX_ARGS 64

/* The target as the usage describes it: v4:port, [v6]:port or localhost:port, port 1-65535
 * (written as strtol reads it: blanks and a '+' before the digits pass). */
static bool ref_target(const char *s, struct sockaddr_storage *ss)
{
    const char *colon = strrchr(s, ':'), *q;
    char host[128];
    long port = 0;
    size_t hl;

    memset(ss, 0, sizeof(*ss));
    if (!colon || colon == s)
        return false;
    for (q = colon + 1; *q == ' ' || (*q >= '\t' && *q <= '\r');)
        q++;
    if (*q == '-') /* 0 or negative */
        return false;
    q += *q == '+';
    if (!*q)
        return false;
    for (; *q; q++) {
        if (*q < '0' || *q > '9' || port > 65535)
            return false;
        port = port * 10 + (*q - '0');
    }
    if (port < 1 || port > 65535)
        return false;
    hl = (size_t)(colon - s);
    if (hl >= sizeof(host))
        return false;
    if (s[0] == '[') {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        if (hl < 3 || s[hl - 1] != ']')
            return false;
        memcpy(host, s + 1, hl - 2);
        host[hl - 2] = '\0';
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        return inet_pton(AF_INET6, host, &a->sin6_addr) == 1;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        memcpy(host, s, hl);
        host[hl] = '\0';
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        return inet_pton(AF_INET, strcmp(host, "localhost") ? host : "127.0.0.1", &a->sin_addr) ==
               1;
    }
}

static void check_target(const char *s)
{
    struct sockaddr_storage a, b;
    socklen_t len = 0;
    bool ok = bopt_parse_target(s, &a, &len) == 0, ref = ref_target(s, &b);

    FZ_CHECK(ok == ref, "bopt_parse_target('%s') %s, the reference %s", s,
             ok ? "took it" : "refused", ref ? "takes it" : "refuses it");
    if (ok) {
        FZ_CHECK(len == (a.ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                                : sizeof(struct sockaddr_in6)),
                 "address length %u", (unsigned)len);
        FZ_CHECK(!memcmp(&a, &b, len), "bopt_parse_target('%s'): another address", s);
    }
}

static void check_sources(const char *s)
{
    struct in_addr out[BOPT_MAX_SOURCES];
    int n = bopt_parse_sources(s, out, BOPT_MAX_SOURCES);

    FZ_CHECK(n == -EINVAL || (n >= 1 && n <= BOPT_MAX_SOURCES), "bopt_parse_sources: %d", n);
    for (int i = 1; i < n; i++)
        FZ_CHECK(ntohl(out[i].s_addr) == ntohl(out[i - 1].s_addr) + 1,
                 "source %d does not follow the one before", i);
}

static void check_config(const struct bopt *o, char **argv, int argc)
{
    struct sockaddr_storage ref;
    unsigned sum = 0;

    FZ_CHECK(o->target != NULL, "no target");
    FZ_CHECK(ref_target(o->target, &ref) && !memcmp(&ref, &o->addr, o->addrlen),
             "target '%s' is not the address it resolved to", o->target);
    FZ_CHECK(o->threads >= 1 && o->threads <= 256 && o->threads <= o->conns, "threads %d",
             o->threads);
    FZ_CHECK(o->conns >= 1 && o->conns <= 10000000, "conns %d", o->conns);
    FZ_CHECK(o->mode == MODE_LONG || o->mode == MODE_SHORT, "mode");
    FZ_CHECK(o->pipeline >= 1 && o->pipeline <= BOPT_MAX_PIPELINE &&
                 (o->mode == MODE_LONG || o->pipeline == 1),
             "pipeline %d", o->pipeline);
    FZ_CHECK(o->requests ? o->duration == 0 : o->duration >= 0.001 && o->duration <= 86400,
             "duration %g with %llu requests", o->duration, (unsigned long long)o->requests);
    FZ_CHECK(o->requests <= 1000000000000000ull, "requests");
    FZ_CHECK(o->warmup >= 0 && o->warmup <= 3600, "warmup %g", o->warmup);
    FZ_CHECK(o->timeout_ms >= 1 && o->timeout_ms <= 3600000, "timeout %d", o->timeout_ms);
    FZ_CHECK(o->rate == 0 || (o->rate >= 0.001 && o->rate <= 1e9), "rate %g", o->rate);
    FZ_CHECK(o->connect_rate == 0 || (o->connect_rate >= 0.001 && o->connect_rate <= 1e9),
             "connect rate %g", o->connect_rate);
    FZ_CHECK(o->size >= 1 && o->size <= (1u << 30), "size %zu", o->size);
    FZ_CHECK(o->nclasses >= 0 && o->nclasses <= BOPT_MAX_CLASSES, "nclasses %d", o->nclasses);
    for (int i = 0; i < o->nclasses; i++) {
        FZ_CHECK(o->cls[i].file != NULL, "class %d without a file", i);
        FZ_CHECK(o->cls[i].weight >= 1 && o->cls[i].weight <= 1000000, "weight %u",
                 o->cls[i].weight);
        if (o->mixbuf) {
            /* --mix: a FILE:WEIGHT item, FILE without a comma */
            FZ_CHECK(*o->cls[i].file && !strchr(o->cls[i].file, ','), "mix file '%s'",
                     o->cls[i].file);
            sum += o->cls[i].weight;
        }
    }
    FZ_CHECK(sum <= BOPT_MAX_CLASSES * 1000000u, "weights");
    FZ_CHECK(o->expect <= EXPECT_HTTP, "expect %d", (int)o->expect);
    FZ_CHECK(o->expect == EXPECT_BYTES ? o->expect_bytes >= 1 && o->expect_bytes <= (1u << 30)
                                       : o->expect_bytes == 0,
             "expect bytes %zu", o->expect_bytes);
    FZ_CHECK(o->nsources >= 0 && o->nsources <= BOPT_MAX_SOURCES, "nsources %d", o->nsources);
    FZ_CHECK(!o->nsources || o->addr.ss_family == AF_INET, "--source with an IPv6 target");
    /* a URL: HTTP, a path that starts with '/' and holds no blank, control or non-ASCII byte
     * (it goes into the request line as it is); -H only with HTTP, each one line */
    FZ_CHECK(!o->url || (o->expect == EXPECT_HTTP && o->path && o->path[0] == '/'), "url");
    for (const char *q = o->path; q && *q; q++)
        FZ_CHECK((unsigned char)*q > ' ' && (unsigned char)*q < 0x7f, "path byte %#x",
                 (unsigned char)*q);
    FZ_CHECK(!o->nheaders || o->expect == EXPECT_HTTP, "-H without HTTP");
    for (int i = 0; i < o->nheaders; i++)
        FZ_CHECK(strchr(o->headers[i], ':') && !strpbrk(o->headers[i], "\r\n"), "-H '%s'",
                 o->headers[i]);
    FZ_CHECK(!strchr(o->warning, '\n'), "a warning of two lines");
    (void)argv;
    (void)argc;
}

/* Everything but the --mix pointers, which point into a fresh copy at each parse. */
static void check_same(const struct bopt *a, const struct bopt *b)
{
    struct bopt x = *a, y = *b;

    FZ_CHECK(x.nclasses == y.nclasses, "nclasses");
    for (int i = 0; i < x.nclasses; i++) {
        FZ_CHECK(!strcmp(x.cls[i].file, y.cls[i].file), "class %d file", i);
        x.cls[i].file = y.cls[i].file = NULL;
    }
    FZ_CHECK(!x.mixbuf == !y.mixbuf, "mixbuf");
    x.mixbuf = y.mixbuf = NULL;
    /* a URL's path and the request's name: malloc'd at each parse */
    FZ_CHECK(!x.path == !y.path && (!x.path || !strcmp(x.path, y.path)), "path");
    FZ_CHECK(!x.get_name == !y.get_name && (!x.get_name || !strcmp(x.get_name, y.get_name)),
             "get_name");
    x.path = y.path = x.get_name = y.get_name = NULL;
    /* a URL's target points into its own struct (hostport) */
    FZ_CHECK(!x.target == !y.target && (!x.target || !strcmp(x.target, y.target)), "target");
    x.target = y.target = NULL;
    /* the TLS names point into their own struct (tls_host) unless --tls-sni gave one */
    FZ_CHECK(!x.tls_sni == !y.tls_sni && (!x.tls_sni || !strcmp(x.tls_sni, y.tls_sni)), "tls_sni");
    FZ_CHECK(!x.tls_name == !y.tls_name && (!x.tls_name || !strcmp(x.tls_name, y.tls_name)),
             "tls_name");
    x.tls_sni = y.tls_sni = x.tls_name = y.tls_name = NULL;
    FZ_CHECK(!memcmp(&x, &y, sizeof(x)), "a second parse gave another configuration");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char prog[] = "lfbench";
    char *buf = malloc(size + 1), *argv[MAX_ARGS + 1];
    char err[512], err2[512], small[24], *outtext = NULL;
    size_t outlen = 0;
    struct bopt o, o2;
    int argc = 1;
    enum bopt_result rc, rc2;
    const char *why;
    FILE *out;

    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    argv[0] = prog;
    for (char *p = buf; p < buf + size && argc < MAX_ARGS; p += strlen(p) + 1)
        argv[argc++] = p;
    argv[argc] = NULL;
    if (argc > 1) {
        check_target(argv[argc - 1]);
        check_sources(argv[argc - 1]);
    }

    memset(err, 0xa5, sizeof(err));
    out = open_memstream(&outtext, &outlen);
    FZ_CHECK(out != NULL, "open_memstream");
    rc = bopt_parse(&o, argc, argv, out, err, sizeof(err));
    fclose(out);
    FZ_CHECK(rc == BOPT_RUN || rc == BOPT_EXIT || rc == BOPT_ERROR, "result %d", (int)rc);
    if (rc == BOPT_ERROR) {
        why = fz_one_line(err, sizeof(err));
        FZ_CHECK(!why, "the error %s: '%.*s'", why, (int)strnlen(err, sizeof(err)), err);
        FZ_CHECK(outlen == 0, "an error printed %zu bytes of help", outlen);
    } else if (rc == BOPT_EXIT) {
        FZ_CHECK(outlen > 0 && outtext[outlen - 1] == '\n', "help output");
    } else {
        FZ_CHECK(outlen == 0, "a run printed %zu bytes", outlen);
        check_config(&o, argv, argc);
    }
    free(outtext);

    memset(err2, 0x5a, sizeof(err2));
    out = fopen("/dev/null", "w");
    FZ_CHECK(out != NULL, "/dev/null");
    rc2 = bopt_parse(&o2, argc, argv, out, err2, sizeof(err2));
    FZ_CHECK(rc2 == rc, "second parse: %d, first %d", (int)rc2, (int)rc);
    if (rc == BOPT_RUN)
        check_same(&o, &o2);
    FZ_CHECK(rc != BOPT_ERROR || !strcmp(err, err2), "second parse, other error");
    bopt_free(&o2);
    if (rc == BOPT_ERROR) {
        FZ_CHECK(bopt_parse(&o2, argc, argv, out, small, sizeof(small)) == rc, "small buffer");
        FZ_CHECK(strnlen(small, sizeof(small)) < sizeof(small) &&
                     !strncmp(small, err, strlen(small)),
                 "small buffer: '%s' is not the start of '%s'", small, err);
        bopt_free(&o2);
    }
    fclose(out);
    bopt_free(&o);
    free(buf);
    return 0;
}
