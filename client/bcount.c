/* bcount: what lfbench counts over a second, a step or a run, and its sums. */
#include "bcount.h"

const char *const berr_name[ERR_KINDS] = {
    "refused",     "reset",       "timeout",       "addrnotavail", "emfile",
    "closed",      "mismatch",    "other",         "tls_verify",   "tls_alert",
    "tls_timeout", "tls_not_tls", "tls_truncated", "tls_other"};

void bcount_add(struct bcount *d, const struct bcount *s)
{
    d->requests += s->requests;
    d->bytes_out += s->bytes_out;
    d->bytes_in += s->bytes_in;
    d->connects += s->connects;
    d->lost += s->lost;
    d->reconnects += s->reconnects;
    d->http_non2xx += s->http_non2xx;
    d->checks += s->checks;
    d->check_failed += s->check_failed;
    d->check_unkept += s->check_unkept;
    for (int e = 0; e < ERR_KINDS; e++)
        d->errors[e] += s->errors[e];
}

uint64_t bcount_errors(const struct bcount *c)
{
    uint64_t n = 0;

    for (int e = 0; e < ERR_KINDS; e++)
        n += c->errors[e];
    return n;
}
