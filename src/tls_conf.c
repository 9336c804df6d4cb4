/* tls_conf: what the TLS listeners serve with: an OpenSSL context per --tls-cert (its chain,
 * its --tls-key checked against it) chosen by SNI, the versions, ciphers, groups and ALPN, client
 * certificates, session tickets and the session cache; rebuilt on SIGHUP.
 *
 * DESIGN
 *
 * Certificates by SNI. Every --tls-cert gets a context of its own, each configured alike. A
 * connection is made from the first one's (the default), and the servername callback moves one
 * whose SNI names another certificate onto that one's context (SSL_set_SSL_CTX, as nginx and
 * HAProxy do); no SNI, or a name no certificate holds, keeps the default. A certificate's names
 * are its subjectAltName DNS entries (its CN when it has none); an exact name wins over a
 * wildcard, then the first certificate given. The other contexts, the names and the ALPN list
 * are a `struct certs` owned by the default context (its ex_data, freed with it): a connection
 * holds its default context (the session context OpenSSL keeps), so everything it may still use
 * lives as long as it does.
 *
 * Reload. SIGHUP builds a whole new set from the same files; a failure leaves the running one.
 * Success publishes the new default context as generation N+1 under live->mu. A thread making a
 * connection (tls_conf_ctx) keeps its own reference to the context of the generation it last
 * saw and takes the new one under mu when the generation moved: the lock is taken once per
 * thread per reload, never per connection, and an old context is freed by OpenSSL's count when
 * its last connection and the last thread holding it let go.
 *
 * Tickets. One key ring for the process, outside the contexts: every worker seals and opens with
 * the same keys, and a reload does not lose the tickets out there. Key epochs follow the
 * monotonic clock: the key of epoch e (e * P to (e + 1) * P after start, P =
 * --tls-ticket-rotate) seals the tickets of its epoch and opens them until (e + 2) * P, then is
 * forgotten. The first thread to need a key of a new epoch writes the ring (random keys, from
 * OpenSSL's generator); readers copy it word by word under a sequence count and copy again when
 * it was odd (a write under way) or moved: no lock of ours on the handshake's path.
 */
#include "tls_conf.h"

#include "opt.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define ALPN_MAX 1024 /* --tls-alpn's list in the wire's form (a length byte before each name) */
#define TK_WORDS 10   /* a ticket key: its name (16 bytes), AES-256 key, HMAC-SHA256 key */

/* A ticket key as the callback uses it. */
struct tkey {
    unsigned char name[16], aes[32], mac[32];
};

_Static_assert(sizeof(struct tkey) == TK_WORDS * sizeof(uint64_t), "a ticket key is whole words");

/* The ticket keys: k[0] the current epoch's, k[1] the one before's. Written by whichever thread
 * first needs a new epoch, read by any; every field but the two constants through atomics. */
struct ring {
    unsigned long seq;       /* even: stable; odd: a writer is at work */
    long epoch;              /* k[0]'s epoch */
    uint64_t k[2][TK_WORDS]; /* struct tkey's bytes */
    long t0_ms, period_ms;   /* start, and --tls-ticket-rotate: immutable */
};

/* What a default context owns (its ex_data): the other certificates' contexts, every
 * certificate's names, the ALPN list. Immutable once built. */
struct certs {
    int n;                       /* contexts, the default's included */
    SSL_CTX *ctx[OPT_MAX_CERTS]; /* [0] the owner (no reference: it owns us); others owned */
    char **names;                /* lower-case DNS names, "*.example.com" for a wildcard */
    int *of;                     /* the certificate each name is in */
    int nnames;
    unsigned char alpn[ALPN_MAX]; /* --tls-alpn, wire form; alpn_len 0: none */
    unsigned alpn_len;
};

/* One thread's reference to a default context, and the generation it is of. */
struct slot {
    SSL_CTX *ctx;
    long gen;
    struct slot *next;
};

/* What changes while the threads run. */
struct live {
    pthread_mutex_t mu; /* guards cur, slots and a slot's fields; see the DESIGN */
    SSL_CTX *cur;       /* the current default context (this reference is ours) */
    long gen;           /* cur's generation: written under mu, read without it (atomic) */
    struct slot *slots; /* every thread's reference, freed with the configuration */
};

struct tls_conf {
    const struct opt *o;
    struct live *live;
    struct ring *ring; /* NULL with --tls-tickets off */
    EVP_CIPHER *aes;   /* AES-256-CBC, fetched once (a fetch per ticket takes a lock) */
};

static int ex_certs = -1, ex_conf = -1; /* SSL_CTX ex_data: a default's certs; the tls_conf */

/* OpenSSL's last error as words ("" when it left none), and its queue emptied. */
static const char *ssl_why(void)
{
    static __thread char why[256];
    unsigned long e = ERR_peek_last_error();

    why[0] = '\0';
    if (e)
        ERR_error_string_n(e, why, sizeof(why));
    ERR_clear_error();
    return why;
}

/* A passphrase prompt: none is asked (no terminal at start under systemd); an encrypted key is
 * refused with words of its own. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag;
    *(int *)u = 1;
    return -1;
}

/* Opens path for reading, or says why not. */
static FILE *open_pem(const char *opt, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");

    if (!f)
        snprintf(err, errlen, "%s %s: cannot read it: %s", opt, path, strerror(errno));
    return f;
}

/* Writes t's date into buf as OpenSSL prints it ("Jan  2 03:04:05 2020 GMT"). */
static void date_of(const ASN1_TIME *t, char *buf, size_t len)
{
    BIO *b = BIO_new(BIO_s_mem());
    int n = 0;

    if (b && ASN1_TIME_print(b, t))
        n = BIO_read(b, buf, (int)len - 1);
    buf[n > 0 ? n : 0] = '\0';
    BIO_free(b);
}

/* The first certificate of --tls-cert (the server's own), checked for its dates. NULL with err
 * when the file holds none or it is not valid now. */
static X509 *read_leaf(const char *path, char *err, size_t errlen)
{
    FILE *f = open_pem("--tls-cert", path, err, errlen);
    char when[64];
    X509 *x;

    if (!f)
        return NULL;
    x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!x) {
        ERR_clear_error();
        snprintf(err, errlen,
                 "--tls-cert %s: no PEM certificate in it (a '-----BEGIN CERTIFICATE-----' "
                 "block, the server's first, then its chain)",
                 path);
        return NULL;
    }
    if (X509_cmp_current_time(X509_get0_notAfter(x)) <= 0) {
        date_of(X509_get0_notAfter(x), when, sizeof(when));
        snprintf(err, errlen, "--tls-cert %s: the certificate expired on %s: renew it", path, when);
        goto out_bad;
    }
    if (X509_cmp_current_time(X509_get0_notBefore(x)) > 0) {
        date_of(X509_get0_notBefore(x), when, sizeof(when));
        snprintf(err, errlen,
                 "--tls-cert %s: the certificate is not valid before %s (is the clock right?)",
                 path, when);
        goto out_bad;
    }
    return x;

out_bad:
    X509_free(x);
    return NULL;
}

/* --tls-key's key, or NULL with err. */
static EVP_PKEY *read_key(const char *path, char *err, size_t errlen)
{
    FILE *f = open_pem("--tls-key", path, err, errlen);
    int asked = 0;
    EVP_PKEY *k;

    if (!f)
        return NULL;
    k = PEM_read_PrivateKey(f, NULL, no_passphrase, &asked);
    fclose(f);
    ERR_clear_error();
    if (!k && asked)
        snprintf(err, errlen,
                 "--tls-key %s: the key is encrypted and lfepolld asks no passphrase: write it "
                 "out unencrypted (openssl pkey -in %s -out KEY), readable by lfepolld alone",
                 path, path);
    else if (!k)
        snprintf(err, errlen,
                 "--tls-key %s: no PEM private key in it (a '-----BEGIN PRIVATE KEY-----' or "
                 "'-----BEGIN EC/RSA PRIVATE KEY-----' block)",
                 path);
    return k;
}

static long mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

/* --- the ticket keys --- */

/* Copies the ring's two keys into k and returns their epoch (k[0]'s). */
static long ring_read(struct ring *r, struct tkey k[2])
{
    uint64_t w[2][TK_WORDS];

    for (int spins = 0;; spins++) {
        unsigned long s = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
        long epoch = __atomic_load_n(&r->epoch, __ATOMIC_ACQUIRE);

        if (!(s & 1)) {
            for (int i = 0; i < 2; i++)
                for (int j = 0; j < TK_WORDS; j++)
                    w[i][j] = __atomic_load_n(&r->k[i][j], __ATOMIC_ACQUIRE);
            /* a word a writer stored (release) after its odd count: that count is seen now */
            if (__atomic_load_n(&r->seq, __ATOMIC_RELAXED) == s) {
                memcpy(k, w, sizeof(w));
                OPENSSL_cleanse(w, sizeof(w));
                return epoch;
            }
        }
        if (spins > 100) /* a writer descheduled between its two counts */
            sched_yield();
    }
}

/* Moves the ring to epoch: the key before becomes the previous one if it is epoch - 1's, else
 * both are new. Whoever wins the count writes; a loser reads what the winner wrote. */
static void ring_advance(struct ring *r, long epoch)
{
    uint64_t fresh[2][TK_WORDS];
    unsigned long s = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
    long have;

    if ((s & 1) || RAND_bytes((unsigned char *)fresh, sizeof(fresh)) != 1)
        return; /* another thread writes; or no randomness now: the keys stay a while longer */
    if (!__atomic_compare_exchange_n(&r->seq, &s, s + 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        goto out;
    /* each word and the epoch below are stored with release, read with acquire: a reader that sees
     * one sees the odd count too (no fence: ThreadSanitizer does not model fences) */
    have = __atomic_load_n(&r->epoch, __ATOMIC_RELAXED);
    if (have < epoch) {
        for (int j = 0; j < TK_WORDS; j++) {
            uint64_t prev =
                have == epoch - 1 ? __atomic_load_n(&r->k[0][j], __ATOMIC_RELAXED) : fresh[1][j];

            __atomic_store_n(&r->k[1][j], prev, __ATOMIC_RELEASE);
            __atomic_store_n(&r->k[0][j], fresh[0][j], __ATOMIC_RELEASE);
        }
        __atomic_store_n(&r->epoch, epoch, __ATOMIC_RELEASE);
    }
    __atomic_store_n(&r->seq, s + 2, __ATOMIC_RELEASE);
out:
    OPENSSL_cleanse(fresh, sizeof(fresh));
}

/* The keys of now's epoch, the ring moved there first when it is behind. */
static void ring_keys(struct ring *r, struct tkey k[2])
{
    long epoch = (mono_ms() - r->t0_ms) / r->period_ms;

    if (ring_read(r, k) < epoch) {
        ring_advance(r, epoch);
        ring_read(r, k);
    }
}

static int mac_init(EVP_MAC_CTX *h, unsigned char *key)
{
    OSSL_PARAM p[] = {OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, key, 32),
                      OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
                      OSSL_PARAM_construct_end()};

    return EVP_MAC_CTX_set_params(h, p);
}

/* OpenSSL's ticket callback: seal with the current key (enc), or open with the key the ticket
 * names: 1, 2 (a new ticket is sent: opened with the previous key, or TLS 1.3), 0 (no such key:
 * a full handshake), -1 (an error). A TLS 1.3 client uses a ticket once (RFC 8446 C.4; OpenSSL's
 * client drops it after the resumption), and OpenSSL 3.0's server sends none after a resumption
 * the callback answered 1: each client would resume every other time. So 2, as nginx does. */
static int ticket_cb(SSL *s, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *c,
                     EVP_MAC_CTX *h, int enc)
{
    const struct tls_conf *t = SSL_CTX_get_ex_data(SSL_get_SSL_CTX(s), ex_conf);
    struct tkey k[2];
    int rc = 0;

    ring_keys(t->ring, k);
    if (enc) {
        memcpy(name, k[0].name, sizeof(k[0].name));
        rc = RAND_bytes(iv, 16) == 1 && EVP_EncryptInit_ex(c, t->aes, NULL, k[0].aes, iv) &&
                     mac_init(h, k[0].mac)
                 ? 1
                 : -1;
    } else {
        for (int i = 0; i < 2 && !rc; i++)
            if (!memcmp(name, k[i].name, sizeof(k[i].name)))
                rc = EVP_DecryptInit_ex(c, t->aes, NULL, k[i].aes, iv) && mac_init(h, k[i].mac)
                         ? (i || SSL_version(s) >= TLS1_3_VERSION ? 2 : 1)
                         : -1;
    }
    OPENSSL_cleanse(k, sizeof(k));
    return rc;
}

/* --- the certificates' names, SNI and ALPN --- */

static void certs_free(struct certs *c)
{
    if (!c)
        return;
    for (int i = 1; i < c->n; i++)
        SSL_CTX_free(c->ctx[i]);
    for (int i = 0; i < c->nnames; i++)
        free(c->names[i]);
    free(c->names);
    free(c->of);
    free(c);
}

/* ex_data's destructor: a default context frees what it owns with itself. */
static void free_certs(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    certs_free(ptr);
}

/* Adds name (len bytes, not NUL-terminated), lower-cased, as a name of certificate i. */
static int add_name(struct certs *c, int i, const unsigned char *name, int len)
{
    char **names = realloc(c->names, sizeof(*names) * (size_t)(c->nnames + 1));
    int *of;
    char *n;

    if (!names)
        return -1;
    c->names = names;
    if (!(of = realloc(c->of, sizeof(*of) * (size_t)(c->nnames + 1))))
        return -1;
    c->of = of;
    if (len <= 0 || memchr(name, '\0', (size_t)len))
        return 0; /* not a host name: nothing to match */
    if (!(n = strndup((const char *)name, (size_t)len)))
        return -1;
    for (char *p = n; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    c->names[c->nnames] = n;
    c->of[c->nnames++] = i;
    return 0;
}

/* Certificate i's names: its subjectAltName's DNS entries, else its subject's CN. 0 or -1. */
static int cert_names(struct certs *c, int i, X509 *x)
{
    GENERAL_NAMES *g = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);
    X509_NAME *subj = X509_get_subject_name(x);
    int rc = 0, dns = 0, at;

    for (int k = 0; g && k < sk_GENERAL_NAME_num(g) && !rc; k++) {
        GENERAL_NAME *n = sk_GENERAL_NAME_value(g, k);

        if (n->type == GEN_DNS) {
            rc = add_name(c, i, ASN1_STRING_get0_data(n->d.dNSName),
                          ASN1_STRING_length(n->d.dNSName));
            dns++;
        }
    }
    GENERAL_NAMES_free(g);
    if (!rc && !dns && (at = X509_NAME_get_index_by_NID(subj, NID_commonName, -1)) >= 0) {
        ASN1_STRING *cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subj, at));

        rc = add_name(c, i, ASN1_STRING_get0_data(cn), ASN1_STRING_length(cn));
    }
    return rc;
}

/* The certificate serving host: an exact name first, then a wildcard for its first label. */
static int pick(const struct certs *c, const char *host)
{
    const char *dot = strchr(host, '.');

    for (int i = 0; i < c->nnames; i++)
        if (!strcasecmp(c->names[i], host))
            return c->of[i];
    for (int i = 0; dot && dot > host && i < c->nnames; i++)
        if (c->names[i][0] == '*' && c->names[i][1] == '.' && !strcasecmp(c->names[i] + 1, dot))
            return c->of[i];
    return 0;
}

/* OpenSSL's servername callback, on the default context: another certificate's context for a
 * name it holds. Never refuses: an unknown name gets the default certificate. */
static int servername_cb(SSL *s, int *alert, void *arg)
{
    const struct certs *c = arg;
    const char *host = SSL_get_servername(s, TLSEXT_NAMETYPE_host_name);
    int i = host ? pick(c, host) : 0;

    (void)alert;
    if (i > 0 && !SSL_set_SSL_CTX(s, c->ctx[i]))
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    return SSL_TLSEXT_ERR_OK;
}

/* OpenSSL's ALPN callback: the first protocol of --tls-alpn the client offers (the server's
 * preference); none of them refuses the handshake (no_application_protocol, RFC 7301 3.2). */
static int alpn_cb(SSL *s, const unsigned char **out, unsigned char *outlen,
                   const unsigned char *in, unsigned inlen, void *arg)
{
    const struct certs *c = arg;

    (void)s;
    for (unsigned i = 0; i < c->alpn_len; i += 1u + c->alpn[i])
        for (unsigned j = 0; j < inlen; j += 1u + in[j])
            if (in[j] == c->alpn[i] && j + 1u + in[j] <= inlen &&
                !memcmp(in + j + 1, c->alpn + i + 1, in[j])) {
                *out = in + j + 1;
                *outlen = in[j];
                return SSL_TLSEXT_ERR_OK;
            }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

/* --tls-alpn "h2,http/1.1" into c's wire form. 0, or -1 with err. */
static int alpn_parse(struct certs *c, const char *list, char *err, size_t errlen)
{
    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ",");

        if (len == 0 || len > 255 || c->alpn_len + 1 + len > sizeof(c->alpn)) {
            snprintf(err, errlen,
                     "--tls-alpn '%s': protocol names are 1 to 255 bytes, comma-separated, %d "
                     "bytes in all, e.g. h2,http/1.1",
                     list, ALPN_MAX);
            return -1;
        }
        c->alpn[c->alpn_len++] = (unsigned char)len;
        memcpy(c->alpn + c->alpn_len, p, len);
        c->alpn_len += (unsigned)len;
        p += len;
        if (!*p)
            return 0;
    }
}

/* --- one context --- */

/* --tls-ciphersuites: each name alone first, as OpenSSL skips a name it does not know in a list
 * that holds one it does. 0 or -1. */
static int set_suites(SSL_CTX *ctx, const char *list)
{
    char one[128];

    for (const char *p = list;; p++) {
        size_t len = strcspn(p, ":");

        if (len == 0 || len >= sizeof(one))
            return -1;
        memcpy(one, p, len);
        one[len] = '\0';
        if (SSL_CTX_set_ciphersuites(ctx, one) != 1)
            return -1;
        p += len;
        if (!*p)
            break;
    }
    return SSL_CTX_set_ciphersuites(ctx, list) == 1 ? 0 : -1;
}

/* The versions, modes and limits every connection has, and --tls-ciphers, --tls-ciphersuites
 * and --tls-groups. 0, or -1 with err. */
static int set_protocol(SSL_CTX *ctx, const struct opt *o, char *err, size_t errlen)
{
    static const int version[] = {TLS1_2_VERSION, TLS1_3_VERSION};

    if (!SSL_CTX_set_min_proto_version(ctx, version[o->tls_min_version]) ||
        !SSL_CTX_set_max_proto_version(ctx, version[o->tls_max_version])) {
        snprintf(err, errlen, "TLS: OpenSSL refuses the versions: %s", ssl_why());
        return -1;
    }
    /* renegotiation (TLS 1.2) refused: a client could make the server redo its costliest step
     * on one connection at will */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* a FIN without close_notify ends the input as close_notify does (nginx does the same): the
     * echo answers all it read, as it does over plain TCP, then sends its own close_notify */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
    /* RELEASE_BUFFERS: an idle connection keeps no record buffers;
     * ENABLE_PARTIAL_WRITE: SSL_write returns what it sent, as write(2);
     * ACCEPT_MOVING_WRITE_BUFFER: a write retried after WANT_WRITE may come from another place
     * (an output buffer that grew, or the read buffer first and the output buffer then) */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* read ahead: a read(2) takes what the socket holds, up to a record's buffer, rather than a
     * record's 5-byte header and then its body: one read a request instead of two (the read
     * that finds the socket empty is saved too: src/conn.c conn_drained) */
    SSL_CTX_set_read_ahead(ctx, 1);
    if (o->tls_ciphers && SSL_CTX_set_cipher_list(ctx, o->tls_ciphers) != 1) {
        snprintf(err, errlen,
                 "--tls-ciphers '%s': OpenSSL knows no TLS 1.2 cipher in it: write e.g. "
                 "ECDHE+AESGCM (openssl ciphers -v LIST shows what a list holds)",
                 o->tls_ciphers);
        return -1;
    }
    if (o->tls_ciphersuites && set_suites(ctx, o->tls_ciphersuites) < 0) {
        snprintf(err, errlen,
                 "--tls-ciphersuites '%s': not a list of TLS 1.3 suites OpenSSL knows: write "
                 "e.g. TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256",
                 o->tls_ciphersuites);
        return -1;
    }
    if (o->tls_groups && SSL_CTX_set1_groups_list(ctx, o->tls_groups) != 1) {
        snprintf(err, errlen,
                 "--tls-groups '%s': not a list of groups OpenSSL knows: write e.g. "
                 "X25519:P-256 (colon-separated)",
                 o->tls_groups);
        return -1;
    }
    ERR_clear_error();
    return SSL_CTX_set_session_id_context(ctx, (const unsigned char *)"lfepolld", 8) ? 0 : -1;
}

/* --tls-verify-client and --tls-client-ca. 0, or -1 with err. */
static int set_verify(SSL_CTX *ctx, const struct opt *o, char *err, size_t errlen)
{
    STACK_OF(X509_NAME) * names;
    FILE *f;

    if (!o->tls_verify_client)
        return 0;
    if (!(f = open_pem("--tls-client-ca", o->tls_client_ca, err, errlen)))
        return -1;
    fclose(f);
    names = SSL_load_client_CA_file(o->tls_client_ca);
    if (!names || !sk_X509_NAME_num(names) ||
        SSL_CTX_load_verify_locations(ctx, o->tls_client_ca, NULL) != 1) {
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        ERR_clear_error();
        snprintf(err, errlen,
                 "--tls-client-ca %s: no PEM certificate in it (the CA certificates that sign "
                 "the clients', '-----BEGIN CERTIFICATE-----' blocks)",
                 o->tls_client_ca);
        return -1;
    }
    SSL_CTX_set_client_CA_list(ctx, names); /* the names a CertificateRequest offers */
    SSL_CTX_set_verify(
        ctx, SSL_VERIFY_PEER | (o->tls_verify_client == 2 ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
        NULL);
    return 0;
}

/* Tickets, the session cache and a session's lifetime. */
static void set_sessions(SSL_CTX *ctx, const struct tls_conf *t)
{
    const struct opt *o = t->o;

    if (t->ring) {
        SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_cb);
    } else {
        SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
        if (!o->tls_session_cache) /* TLS 1.3 would send tickets naming no kept session */
            SSL_CTX_set_num_tickets(ctx, 0);
    }
    SSL_CTX_set_session_cache_mode(ctx, o->tls_session_cache ? SSL_SESS_CACHE_SERVER
                                                             : SSL_SESS_CACHE_OFF);
    SSL_CTX_sess_set_cache_size(ctx, o->tls_session_cache);
    SSL_CTX_set_timeout(ctx, o->tls_session_ms / 1000);
}

/* Certificate i's chain and key, checked. 0, or -1 with err naming the file. */
static int set_cert(SSL_CTX *ctx, struct certs *c, int i, const struct opt *o, char *err,
                    size_t errlen)
{
    const char *cert = o->tls_certs[i], *keyf = o->tls_keys[i];
    EVP_PKEY *key = NULL;
    X509 *leaf = NULL;
    int rc = -1;

    if (!(leaf = read_leaf(cert, err, errlen)) || !(key = read_key(keyf, err, errlen)))
        goto out;
    if (X509_check_private_key(leaf, key) != 1) {
        ERR_clear_error();
        snprintf(err, errlen,
                 "--tls-key %s: does not match the certificate of --tls-cert %s (a key made for "
                 "another certificate?)",
                 keyf, cert);
        goto out;
    }
    /* the whole chain, read again: read_leaf took the first certificate only */
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        snprintf(err, errlen, "--tls-cert %s: its chain does not load: %s", cert, ssl_why());
        goto out;
    }
    if (SSL_CTX_use_PrivateKey(ctx, key) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errlen, "--tls-key %s: OpenSSL refuses it: %s", keyf, ssl_why());
        goto out;
    }
    if (cert_names(c, i, leaf) < 0) {
        snprintf(err, errlen, "TLS: out of memory");
        goto out;
    }
    rc = 0;
out:
    EVP_PKEY_free(key);
    X509_free(leaf);
    return rc;
}

/* The context of certificate i, into c->ctx[i]. 0, or -1 with err. */
static int ctx_new(const struct tls_conf *t, struct certs *c, int i, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());

    if (!ctx) {
        snprintf(err, errlen, "TLS: cannot make an OpenSSL context: %s", ssl_why());
        return -1;
    }
    c->ctx[i] = ctx;
    c->n = i + 1;
    if (set_protocol(ctx, t->o, err, errlen) < 0 || set_verify(ctx, t->o, err, errlen) < 0 ||
        set_cert(ctx, c, i, t->o, err, errlen) < 0)
        return -1;
    set_sessions(ctx, t);
    if (c->alpn_len)
        SSL_CTX_set_alpn_select_cb(ctx, alpn_cb, c);
    if (!SSL_CTX_set_ex_data(ctx, ex_conf, (void *)t)) {
        snprintf(err, errlen, "TLS: out of memory");
        return -1;
    }
    return 0;
}

/* Every certificate's context; returns the default one, which owns the rest, or NULL with err. */
static SSL_CTX *build(const struct tls_conf *t, char *err, size_t errlen)
{
    struct certs *c = calloc(1, sizeof(*c));
    SSL_CTX *def;

    if (!c) {
        snprintf(err, errlen, "TLS: out of memory");
        return NULL;
    }
    if (t->o->tls_alpn && alpn_parse(c, t->o->tls_alpn, err, errlen) < 0)
        goto out_free;
    for (int i = 0; i < t->o->ntls_certs; i++)
        if (ctx_new(t, c, i, err, errlen) < 0)
            goto out_free;
    def = c->ctx[0];
    if (!SSL_CTX_set_ex_data(def, ex_certs, c)) {
        snprintf(err, errlen, "TLS: out of memory");
        goto out_free;
    }
    SSL_CTX_set_tlsext_servername_callback(def, servername_cb);
    SSL_CTX_set_tlsext_servername_arg(def, c);
    return def;

out_free:
    def = c->ctx[0];
    certs_free(c); /* the others */
    SSL_CTX_free(def);
    return NULL;
}

/* --- the configuration --- */

/* The ring at start: epoch 0, and no key before it (a random one nobody sealed with). */
static struct ring *ring_new(const struct opt *o)
{
    struct ring *r = calloc(1, sizeof(*r));

    if (!r || RAND_bytes((unsigned char *)r->k, sizeof(r->k)) != 1) {
        free(r);
        return NULL;
    }
    r->t0_ms = mono_ms();
    r->period_ms = o->tls_ticket_rotate_ms;
    return r;
}

#ifdef LFE_JEMALLOC
/* glibc's own entry points, beside the malloc jemalloc replaces. */
extern void *__libc_malloc(size_t n);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static void *ossl_malloc(size_t n, const char *file, int line)
{
    (void)file, (void)line;
    return __libc_malloc(n);
}

static void *ossl_realloc(void *p, size_t n, const char *file, int line)
{
    (void)file, (void)line;
    return __libc_realloc(p, n);
}

static void ossl_free(void *p, const char *file, int line)
{
    (void)file, (void)line;
    __libc_free(p);
}
#endif

/* An idle TLS connection is OpenSSL's state alone, about 150 objects; jemalloc's size classes
 * (four a power of two) round them up, glibc's 16-byte steps hardly do: 14,418 bytes a
 * connection with glibc against 15,430 with jemalloc, at 8,000 idle connections (ECDSA P-256,
 * TLS 1.3; 0.93x). The price is in the handshake's ~2,000 allocations: 1.02-1.03x the server
 * CPU of a resumed one, the same for long connections (tests/bench/ab.sh TLS=1, 2026-12-03).
 * OpenSSL frees only what it allocated, so the two allocators never meet. */
void tls_alloc_init(void)
{
#ifdef LFE_JEMALLOC
    CRYPTO_set_mem_functions(ossl_malloc, ossl_realloc, ossl_free); /* 0 once it allocated */
#endif
}

struct tls_conf *tls_conf_new(const struct opt *o, char *err, size_t errlen)
{
    struct tls_conf *t = calloc(1, sizeof(*t));

    if (ex_certs < 0) {
        ex_certs = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, free_certs);
        ex_conf = SSL_CTX_get_ex_new_index(0, NULL, NULL, NULL, NULL);
    }
    if (!t || ex_certs < 0 || ex_conf < 0 || !(t->live = calloc(1, sizeof(*t->live))) ||
        !(t->aes = EVP_CIPHER_fetch(NULL, "AES-256-CBC", NULL)) ||
        (!o->tls_tickets_off && !(t->ring = ring_new(o)))) {
        snprintf(err, errlen, "TLS: out of memory (or no AES-256-CBC, no randomness): %s",
                 ssl_why());
        goto out_free;
    }
    t->o = o;
    pthread_mutex_init(&t->live->mu, NULL);
    if (!(t->live->cur = build(t, err, errlen)))
        goto out_free;
    return t;

out_free:
    tls_conf_free(t);
    return NULL;
}

int tls_conf_reload(const struct tls_conf *t, char *err, size_t errlen)
{
    SSL_CTX *ctx = build(t, err, errlen), *old;

    if (!ctx)
        return -1;
    pthread_mutex_lock(&t->live->mu);
    old = t->live->cur;
    t->live->cur = ctx;
    __atomic_store_n(&t->live->gen, t->live->gen + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&t->live->mu);
    SSL_CTX_free(old); /* ours: the threads and connections holding it keep theirs */
    return 0;
}

/* tls_conf_ctx's slow path: this thread's reference moves to the current context. */
static SSL_CTX *take_current(struct live *lv, struct slot **mine)
{
    SSL_CTX *old;

    pthread_mutex_lock(&lv->mu);
    if (!*mine) {
        if (!(*mine = calloc(1, sizeof(**mine)))) {
            pthread_mutex_unlock(&lv->mu);
            return NULL;
        }
        (*mine)->next = lv->slots;
        lv->slots = *mine;
    }
    old = (*mine)->ctx;
    SSL_CTX_up_ref(lv->cur);
    (*mine)->ctx = lv->cur;
    (*mine)->gen = lv->gen;
    pthread_mutex_unlock(&lv->mu);
    SSL_CTX_free(old);
    return (*mine)->ctx;
}

SSL_CTX *tls_conf_ctx(const struct tls_conf *t)
{
    static __thread struct slot *mine; /* this thread's reference */
    long gen = __atomic_load_n(&t->live->gen, __ATOMIC_ACQUIRE);

    if (mine && mine->gen == gen && mine->ctx)
        return mine->ctx;
    return take_current(t->live, &mine);
}

void tls_conf_free(struct tls_conf *t)
{
    if (!t)
        return;
    if (t->live) {
        for (struct slot *s = t->live->slots, *next; s; s = next) {
            next = s->next;
            SSL_CTX_free(s->ctx);
            free(s);
        }
        SSL_CTX_free(t->live->cur);
        pthread_mutex_destroy(&t->live->mu);
        free(t->live);
    }
    if (t->ring)
        OPENSSL_cleanse(t->ring, sizeof(*t->ring));
    free(t->ring);
    EVP_CIPHER_free(t->aes);
    free(t);
}
