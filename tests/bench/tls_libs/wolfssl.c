/* wolfssl.c: tls_lib over wolfSSL (Debian 12's libwolfssl-dev; a benchmark's, not lfbench's). */
#include <stdio.h>
#include <wolfssl/options.h>
#include <wolfssl/ssl.h>

#include "tls_lib.h"

static const char *wolf_version(void)
{
    return wolfSSL_lib_version();
}

static int wolf_init(void)
{
    return wolfSSL_Init() == WOLFSSL_SUCCESS ? 0 : -1;
}

static void report(const char *what, WOLFSSL *ssl, int rc)
{
    char buf[WOLFSSL_MAX_ERROR_SZ];
    int err = ssl ? wolfSSL_get_error(ssl, rc) : rc;
    fprintf(stderr, "wolfssl: %s: %s\n", what, wolfSSL_ERR_error_string((unsigned long)err, buf));
}

static void *wolf_ctx_new(const char *ca, enum ctx_kind kind)
{
    static int groups[] = {WOLFSSL_ECC_X25519};
    WOLFSSL_CTX *ctx;
    int rc;

    if (kind == CTX_LIBCTX) {
        fprintf(stderr, "wolfssl: --ctx libctx is OpenSSL's alone\n");
        return NULL;
    }
    if (!(ctx = wolfSSL_CTX_new(wolfTLSv1_3_client_method()))) {
        fprintf(stderr, "wolfssl: CTX_new failed\n");
        return NULL;
    }
    if ((rc = wolfSSL_CTX_set_cipher_list(ctx, "TLS13-AES128-GCM-SHA256")) != WOLFSSL_SUCCESS ||
        (rc = wolfSSL_CTX_set_groups(ctx, groups, 1)) != WOLFSSL_SUCCESS ||
        (rc = wolfSSL_CTX_load_verify_locations(ctx, ca, NULL)) != WOLFSSL_SUCCESS) {
        report("client context", NULL, rc);
        wolfSSL_CTX_free(ctx);
        return NULL;
    }
    wolfSSL_CTX_set_verify(ctx, WOLFSSL_VERIFY_PEER, NULL);
    return ctx;
}

static void wolf_ctx_free(void *ctx)
{
    wolfSSL_CTX_free(ctx);
}

static int wolf_conn(void *ctx, int fd, void **sess, bool keep)
{
    WOLFSSL *ssl = wolfSSL_new(ctx);
    char c;
    int rc, ret = -1;

    if (!ssl) {
        fprintf(stderr, "wolfssl: wolfSSL_new failed\n");
        return -1;
    }
    if ((rc = wolfSSL_set_fd(ssl, fd)) != WOLFSSL_SUCCESS ||
        (rc = wolfSSL_UseSNI(ssl, WOLFSSL_SNI_HOST_NAME, TLS_HOST, sizeof(TLS_HOST) - 1)) !=
            WOLFSSL_SUCCESS ||
        (rc = wolfSSL_check_domain_name(ssl, TLS_HOST)) != WOLFSSL_SUCCESS ||
        (*sess && (rc = wolfSSL_set_session(ssl, *sess)) != WOLFSSL_SUCCESS)) {
        report("setup", ssl, rc);
        goto out;
    }
    if ((rc = wolfSSL_connect(ssl)) != WOLFSSL_SUCCESS) {
        report("connect", ssl, rc);
        goto out;
    }
    if ((rc = wolfSSL_read(ssl, &c, 1)) != 1) {
        report("read", ssl, rc);
        goto out;
    }
    ret = wolfSSL_session_reused(ssl);
    wolfSSL_shutdown(ssl); /* close_notify, as the other two send */
    if (keep) {
        WOLFSSL_SESSION *s = wolfSSL_get1_session(ssl);
        if (s) {
            wolfSSL_SESSION_free(*sess);
            *sess = s;
        }
    }
out:
    wolfSSL_free(ssl);
    return ret;
}

static void wolf_sess_free(void *sess)
{
    wolfSSL_SESSION_free(sess);
}

const struct tls_lib tls_lib = {"wolfssl",     wolf_version, wolf_init,     wolf_ctx_new,
                                wolf_ctx_free, wolf_conn,    wolf_sess_free};
