/* fuzz_tune: the sysctl.conf parser (tune_parse) and what reads its keys (tune_compare,
 * tune_want, tune_port_exposed).
 *
 * The input is the text of a sysctl.conf, then after a NUL the values /proc/sys might show, one
 * per key, NUL-separated. Invariants: a parse fails with one line "line N: ..." naming a line of
 * the text, or returns at most max keys, each with a name without blanks, a value and a why
 * folded (no blank at either end, no two in a row, only ' ' for a blank), a valid scope and
 * check, and line numbers that grow; writing the keys back as sysctl.conf and parsing that gives
 * the same keys; tune_compare gives a status of the enum, MISSING without a value, READONLY
 * instead of LOW/HIGH when not writable, OK for the recommended value itself (a min, max, eq or
 * range key is right at exactly its value; has: a list holding what it wants); tune_want is one
 * line. */
#include "fuzz.h"

#include "tune.h"

static void check_folded(const char *s, size_t cap, const char *what, bool empty_ok)
{
    size_t len = strnlen(s, cap);

    FZ_CHECK(len < cap, "%s not terminated", what);
    FZ_CHECK(empty_ok || len > 0, "%s empty", what);
    FZ_CHECK(!len || (s[0] != ' ' && s[len - 1] != ' '), "%s '%s' has a blank at an end", what, s);
    FZ_CHECK(!strstr(s, "  "), "%s '%s' has two blanks in a row", what, s);
    for (size_t i = 0; i < len; i++) /* folded: every blank is one ' ' */
        FZ_CHECK(!strchr("\t\n\v\f\r", s[i]), "%s has a blank 0x%02x", what, (unsigned char)s[i]);
}

static const char *const scope_word[] = {"netns", "host"};
static const char *const check_word[] = {"min", "max", "eq", "range", "has", "bits"};

/* The keys written back as a sysctl.conf (a '-' before each name: sysctl -p's "ignore errors"
 * prefix, which the parser drops, keeps a name that starts with '#' or ';' a key). */
static char *render(const struct tune_key *k, int n)
{
    size_t cap = (size_t)n * (sizeof(k->name) + sizeof(k->value) + sizeof(k->why) + 32) + 1, o = 0;
    char *text = malloc(cap);

    FZ_CHECK(text != NULL, "malloc");
    text[0] = '\0';
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(text + o, cap - o, "# @ %s %s: %s\n%s-%s = %s\n",
                              scope_word[k[i].scope], check_word[k[i].check], k[i].why,
                              k[i].apply ? "" : "#=", k[i].name, k[i].value);
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct tune_key keys[TUNE_MAX_KEYS], again[TUNE_MAX_KEYS];
    char *text, err[256], want[160];
    const char *cur, *end;
    int max, n, lines = 1;

    if (size < 1)
        return 0;
    max = 1 + data[0] % TUNE_MAX_KEYS;
    text = malloc(size);
    FZ_CHECK(text != NULL, "malloc");
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    end = text + size - 1;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';

    memset(err, 0xa5, sizeof(err));
    n = tune_parse(text, keys, max, err, sizeof(err));
    if (n < 0) {
        const char *why = fz_one_line(err, sizeof(err));
        int line = 0;

        FZ_CHECK(n == -1, "returned %d", n);
        FZ_CHECK(!why, "the error %s: '%.*s'", why, (int)strnlen(err, sizeof(err)), err);
        FZ_CHECK(sscanf(err, "line %d: ", &line) == 1 && line >= 1 && line <= lines,
                 "the error '%s' does not name one of the %d lines", err, lines);
        free(text);
        return 0;
    }
    FZ_CHECK(n <= max, "%d keys for room for %d", n, max);
    for (int i = 0; i < n; i++) {
        const struct tune_key *k = &keys[i];

        check_folded(k->name, sizeof(k->name), "name", false);
        FZ_CHECK(!strchr(k->name, ' ') && !strchr(k->name, '='), "name '%s'", k->name);
        check_folded(k->value, sizeof(k->value), "value", false);
        check_folded(k->why, sizeof(k->why), "why", false);
        FZ_CHECK(k->scope == TUNE_NETNS || k->scope == TUNE_HOST, "scope %d", (int)k->scope);
        FZ_CHECK(k->check <= TUNE_BITS, "check %d", (int)k->check);
        FZ_CHECK(k->line >= 2 && k->line <= lines && (i == 0 || k->line > keys[i - 1].line),
                 "key %d on line %d (%d lines, previous key on %d)", i, k->line, lines,
                 i ? keys[i - 1].line : 0);
    }

    /* written back and read again: the same keys */
    {
        char *t2 = render(keys, n);
        int n2 = tune_parse(t2, again, TUNE_MAX_KEYS, err, sizeof(err));

        FZ_CHECK(n2 == n, "the keys written back parse as %d keys, not %d (%s):\n%s", n2, n,
                 n2 < 0 ? err : "", t2);
        for (int i = 0; i < n; i++) {
            FZ_CHECK(!strcmp(keys[i].name, again[i].name) &&
                         !strcmp(keys[i].value, again[i].value) &&
                         !strcmp(keys[i].why, again[i].why) && keys[i].scope == again[i].scope &&
                         keys[i].check == again[i].check && keys[i].apply == again[i].apply,
                     "key %d ('%s' = '%s') written back reads as '%s' = '%s'", i, keys[i].name,
                     keys[i].value, again[i].name, again[i].value);
        }
        free(t2);
    }

    /* each key against the values that follow the text (and against itself, and nothing) */
    cur = text + strlen(text);
    for (int i = 0; i < n; i++) {
        const struct tune_key *k = &keys[i];
        enum tune_status st, st2;

        cur = cur < end ? cur + 1 : end;
        st = tune_compare(k, cur, true);
        st2 = tune_compare(k, cur, false);
        FZ_CHECK(st == TUNE_OK || st == TUNE_LOW || st == TUNE_HIGH, "status %d", (int)st);
        FZ_CHECK(st2 == (st == TUNE_OK ? TUNE_OK : TUNE_READONLY), "read-only status %d for %d",
                 (int)st2, (int)st);
        FZ_CHECK(tune_compare(k, NULL, true) == TUNE_MISSING, "no value is not MISSING");
        if (k->check != TUNE_HAS)
            FZ_CHECK(tune_compare(k, k->value, true) == TUNE_OK,
                     "'%s' (%s) is not right against itself", k->value, check_word[k->check]);
        cur += strlen(cur);

        memset(want, 0xa5, sizeof(want));
        tune_want(k, want, sizeof(want));
        FZ_CHECK(strnlen(want, sizeof(want)) < sizeof(want) && want[0] && !strchr(want, '\n'),
                 "tune_want: not one line");
        (void)tune_port_exposed((int)(k->line * 997 % 65536), k->value, cur < end ? cur : NULL);
    }
    free(text);
    return 0;
}
