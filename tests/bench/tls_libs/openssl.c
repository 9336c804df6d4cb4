/* openssl.c: tls_lib over OpenSSL 3 (libssl-dev). */
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>

#include "tls_lib.h"

static const char *ossl_version(void)
{
    return OpenSSL_version(OPENSSL_VERSION);
}

static int ossl_init(void)
{
    return OPENSSL_init_ssl(0, NULL) == 1 ? 0 : -1;
}

static void report(const char *what)
{
    char buf[256];
    ERR_error_string_n(ERR_get_error(), buf, sizeof(buf));
    fprintf(stderr, "openssl: %s: %s\n", what, buf);
    ERR_clear_error();
}

static void *ossl_ctx_new(const char *ca, enum ctx_kind kind)
{
    OSSL_LIB_CTX *lib = NULL;
    SSL_CTX *ctx;

    if (kind == CTX_LIBCTX && !(lib = OSSL_LIB_CTX_new())) {
        report("OSSL_LIB_CTX_new");
        return NULL;
    }
    ctx = SSL_CTX_new_ex(lib, NULL, TLS_client_method());
    if (!ctx) {
        report("SSL_CTX_new_ex");
        OSSL_LIB_CTX_free(lib);
        return NULL;
    }
    /* the library context goes with the SSL_CTX: freed in ossl_ctx_free */
    SSL_CTX_set_app_data(ctx, lib);
    if (!SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION) ||
        !SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256") ||
        !SSL_CTX_set1_groups_list(ctx, "X25519") || !SSL_CTX_load_verify_locations(ctx, ca, NULL)) {
        report("client context");
        SSL_CTX_free(ctx);
        OSSL_LIB_CTX_free(lib);
        return NULL;
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    return ctx;
}

static void ossl_ctx_free(void *p)
{
    SSL_CTX *ctx = p;
    OSSL_LIB_CTX *lib = SSL_CTX_get_app_data(ctx);

    SSL_CTX_free(ctx);
    OSSL_LIB_CTX_free(lib);
}

static int ossl_conn(void *ctx, int fd, void **sess, bool keep)
{
    SSL *ssl = SSL_new(ctx);
    char c;
    int ret = -1;

    if (!ssl) {
        report("SSL_new");
        return -1;
    }
    if (!SSL_set_fd(ssl, fd) || !SSL_set_tlsext_host_name(ssl, TLS_HOST) ||
        !SSL_set1_host(ssl, TLS_HOST) || (*sess && !SSL_set_session(ssl, *sess))) {
        report("SSL setup");
        goto out;
    }
    if (SSL_connect(ssl) != 1) {
        report("SSL_connect");
        goto out;
    }
    if (SSL_read(ssl, &c, 1) != 1) {
        report("SSL_read");
        goto out;
    }
    ret = SSL_session_reused(ssl);
    /* close_notify: without it OpenSSL marks the session not resumable when it is freed */
    SSL_shutdown(ssl);
    if (keep) {
        SSL_SESSION *s = SSL_get1_session(ssl);
        if (s) {
            SSL_SESSION_free(*sess);
            *sess = s;
        }
    }
out:
    SSL_free(ssl);
    return ret;
}

static void ossl_sess_free(void *sess)
{
    SSL_SESSION_free(sess);
}

const struct tls_lib tls_lib = {"openssl",     ossl_version, ossl_init,     ossl_ctx_new,
                                ossl_ctx_free, ossl_conn,    ossl_sess_free};
