/* gnutls.c: tls_lib over GnuTLS (libgnutls28-dev). */
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>

#include "tls_lib.h"

/* TLS 1.3, AES-128-GCM, X25519 only (GnuTLS otherwise sends two key shares) */
#define PRIORITY "NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:-GROUP-ALL:+GROUP-X25519"

static const char *gtls_version(void)
{
    return gnutls_check_version(NULL);
}

static int gtls_init(void)
{
    int rc = gnutls_global_init();
    if (rc < 0)
        fprintf(stderr, "gnutls: global_init: %s\n", gnutls_strerror(rc));
    return rc < 0 ? -1 : 0;
}

struct gctx {
    gnutls_certificate_credentials_t cred;
    gnutls_priority_t prio;
};

static void *gtls_ctx_new(const char *ca, enum ctx_kind kind)
{
    struct gctx *g;
    int rc;

    if (kind == CTX_LIBCTX) {
        fprintf(stderr, "gnutls: --ctx libctx is OpenSSL's alone\n");
        return NULL;
    }
    if (!(g = calloc(1, sizeof(*g))))
        return NULL;
    if ((rc = gnutls_certificate_allocate_credentials(&g->cred)) < 0 ||
        (rc = gnutls_certificate_set_x509_trust_file(g->cred, ca, GNUTLS_X509_FMT_PEM)) < 0 ||
        (rc = gnutls_priority_init(&g->prio, PRIORITY, NULL)) < 0) {
        fprintf(stderr, "gnutls: client context: %s\n", gnutls_strerror(rc));
        if (g->cred)
            gnutls_certificate_free_credentials(g->cred);
        free(g);
        return NULL;
    }
    return g;
}

static void gtls_ctx_free(void *p)
{
    struct gctx *g = p;
    gnutls_priority_deinit(g->prio);
    gnutls_certificate_free_credentials(g->cred);
    free(g);
}

static int gtls_conn(void *p, int fd, void **sess, bool keep)
{
    struct gctx *g = p;
    gnutls_datum_t *d = *sess;
    gnutls_session_t s;
    const char *what = "init";
    char c;
    int rc, ret = -1;

    if ((rc = gnutls_init(&s, GNUTLS_CLIENT)) < 0)
        goto fail;
    what = "setup";
    if ((rc = gnutls_priority_set(s, g->prio)) < 0 ||
        (rc = gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, g->cred)) < 0 ||
        (rc = gnutls_server_name_set(s, GNUTLS_NAME_DNS, TLS_HOST, sizeof(TLS_HOST) - 1)) < 0 ||
        (d && (rc = gnutls_session_set_data(s, d->data, d->size)) < 0))
        goto fail;
    gnutls_session_set_verify_cert(s, TLS_HOST, 0);
    gnutls_transport_set_int(s, fd);
    what = "handshake";
    do
        rc = gnutls_handshake(s);
    while (rc < 0 && !gnutls_error_is_fatal(rc));
    if (rc < 0)
        goto fail;
    what = "record_recv";
    do
        rc = (int)gnutls_record_recv(s, &c, 1);
    while (rc == GNUTLS_E_AGAIN || rc == GNUTLS_E_INTERRUPTED);
    if (rc != 1)
        goto fail;
    ret = gnutls_session_is_resumed(s) != 0;
    gnutls_bye(s, GNUTLS_SHUT_WR); /* close_notify, as the other two send */
    if (keep) {
        gnutls_datum_t *n = malloc(sizeof(*n));
        if (n && gnutls_session_get_data2(s, n) == 0) {
            if (d) {
                gnutls_free(d->data);
                free(d);
            }
            *sess = n;
        } else {
            free(n);
        }
    }
    gnutls_deinit(s);
    return ret;
fail:
    fprintf(stderr, "gnutls: %s: %s\n", what, rc == 1 ? "short read" : gnutls_strerror(rc));
    if (what[0] != 'i')
        gnutls_deinit(s);
    return -1;
}

static void gtls_sess_free(void *sess)
{
    gnutls_datum_t *d = sess;
    if (d) {
        gnutls_free(d->data);
        free(d);
    }
}

const struct tls_lib tls_lib = {"gnutls",      gtls_version, gtls_init,     gtls_ctx_new,
                                gtls_ctx_free, gtls_conn,    gtls_sess_free};
