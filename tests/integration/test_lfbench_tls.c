/* lfbench --tls (issue 35) against real TLS servers: nginx (http ssl, and stream ssl in front of
 * lfepolld's echo), HAProxy (bind ... ssl crt, in front of the same echo) and openssl s_server,
 * with certificates made at test time by the openssl CLI (a CA, an ECDSA P-256 server
 * certificate for localhost and 127.0.0.1, an expired one, a client certificate, another CA).
 * The servers' own view is the check where they have one: nginx's access log says which
 * handshakes it resumed ($ssl_session_reused), the protocol ($ssl_protocol) and the client
 * certificate ($ssl_client_s_dn). Every failure the summary promises to name is made to
 * happen: an unknown CA, a name mismatch, an expired certificate, a client certificate
 * missing, a plain-text server, a server that stalls in the handshake. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <cmocka.h>

#include "lfb_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define NGINX "/usr/sbin/nginx"
#define HAPROXY "/usr/sbin/haproxy"
#define OPENSSL "/usr/bin/openssl"
#define STREAM_MOD "/usr/lib/nginx/modules/ngx_stream_module.so"

static char dir[] = "/tmp/lfe-tls-XXXXXX"; /* certificates, configurations, logs */
static bool made;                          /* the certificates and servers are up */
static pid_t echo_pid, nginx_pid, haproxy_pid;
/* lfepolld's echo; nginx: stream ssl (echo), https (TLS 1.2 and 1.3), https with a client
 * certificate required, https with the expired certificate, plain http; HAProxy: ssl (echo),
 * ssl with a client certificate required */
static int echo_port, ng_stream, ng_https, ng_mtls, ng_expired, ng_plain, hp_echo, hp_mtls;

static const char *path_of(const char *name)
{
    static char bufs[8][512];
    static int k;
    char *b = bufs[k++ % 8];

    snprintf(b, sizeof(bufs[0]), "%s/%s", dir, name);
    return b;
}

/* sh -c cmd in dir; fails the test when it fails. */
static void sh(const char *cmd)
{
    char full[2048];

    snprintf(full, sizeof(full), "cd %s && (%s) >>%s/openssl.log 2>&1", dir, cmd, dir);
    if (system(full) != 0)
        fail_msg("failed: %s (see %s/openssl.log)", cmd, dir);
}

/* The certificates: ECDSA P-256 throughout (fast to make); the expired one signed by `openssl
 * ca`, which takes dates in the past. */
static void make_certs(void)
{
    static const char cnf[] = "[ca]\ndefault_ca = d\n[d]\ndatabase = index.txt\n"
                              "unique_subject = no\n"
                              "new_certs_dir = .\nserial = serial\ndefault_md = sha256\n"
                              "policy = p\nx509_extensions = e\n[p]\ncommonName = supplied\n"
                              "[e]\nsubjectAltName = DNS:localhost,IP:127.0.0.1\n"
                              "basicConstraints = CA:FALSE\n";
    FILE *f = fopen(path_of("ca.cnf"), "w");

    assert_non_null(f);
    fputs(cnf, f);
    fclose(f);
    sh(OPENSSL " ecparam -name prime256v1 -genkey -noout -out ca.key && " OPENSSL
               " req -x509 -new -key ca.key -subj /CN=lfbench-test-CA -days 2 -out ca.pem");
    sh(OPENSSL " ecparam -name prime256v1 -genkey -noout -out other.key && " OPENSSL
               " req -x509 -new -key other.key -subj /CN=other-CA -days 2 -out other.pem");
    sh(": > index.txt && echo 1000 > serial");
    sh(OPENSSL " ecparam -name prime256v1 -genkey -noout -out server.key && " OPENSSL
               " req -new -key server.key -subj /CN=localhost -out server.csr && " OPENSSL
               " ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in server.csr -days 2 "
               "-out server.pem && cat server.pem server.key > server.both");
    sh(OPENSSL " ecparam -name prime256v1 -genkey -noout -out expired.key && " OPENSSL
               " req -new -key expired.key -subj /CN=localhost -out expired.csr && " OPENSSL
               " ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr "
               "-startdate 20200101000000Z -enddate 20200102000000Z -out expired.pem");
    sh(OPENSSL " ecparam -name prime256v1 -genkey -noout -out client.key && " OPENSSL
               " req -new -key client.key -subj /CN=lfbench-client -out client.csr && " OPENSSL
               " ca -batch -config ca.cnf -cert ca.pem -keyfile ca.key -in client.csr -days 2 "
               "-out client.pem");
}

static void write_conf(const char *name, const char *text)
{
    FILE *f = fopen(path_of(name), "w");

    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void start_nginx(void)
{
    static char conf[6144];
    char ssl[512];

    snprintf(ssl, sizeof(ssl),
             "ssl_certificate %s/server.pem; ssl_certificate_key %s/server.key; "
             "ssl_protocols TLSv1.2 TLSv1.3; ssl_session_cache shared:S%%d:1m;",
             dir, dir);
    ng_stream = lfb_free_port();
    ng_https = lfb_free_port();
    ng_mtls = lfb_free_port();
    ng_expired = lfb_free_port();
    ng_plain = lfb_free_port();
    snprintf(conf, sizeof(conf),
             "daemon off;\nmaster_process off;\nworker_processes 1;\npid %s/nginx.pid;\n"
             "load_module " STREAM_MOD ";\nerror_log %s/error.log;\n"
             "events { worker_connections 512; }\n"
             "stream {\n  log_format s '$ssl_protocol $ssl_session_reused';\n"
             "  access_log %s/stream.log s;\n"
             "  server { listen 127.0.0.1:%d ssl; ssl_certificate %s/server.pem; "
             "ssl_certificate_key %s/server.key; ssl_protocols TLSv1.2 TLSv1.3; "
             "proxy_pass 127.0.0.1:%d; }\n}\n"
             "http {\n  log_format h '$ssl_protocol $ssl_session_reused \"$ssl_client_s_dn\" "
             "sni=$ssl_server_name alpn=$ssl_alpn_protocol';\n"
             "  access_log %s/access.log h;\n  default_type text/plain;\n"
             "  client_body_temp_path %s/body;\n  proxy_temp_path %s/proxy;\n"
             "  fastcgi_temp_path %s/fastcgi;\n  uwsgi_temp_path %s/uwsgi;\n"
             "  scgi_temp_path %s/scgi;\n"
             "  ssl_certificate %s/server.pem;\n  ssl_certificate_key %s/server.key;\n"
             "  ssl_protocols TLSv1.2 TLSv1.3;\n  ssl_session_cache shared:H:1m;\n"
             "  server { listen 127.0.0.1:%d ssl; location / { return 200 "
             "\"0123456789012345678901234567890123456789012345678901234567890123\"; } }\n"
             "  server { listen 127.0.0.1:%d ssl; ssl_client_certificate %s/ca.pem; "
             "ssl_verify_client on; location / { return 200 \"hello\"; } }\n"
             "  server { listen 127.0.0.1:%d ssl; ssl_certificate %s/expired.pem; "
             "ssl_certificate_key %s/expired.key; location / { return 200 \"old\"; } }\n"
             "  server { listen 127.0.0.1:%d; location / { return 200 \"plain\"; } }\n}\n",
             dir, dir, dir, ng_stream, dir, dir, echo_port, dir, dir, dir, dir, dir, dir, dir, dir,
             ng_https, ng_mtls, dir, ng_expired, dir, dir, ng_plain);
    write_conf("nginx.conf", conf);
    nginx_pid = lfb_start_server(
        (const char *[]){NGINX, "-p", dir, "-c", path_of("nginx.conf"), "-e", "stderr", NULL},
        &ng_https, lfb.slow);
}

static void start_haproxy(void)
{
    static char conf[2048];

    hp_echo = lfb_free_port();
    hp_mtls = lfb_free_port();
    snprintf(conf, sizeof(conf),
             "global\n  maxconn 512\ndefaults\n  mode tcp\n  timeout connect 5s\n"
             "  timeout client 10s\n  timeout server 10s\n"
             "frontend echo\n  bind 127.0.0.1:%d ssl crt %s/server.both\n  default_backend b\n"
             "frontend mtls\n  bind 127.0.0.1:%d ssl crt %s/server.both ca-file %s/ca.pem "
             "verify required\n  default_backend b\n"
             "backend b\n  server s 127.0.0.1:%d\n",
             hp_echo, dir, hp_mtls, dir, dir, echo_port);
    write_conf("haproxy.cfg", conf);
    haproxy_pid =
        lfb_start_server((const char *[]){HAPROXY, "-db", "-q", "-f", path_of("haproxy.cfg"), NULL},
                         &hp_echo, lfb.slow);
}

/* Once per suite: the certificates, lfepolld's echo, nginx and HAProxy. Skipped (not in CI)
 * where a part is missing. */
static void servers(void)
{
    const char *need[] = {NGINX, HAPROXY, OPENSSL, STREAM_MOD};

    if (made)
        return;
    for (size_t k = 0; k < sizeof(need) / sizeof(need[0]); k++)
        if (access(need[k], R_OK) != 0) {
            if (getenv("CI"))
                fail_msg("%s is missing (make deps installs it)", need[k]);
            skip();
        }
    make_certs();
    echo_port = 0;
    echo_pid = lfb_start_server(
        (const char *[]){lfb.lfepolld, "--listen", "127.0.0.1:PORT", "--groups", "1", NULL},
        &echo_port, lfb.slow);
    start_nginx();
    start_haproxy();
    made = true;
}

/* lfbench with these arguments (NULL-terminated), its output into lfb.out; its exit status. */
static int bench(const char *first, ...)
{
    const char *args[48] = {lfb.lfbench};
    int n = 1;
    va_list ap;

    va_start(ap, first);
    for (const char *a = first; a && n < 47; a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return lfb_run(args, lfb.out, sizeof(lfb.out), 30 * (unsigned)lfb.slow);
}

static const char *target(const char *host, int port)
{
    static char bufs[4][96];
    static int k;
    char *b = bufs[k++ % 4];

    snprintf(b, sizeof(bufs[0]), "%s:%d", host, port);
    return b;
}

static const char *url(int port, const char *host)
{
    static char bufs[4][96];
    static int k;
    char *b = bufs[k++ % 4];

    snprintf(b, sizeof(bufs[0]), "https://%s:%d/", host, port);
    return b;
}

/* The summary's "handshakes N: F full, R resumed" into *f and *r; false when absent. */
static bool handshakes(long *f, long *r)
{
    const char *p = strstr(lfb.out, "; handshakes ");
    long n;

    return p && sscanf(p, "; handshakes %ld: %ld full, %ld resumed", &n, f, r) == 3 && n == *f + *r;
}

static void expect_clean(int rc, long requests)
{
    if (rc != 0 || lfb_field("requests") != requests || lfb_field("errors") != 0)
        fail_msg("want %ld requests, no error (rc %d):\n%s", requests, rc, lfb.out);
}

/* How many lines of the log hold word, and how many lines it has; the log is emptied. */
static int log_count(const char *log, const char *word, int *lines)
{
    char line[512];
    int n = 0;
    FILE *f = fopen(path_of(log), "r");

    *lines = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f)) {
        ++*lines;
        n += strstr(line, word) != NULL;
    }
    fclose(f);
    truncate(path_of(log), 0);
    return n;
}

static void empty_log(const char *log)
{
    truncate(path_of(log), 0);
}

/* Echo over TLS, every framing and loop: nginx's stream module and HAProxy, each in front of
 * lfepolld's echo, verified against the test's CA by name (localhost) and by address. */
static void test_tls_echo(void **state)
{
    long f, r;

    (void)state;
    servers();
    expect_clean(bench("-q", "--tls", "--tls-ca", path_of("ca.pem"), "-t", "2", "-c", "4", "-n",
                       "400", target("localhost", ng_stream), NULL),
                 400);
    if (!handshakes(&f, &r) || f != 4 || r != 0 || !strstr(lfb.out, "tls          TLSv1.3 "))
        fail_msg("want 4 full TLS 1.3 handshakes:\n%s", lfb.out);
    /* an address: no SNI, the certificate's IP address checked */
    expect_clean(bench("-q", "--tls", "--tls-ca", path_of("ca.pem"), "-c", "2", "-n", "100",
                       target("127.0.0.1", ng_stream), NULL),
                 100);
    /* pipelined, and requests bigger than a TLS record (16 KiB): several records each */
    expect_clean(bench("-q", "--tls", "--tls-ca", path_of("ca.pem"), "-c", "2", "--pipeline", "8",
                       "--size", "40000", "-n", "200", target("localhost", hp_echo), NULL),
                 200);
    /* line and len32 framings, the open loop, TLS 1.2 through HAProxy */
    expect_clean(bench("-q", "--tls", "--tls-ca", path_of("ca.pem"), "--tls-version", "1.2",
                       "--expect", "line", "-c", "2", "-n", "100", target("localhost", hp_echo),
                       NULL),
                 100);
    if (!strstr(lfb.out, "tls          TLSv1.2 "))
        fail_msg("want TLS 1.2:\n%s", lfb.out);
    expect_clean(bench("-q", "--tls", "--tls-ca", path_of("ca.pem"), "-R", "400", "-d", "0.5", "-c",
                       "4", target("localhost", ng_stream), NULL),
                 200);
    /* short connections: a handshake each */
    expect_clean(bench("-q", "--tls", "--tls-ca", path_of("ca.pem"), "--mode", "short", "-c", "2",
                       "-n", "30", target("localhost", hp_echo), NULL),
                 30);
    if (!handshakes(&f, &r) || f != 30 || r != 0)
        fail_msg("want 30 full handshakes:\n%s", lfb.out);
}

/* HTTPS against nginx: the URL's host as SNI, --tls-version as nginx's $ssl_protocol says, the
 * --json "tls" object, and merge summing it. */
static void test_tls_https_nginx(void **state)
{
    char ja[300], jb[300], jm[300];
    const char *j;
    int lines;

    (void)state;
    servers();
    empty_log("access.log");
    expect_clean(bench("-q", "--tls-ca", path_of("ca.pem"), "--tls-version", "1.3", "-c", "2", "-n",
                       "100", url(ng_https, "localhost"), NULL),
                 100);
    if (log_count("access.log", "TLSv1.3 ", &lines) != 100 || lines != 100)
        fail_msg("nginx logged %d requests, not all TLSv1.3:\n%s", lines, lfb.out);
    /* the SNI: the URL's host name, and none for an address (nginx logs "-") */
    expect_clean(bench("-q", "--tls-ca", path_of("ca.pem"), "-c", "1", "-n", "5",
                       url(ng_https, "localhost"), NULL),
                 5);
    if (log_count("access.log", "sni=localhost alpn=http/1.1", &lines) != 5 || lines != 5)
        fail_msg("nginx did not see SNI localhost and ALPN http/1.1 on 5 requests (%d lines)",
                 lines);
    expect_clean(bench("-q", "--tls-ca", path_of("ca.pem"), "-c", "1", "-n", "5",
                       url(ng_https, "127.0.0.1"), NULL),
                 5);
    if (log_count("access.log", "sni=-", &lines) != 5 || lines != 5)
        fail_msg("nginx saw an SNI for an address target (%d lines)", lines);
    /* --tls-alpn: what is offered */
    expect_clean(bench("-q", "--tls-ca", path_of("ca.pem"), "--tls-alpn", "x-none,http/1.1", "-c",
                       "1", "-n", "3", url(ng_https, "localhost"), NULL),
                 3);
    if (log_count("access.log", "alpn=http/1.1", &lines) != 3 || lines != 3)
        fail_msg("nginx did not pick http/1.1 from --tls-alpn's list (%d lines)", lines);
    /* a wrk script makes the requests, over TLS the same */
    expect_clean(bench("-q", "--tls-ca", path_of("ca.pem"), "--script", "lua/bench/wrk/counter.lua",
                       "-c", "2", "-n", "40", url(ng_https, "localhost"), NULL),
                 40);
    empty_log("access.log");
    snprintf(ja, sizeof(ja), "%s/a.json", dir);
    snprintf(jb, sizeof(jb), "%s/b.json", dir);
    snprintf(jm, sizeof(jm), "%s/m.json", dir);
    expect_clean(bench("-q", "--tls-ca", path_of("ca.pem"), "--tls-version", "1.2", "--mode",
                       "short", "-c", "1", "-n", "20", "--json", ja, url(ng_https, "localhost"),
                       NULL),
                 20);
    if (log_count("access.log", "TLSv1.2 ", &lines) != 20 || lines != 20)
        fail_msg("nginx logged %d requests, not all TLSv1.2:\n%s", lines, lfb.out);
    expect_clean(bench("-q", "--tls-ca", path_of("ca.pem"), "--mode", "short", "-c", "1", "-n",
                       "10", "--json", jb, url(ng_https, "localhost"), NULL),
                 10);
    if (bench("merge", "--allow-disjoint", "--json", jm, ja, jb, NULL) != 0)
        fail_msg("merge:\n%s", lfb.out);
    if (!strstr(lfb.out, "handshakes 30: 30 full, 0 resumed"))
        fail_msg("merge did not sum the handshakes:\n%s", lfb.out);
    j = lfb_slurp(jm);
    if (!lfb_json_valid(j, strlen(j)) || lfb_jnum(j, "handshakes_full") != 30 ||
        lfb_jnum(j, "handshakes_resumed") != 0 || !strstr(j, "\"protocol\": \"TLSv1.2\""))
        fail_msg("merged --json lacks the tls object:\n%.2000s", j);
    unlink(ja);
    unlink(jb);
}

/* --tls-resume: 0 resumes none, 1 all but the first, 0.5 half, each as nginx's
 * $ssl_session_reused counts them; a server that refuses resumption is said to. */
static void test_tls_resume(void **state)
{
    static const struct {
        const char *share, *version;
        long resumed;
    } runs[] = {{"0", "1.3", 0}, {"1", "1.3", 19}, {"0.5", "1.3", 10}, {"1", "1.2", 19}};
    long f, r;
    int lines;

    (void)state;
    servers();
    for (size_t k = 0; k < sizeof(runs) / sizeof(runs[0]); k++) {
        empty_log("access.log");
        expect_clean(bench("-q", "--tls-ca", path_of("ca.pem"), "--tls-version", runs[k].version,
                           "--mode", "short", "-c", "1", "-n", "20", "--tls-resume", runs[k].share,
                           url(ng_https, "localhost"), NULL),
                     20);
        if (!handshakes(&f, &r) || r != runs[k].resumed || f != 20 - runs[k].resumed)
            fail_msg("--tls-resume %s (TLS %s): want %ld resumed:\n%s", runs[k].share,
                     runs[k].version, runs[k].resumed, lfb.out);
        if (log_count("access.log", " r ", &lines) != runs[k].resumed || lines != 20)
            fail_msg("--tls-resume %s: nginx did not log %ld resumed of 20 (%d lines)",
                     runs[k].share, runs[k].resumed, lines);
    }
    /* long mode with --reconnect-every: every reconnect offers the session */
    expect_clean(bench("-q", "--tls", "--tls-ca", path_of("ca.pem"), "-c", "1", "-n", "50",
                       "--reconnect-every", "10", "--tls-resume", "1",
                       target("localhost", ng_stream), NULL),
                 50);
    if (!handshakes(&f, &r) || f != 1 || r < 4)
        fail_msg("--reconnect-every with --tls-resume 1: want 1 full, the rest resumed:\n%s",
                 lfb.out);
}

/* A server that takes no session back (s_server with stateful tickets and no cache): offered,
 * never resumed, and the summary says the server refuses resumption. */
static void test_tls_resume_refused(void **state)
{
    int port = lfb_free_port();
    char acc[32];
    pid_t pid;
    long f, r;

    (void)state;
    servers();
    snprintf(acc, sizeof(acc), "127.0.0.1:%d", port);
    pid = lfb_start_server((const char *[]){OPENSSL, "s_server", "-accept", acc, "-cert",
                                            path_of("server.pem"), "-key", path_of("server.key"),
                                            "-tls1_3", "-no_ticket", "-no_cache", "-www", "-quiet",
                                            NULL},
                           &port, lfb.slow);
    expect_clean(bench("-q", "--tls-ca", path_of("ca.pem"), "--mode", "short", "-c", "1", "-n", "6",
                       "--tls-resume", "1", url(port, "localhost"), NULL),
                 6);
    lfb_stop_server(&pid);
    if (!handshakes(&f, &r) || f != 6 || r != 0 ||
        !strstr(lfb.out, "of 5 offering a session 0.0% resumed (the server refuses resumption"))
        fail_msg("want resumption refused said:\n%s", lfb.out);
}

/* Verification: each failure an error of its kind with its reason; --tls-insecure passes and
 * says so. */
static void test_tls_verify_fails(void **state)
{
    static const struct {
        const char *ca, *sni, *host;
        int *port;
        const char *why;
    } bad[] = {
        {NULL, NULL, "localhost", &ng_https, "unable to get local issuer certificate"},
        {"other.pem", NULL, "localhost", &ng_https, "unable to get local issuer certificate"},
        {"ca.pem", "wrong.example", "localhost", &ng_https, "hostname mismatch"},
        {"ca.pem", NULL, "localhost", &ng_expired, "certificate has expired"},
    };

    (void)state;
    servers();
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        const char *args[16] = {lfb.lfbench, "-q", "--mode", "short", "-n", "1"};
        int n = 6;

        if (bad[k].ca) {
            args[n++] = "--tls-ca";
            args[n++] = path_of(bad[k].ca);
        }
        if (bad[k].sni) {
            args[n++] = "--tls-sni";
            args[n++] = bad[k].sni;
        }
        args[n++] = url(*bad[k].port, bad[k].host);
        args[n] = NULL;
        if (lfb_run(args, lfb.out, sizeof(lfb.out), 30 * (unsigned)lfb.slow) != 1 ||
            lfb_field("tls_verify") != 1 || lfb_field("requests") != 0 ||
            !strstr(lfb.out, "tls error    the first: the server's certificate did not verify: ") ||
            !strstr(lfb.out, bad[k].why))
            fail_msg("case %zu: want tls_verify 1 and '%s':\n%s", k, bad[k].why, lfb.out);
    }
    /* off: the wrong CA passes, and the summary says verification was off */
    expect_clean(bench("-q", "--tls-insecure", "--mode", "short", "-n", "3",
                       url(ng_expired, "localhost"), NULL),
                 3);
    if (!strstr(lfb.out, "; verification off (--tls-insecure)"))
        fail_msg("--tls-insecure not said:\n%s", lfb.out);
}

/* Client certificates: nginx (ssl_verify_client on) sees the certificate's subject; without
 * one, nginx answers 400 and HAProxy (verify required) refuses the handshake with an alert,
 * named. Bad files are refused at start, each in one line naming it. */
static void test_tls_client_cert(void **state)
{
    int lines;

    (void)state;
    servers();
    empty_log("access.log");
    expect_clean(bench("-q", "--tls-ca", path_of("ca.pem"), "--tls-cert", path_of("client.pem"),
                       "--tls-key", path_of("client.key"), "-c", "1", "-n", "5",
                       url(ng_mtls, "localhost"), NULL),
                 5);
    if (log_count("access.log", "CN=lfbench-client", &lines) != 5)
        fail_msg("nginx did not see the client certificate on 5 requests (%d lines)", lines);
    assert_int_equal(bench("-q", "--tls-ca", path_of("ca.pem"), "-c", "1", "-n", "1",
                           url(ng_mtls, "localhost"), NULL),
                     0);
    if (lfb_field("http") != 1) /* "http  1 responses with a status other than 2xx" */
        fail_msg("want nginx's 400 without a certificate:\n%s", lfb.out);
    /* HAProxy: the handshake itself fails, with the alert's name */
    expect_clean(bench("-q", "--tls", "--tls-ca", path_of("ca.pem"), "--tls-cert",
                       path_of("client.pem"), "--tls-key", path_of("client.key"), "-c", "1", "-n",
                       "10", target("localhost", hp_mtls), NULL),
                 10);
    if (bench("-q", "--tls", "--tls-ca", path_of("ca.pem"), "--mode", "short", "-n", "1",
              target("localhost", hp_mtls), NULL) != 1 ||
        lfb_field("tls_alert") != 1 || !strstr(lfb.out, "with the alert \""))
        fail_msg("want the alert named without a client certificate:\n%s", lfb.out);
    /* at start, exit 2, one line naming the file */
    if (bench("--tls-cert", path_of("nope.pem"), "--tls-key", path_of("client.key"), "-n", "1",
              url(ng_mtls, "localhost"), NULL) != 2 ||
        !strstr(lfb.out, "nope.pem: cannot use it as a certificate"))
        fail_msg("want a missing --tls-cert named:\n%s", lfb.out);
    if (bench("--tls-cert", path_of("ca.cnf"), "--tls-key", path_of("client.key"), "-n", "1",
              url(ng_mtls, "localhost"), NULL) != 2 ||
        !strstr(lfb.out, "ca.cnf: cannot use it as a certificate ("))
        fail_msg("want a --tls-cert that is no certificate named:\n%s", lfb.out);
    if (bench("--tls-cert", path_of("client.pem"), "--tls-key", path_of("server.key"), "-n", "1",
              url(ng_mtls, "localhost"), NULL) != 2 ||
        !strstr(lfb.out, "server.key is not the key of --tls-cert"))
        fail_msg("want a key that is not the certificate's refused:\n%s", lfb.out);
    if (bench("--tls-ca", path_of("ca.cnf"), "-n", "1", url(ng_https, "localhost"), NULL) != 2 ||
        !strstr(lfb.out, "ca.cnf: cannot read CA certificates from it"))
        fail_msg("want a --tls-ca that holds no certificate refused:\n%s", lfb.out);
    if (bench("--tls-ciphersuites", "TLS_NOPE", "-n", "1", url(ng_https, "localhost"), NULL) != 2 ||
        !strstr(lfb.out, "--tls-ciphersuites 'TLS_NOPE' is not a list"))
        fail_msg("want an unknown suite refused:\n%s", lfb.out);
    if (bench("--tls-version", "1.2", "--tls-ciphers", "NOPE-CIPHER", "-n", "1",
              url(ng_https, "localhost"), NULL) != 2 ||
        !strstr(lfb.out, "--tls-ciphers 'NOPE-CIPHER': no cipher of it is known to OpenSSL"))
        fail_msg("want an unknown cipher list refused:\n%s", lfb.out);
    if (bench("--tls-groups", "P-999", "-n", "1", url(ng_https, "localhost"), NULL) != 2 ||
        !strstr(lfb.out, "--tls-groups 'P-999' is not a list"))
        fail_msg("want an unknown group refused:\n%s", lfb.out);
}

/* Plain-text servers answering a ClientHello: an HTTP server (its bytes are shown), an echo
 * (our ClientHello back). */
static void test_tls_plain_server(void **state)
{
    (void)state;
    servers();
    if (bench("-q", "--tls-insecure", "--mode", "short", "-n", "1", url(ng_plain, "127.0.0.1"),
              NULL) != 1 ||
        lfb_field("tls_not_tls") != 1 ||
        !strstr(lfb.out, "the server did not answer TLS (its first bytes: \"HTTP/"))
        fail_msg("want a plain HTTP server named:\n%s", lfb.out);
    if (bench("-q", "--tls", "--tls-insecure", "--mode", "short", "-n", "1",
              target("127.0.0.1", echo_port), NULL) != 1 ||
        lfb_field("tls_not_tls") != 1 || !strstr(lfb.out, "the server sent our ClientHello back"))
        fail_msg("want a plain echo server named:\n%s", lfb.out);
}

/* A server that takes the connection and never answers the ClientHello (a listener that never
 * accepts: the kernel completes the TCP handshake): the TLS handshake times out within
 * --timeout, counted and said. */
static void test_tls_handshake_timeout(void **state)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    (void)state;
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 16), 0);
    getsockname(fd, (struct sockaddr *)&a, &l);
    if (bench("-q", "--tls", "--tls-insecure", "--mode", "short", "-n", "1", "--timeout", "300ms",
              target("127.0.0.1", ntohs(a.sin_port)), NULL) != 1 ||
        lfb_field("tls_timeout") != 1 ||
        !strstr(lfb.out, "a TLS handshake took longer than --timeout (300 ms)"))
        fail_msg("want the stalled handshake timed out:\n%s", lfb.out);
    /* long mode: the connections never open; each handshake is bounded all the same */
    if (bench("-q", "--tls", "--tls-insecure", "-c", "2", "-d", "0.5", "--timeout", "200ms",
              target("127.0.0.1", ntohs(a.sin_port)), NULL) != 1 ||
        lfb_field("tls_timeout") < 2)
        fail_msg("want long mode's stalled handshakes timed out:\n%s", lfb.out);
    close(fd);
}

/* The connections' phases over TLS (cphase.h): against nginx's HTTPS, short connections with
 * half of them resuming, one connect, one handshake and one first byte timed per connection,
 * the handshake row's full and resumed as nginx's $ssl_session_reused counts them, --json's
 * handshake_latency and handshakes, the handshakes' line with the client's CPU per handshake,
 * --hdr-log's handshake intervals read back by HdrHistogram's Python port; long mode's
 * opening times its connections' handshakes; a plain server answering the ClientHello leaves
 * connects timed and no handshake row. */
static void test_tls_phases(void **state)
{
    char js[300], hl[300], cmd[900], want[96];
    const char *j, *p;
    int lines, rc;

    (void)state;
    servers();
    snprintf(js, sizeof(js), "%s/phases.json", dir);
    snprintf(hl, sizeof(hl), "%s/phases.hlog", dir);
    empty_log("access.log");
    expect_clean(bench("-q", "--tls-ca", path_of("ca.pem"), "--mode", "short", "-c", "1", "-n",
                       "20", "--tls-resume", "0.5", "--json", js, "--hdr-log", hl,
                       url(ng_https, "localhost"), NULL),
                 20);
    if (log_count("access.log", " r ", &lines) != 10 || lines != 20)
        fail_msg("nginx did not log 10 resumed of 20 (%d lines):\n%s", lines, lfb.out);
    if (lfb_field("connections") != 20 || !strstr(lfb.out, "\n  connect      p50 ") ||
        !strstr(lfb.out, "(µs, 20 samples: 10 full, 10 resumed)\n") ||
        !strstr(lfb.out, "\n  first byte   p50 ") || !strstr(lfb.out, "\nhandshakes   20: ") ||
        !strstr(lfb.out, " µs per handshake (of the run's 20)\n"))
        fail_msg("want 20 connects, handshakes (10 resumed) and first bytes timed:\n%s", lfb.out);
    /* the log's handshake intervals against --json's, by HdrHistogram's reader (77: no hdrh) */
    snprintf(cmd, sizeof(cmd),
             "python3 tests/integration/hdr_interop.py %s %s handshake_latency handshake "
             ">%s/hdr.out 2>&1",
             hl, js, dir);
    rc = system(cmd);
    rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
    if (rc != 0 && !(rc == 77 && !getenv("CI")))
        fail_msg("hdr_interop.py handshake exited %d: %s", rc, lfb_slurp(path_of("hdr.out")));
    j = lfb_slurp(js);
    assert_true(lfb_json_valid(j, strlen(j)));
    assert_int_equal(lfb_jnum(strstr(j, "\n  \"connect_latency\": {"), "samples"), 20);
    assert_int_equal(lfb_jnum(strstr(j, "\n  \"handshake_latency\": {"), "samples"), 20);
    assert_int_equal(lfb_jnum(strstr(j, "\n  \"first_byte_latency\": {"), "samples"), 20);
    assert_true(lfb_jnum(strstr(j, "\n  \"handshake_latency\": {"), "p50_us") > 0);
    p = strstr(j, "\n  \"handshakes\": {");
    assert_non_null(p);
    if (lfb_jnum(p, "full") != 10 || lfb_jnum(p, "resumed") != 10 || !(lfb_jnum(p, "per_s") > 0) ||
        !(lfb_jnum(p, "client_cpu_us") > 0))
        fail_msg("--json's handshakes:\n%.300s", p);
    /* long mode: the opening's 4 connections, each handshake timed */
    expect_clean(bench("-q", "--tls", "--tls-ca", path_of("ca.pem"), "-c", "4", "-n", "200",
                       target("localhost", ng_stream), NULL),
                 200);
    snprintf(want, sizeof(want), "(µs, 4 samples: 4 full, 0 resumed)\n");
    if (!strstr(lfb.out, "\n  handshake    p50 ") || !strstr(lfb.out, want) ||
        strstr(lfb.out, "\nhandshakes "))
        fail_msg("want the opening's 4 handshakes timed:\n%s", lfb.out);
    /* no TLS from the server: the connects are timed, no handshake finished */
    if (bench("-q", "--tls-insecure", "--mode", "short", "-n", "3", "--json", js,
              url(ng_plain, "127.0.0.1"), NULL) != 1 ||
        !strstr(lfb.out, "\n  connect      p50 ") || strstr(lfb.out, "  handshake  ") ||
        strstr(lfb.out, "\n  first byte ") || strstr(lfb.out, "\nhandshakes "))
        fail_msg("want connects timed, no handshake:\n%s", lfb.out);
    j = lfb_slurp(js);
    assert_int_equal(lfb_jnum(strstr(j, "\n  \"handshake_latency\": {"), "samples"), 0);
    assert_true(lfb_jnum(strstr(j, "\n  \"handshake_latency\": {"), "max_us") == 0);
}

/* Waits (10 s at most) until the file fd holds word; fails the test when it never does. */
static void wait_for(int fd, const char *word, const char *who)
{
    static char seen[4096];

    for (int k = 0; k < 500 * lfb.slow; k++) {
        lfb_read_back(fd, seen, sizeof(seen));
        if (strstr(seen, word))
            return;
        lfb_sleep_ms(20);
    }
    fail_msg("%s never printed %s: %s", who, word, seen);
}

/* s_server answering lfbench's one short HTTP request with text, then closing without a
 * close_notify: its stdin, a FIFO, ends (s_server then shuts the connection down quietly). The
 * answer goes once s_server has printed the request (it has read it: a close with it unread
 * would be a reset), and no probe of the port comes first (it would be the connection s_server
 * answers). Returns lfbench's exit status, its output in lfb.out. */
static int cut_server(const char *text)
{
    int port = lfb_free_port(), rc, w;
    int so = open(path_of("s_server.out"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int bo = open(path_of("bench.out"), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    char cmd[1024], target_url[64];
    pid_t srv, cli;

    assert_true(so >= 0 && bo >= 0);
    unlink(path_of("answer"));
    assert_int_equal(mkfifo(path_of("answer"), 0600), 0);
    snprintf(cmd, sizeof(cmd),
             "exec " OPENSSL " s_server -accept 127.0.0.1:%d -cert %s -key %s -naccept 1 <%s", port,
             path_of("server.pem"), path_of("server.key"), path_of("answer"));
    srv = lfb_spawn((const char *[]){"/bin/sh", "-c", cmd, NULL}, so, so, 30 * (unsigned)lfb.slow);
    /* meets s_server's shell opening it; close-on-exec: lfbench must not hold it open */
    w = open(path_of("answer"), O_WRONLY | O_CLOEXEC);
    assert_true(w >= 0);
    wait_for(so, "ACCEPT", "s_server");
    snprintf(target_url, sizeof(target_url), "https://localhost:%d/", port);
    cli = lfb_spawn((const char *[]){lfb.lfbench, "-q", "--tls-ca", path_of("ca.pem"), "--mode",
                                     "short", "-n", "1", target_url, NULL},
                    bo, bo, 30 * (unsigned)lfb.slow);
    wait_for(so, "GET / HTTP/1.1", "s_server");
    assert_int_equal(write(w, text, strlen(text)), (ssize_t)strlen(text));
    close(w);
    rc = lfb_wait(cli);
    lfb_read_back(bo, lfb.out, sizeof(lfb.out));
    kill(srv, SIGKILL);
    lfb_wait(srv);
    close(so);
    close(bo);
    return rc;
}

/* The end of the stream without close_notify: the error tls_truncated where it could have cut a
 * response (a body read until the close), nothing where the response's end is known. */
static void test_tls_truncated(void **state)
{
    (void)state;
    servers();
    if (cut_server("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello, cut here") != 1 ||
        lfb_field("tls_truncated") != 1 || lfb_field("requests") != 0 ||
        !strstr(lfb.out, "ended without the server's TLS close_notify"))
        fail_msg("want a close-delimited body without close_notify an error:\n%s", lfb.out);
    expect_clean(cut_server("HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello"), 1);
}

/* A TLS connection that reconnects may hold two descriptors (its last socket half-closed until
 * the server's close_notify is read): the start-up check counts two, where long mode counts one.
 * -c is two thirds of RLIMIT_NOFILE, so only the count of two is over it. */
static void test_tls_reconnects_count_two_descriptors(void **state)
{
    struct rlimit rl;
    char c[32];

    (void)state;
    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_max > 30000)
        skip(); /* -c would run past the ephemeral ports first */
    snprintf(c, sizeof(c), "%llu", (unsigned long long)rl.rlim_max * 2 / 3);
    if (bench("--tls", "--tls-insecure", "--mode", "short", "-c", c, "-n", "1", "127.0.0.1:1",
              NULL) != 2 ||
        !strstr(lfb.out, "file descriptors but RLIMIT_NOFILE"))
        fail_msg("want --mode short -c %s refused for its descriptors:\n%s", c, lfb.out);
    if (bench("--tls", "--tls-insecure", "--reconnect-every", "5", "-c", c, "-n", "1",
              "127.0.0.1:1", NULL) != 2 ||
        !strstr(lfb.out, "file descriptors but RLIMIT_NOFILE"))
        fail_msg("want --reconnect-every -c %s refused for its descriptors:\n%s", c, lfb.out);
    bench("--tls", "--tls-insecure", "-c", c, "-n", "1", "127.0.0.1:1", NULL);
    if (strstr(lfb.out, "file descriptors"))
        fail_msg("want long mode's -c %s within the descriptors:\n%s", c, lfb.out);
}

/* A kernel counter's "+N" on lfbench's kernel line; -1 when absent. */
static long kernel_delta(const char *name)
{
    char key[64];
    const char *p;

    snprintf(key, sizeof(key), " %s +", name);
    p = strstr(lfb.out, key);
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/* Short mode and --reconnect-every end each connection in order: lfbench's close_notify and
 * FIN, the server's answer read before the socket closes, so that no close is a reset at the
 * server (nor at lfbench). In a network namespace of the test's, with lfepolld's TLS listener
 * alone in it, the kernel's reset counters are exact. Root only (unshare -n); skipped
 * otherwise, as CI has both. */
static void test_tls_short_closes_in_order(void **state)
{
    static const char *const loads[] = {"--mode short -n 150", "-n 150 --reconnect-every 3"};
    char script[2048];

    (void)state;
    servers();
    if (geteuid() != 0 || system("unshare -n true 2>/dev/null") != 0)
        skip();
    for (size_t k = 0; k < sizeof(loads) / sizeof(loads[0]); k++) {
        snprintf(script, sizeof(script),
                 "/usr/sbin/ip link set lo up && %s --listen-tls 127.0.0.1:4431 --tls-cert %s "
                 "--tls-key %s "
                 "--groups 1 >/dev/null 2>&1 & p=$!; for i in $(seq 100); do "
                 "ss -ltnH 'sport = :4431' | grep -q . && break; sleep 0.05; done; "
                 "%s --tls --tls-ca %s -c 4 %s 127.0.0.1:4431; rc=$?; kill $p; wait $p; exit $rc",
                 lfb.lfepolld, path_of("server.pem"), path_of("server.key"), lfb.lfbench,
                 path_of("ca.pem"), loads[k]);
        int rc = lfb_run((const char *[]){"/usr/bin/unshare", "-n", "/bin/sh", "-c", script, NULL},
                         lfb.out, sizeof(lfb.out), 30 * (unsigned)lfb.slow);
        expect_clean(rc, 150);
        if (kernel_delta("EstabResets") != 0 || kernel_delta("TCPAbortOnData") != 0)
            fail_msg("%s: want no reset in the namespace:\n%s", loads[k], lfb.out);
    }
}

/* A shell function for the scripts run in a test's network namespace: "count SECTION NAME FILE"
 * prints the kernel counter NAME of SECTION ("Tcp", "TcpExt") in FILE (/proc/net/snmp,
 * /proc/net/netstat): the header line names it, the next line holds its value. */
#define NS_COUNT                                                                                   \
    "count() { awk -v s=\"$1:\" -v k=\"$2\" '$1 == s {for (i = 1; i <= NF; i++) "                  \
    "if ($i == k) c = i; if (c && $c ~ /^[0-9]+$/) print $c}' \"$3\"; }; "

/* The run's last close: its socket waited for the server's answer only until lfbench freed
 * its connections, right after the run, so a server that answers the close_notify late (under
 * load: CI's ThreadSanitizer pass) sent its close_notify to a closed socket, which the kernel
 * answered with a reset (a FIN_WAIT2 socket closed is a timewait one, whose answer to new data
 * is a RST). lfbench now waits for those answers, up to 1 s in all. tls_slow_close.py answers
 * 300 ms late; the kernel's OutRsts, exact in the test's network namespace, is read after it
 * has. Root only
 * (unshare -n), as test_tls_short_closes_in_order. */
static void test_tls_last_close_waits_for_answer(void **state)
{
    char script[2048];
    long aborts = -1;
    const char *p;
    int rc;

    (void)state;
    servers();
    if (geteuid() != 0 || system("unshare -n true 2>/dev/null") != 0)
        skip();
    snprintf(script, sizeof(script),
             NS_COUNT
             "/usr/sbin/ip link set lo up && python3 tests/integration/tls_slow_close.py %s %s "
             "4432 0.3 > %s & p=$!; for i in $(seq %d); do grep -q ready %s && break; "
             "sleep 0.05; done; "
             "a0=$(count Tcp OutRsts /proc/net/snmp); "
             "%s --tls --tls-ca %s --mode short -c 1 -n 1 127.0.0.1:4432; rc=$?; wait $p; "
             "a1=$(count Tcp OutRsts /proc/net/snmp); "
             "[ -n \"$a0\" ] && [ -n \"$a1\" ] && echo \"resets $((a1 - a0))\"; exit $rc",
             path_of("server.pem"), path_of("server.key"), path_of("slow_close.out"),
             100 * lfb.slow, path_of("slow_close.out"), lfb.lfbench, path_of("ca.pem"));
    rc = lfb_run((const char *[]){"/usr/bin/unshare", "-n", "/bin/sh", "-c", script, NULL}, lfb.out,
                 sizeof(lfb.out), 30 * (unsigned)lfb.slow);
    expect_clean(rc, 1);
    if ((p = strstr(lfb.out, "resets ")))
        aborts = strtol(p + 7, NULL, 10);
    if (aborts != 0)
        fail_msg("want no reset for a close_notify answered 300 ms late, got %ld:\n%s", aborts,
                 lfb.out);
}

/* lfepolld's counter name= on the "stats: total" line of its /stats on 127.0.0.1:port; -1 when
 * absent. */
static long daemon_stat(int port, const char *name)
{
    static char body[16384];
    const char req[] = "GET /stats HTTP/1.0\r\n\r\n";
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    size_t got = 0;
    char key[64];
    ssize_t r;
    const char *p;

    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_true(write(fd, req, sizeof(req) - 1) == (ssize_t)(sizeof(req) - 1));
    while (got < sizeof(body) - 1 && (r = read(fd, body + got, sizeof(body) - 1 - got)) > 0)
        got += (size_t)r;
    close(fd);
    body[got] = '\0';
    snprintf(key, sizeof(key), " %s=", name);
    p = strstr(body, "stats: total ");
    p = p ? strstr(p, key) : NULL;
    return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/* --tls-resume 1 against lfepolld's own TLS listener, TLS 1.3 and 1.2: each connection offers
 * the session the one before ended with, so all but the first resume, as lfbench counts them
 * and as lfepolld's tls_full and tls_resumed (/stats) do. A TLS 1.3 ticket is used once: this
 * fails where a resumption brings no new ticket (every other one resumed). */
static void test_tls_resume_lfepolld(void **state)
{
    static const char *const versions[] = {"1.3", "1.2"};
    char admin[32];
    int port = 0, ap = lfb_free_port();
    pid_t pid;
    long f, r;

    (void)state;
    servers();
    snprintf(admin, sizeof(admin), "127.0.0.1:%d", ap);
    pid = lfb_start_server((const char *[]){lfb.lfepolld, "--listen-tls", "127.0.0.1:PORT",
                                            "--tls-cert", path_of("server.pem"), "--tls-key",
                                            path_of("server.key"), "--groups", "1", "--admin",
                                            admin, NULL},
                           &port, lfb.slow);
    /* the TLS listener opens before --admin's (CI's ASan pass read /stats too soon) */
    for (int i = 0; i < 500 * lfb.slow && !lfb_port_open(ap); i++)
        lfb_sleep_ms(10);
    for (size_t k = 0; k < sizeof(versions) / sizeof(versions[0]); k++) {
        long full0 = daemon_stat(ap, "tls_full"), res0 = daemon_stat(ap, "tls_resumed");
        int rc = bench("--tls", "--tls-ca", path_of("ca.pem"), "--tls-version", versions[k],
                       "--mode", "short", "-c", "1", "-n", "20", "--tls-resume", "1",
                       target("127.0.0.1", port), NULL);

        expect_clean(rc, 20);
        if (!handshakes(&f, &r) || f != 1 || r != 19)
            fail_msg("TLS %s --tls-resume 1: want 1 full, 19 resumed:\n%s", versions[k], lfb.out);
        if (daemon_stat(ap, "tls_full") - full0 != 1 || daemon_stat(ap, "tls_resumed") - res0 != 19)
            fail_msg("TLS %s: lfepolld counted %ld full, %ld resumed; want 1 and 19", versions[k],
                     daemon_stat(ap, "tls_full") - full0, daemon_stat(ap, "tls_resumed") - res0);
    }
    lfb_stop_server(&pid);
}

/* A resumed TLS 1.2 handshake ends with lfbench's Finished, which the server answers with
 * nothing: Nagle would hold the request written after it until the server's delayed ACK, one a
 * connection. In a network namespace of the test's, with lfepolld's TLS listener alone in it,
 * the kernel's DelayedACKs counter is exact: without TCP_NODELAY on lfbench's sockets it counts
 * one for each of the 39 resumed connections; with it, almost none (the bound leaves room for a
 * server descheduled past the delayed ACK's timer on a loaded machine). Root only (unshare -n),
 * as test_tls_short_closes_in_order. */
static void test_tls_request_not_held_by_nagle(void **state)
{
    char script[2048];
    long delayed = -1;
    const char *p;
    int rc;

    (void)state;
    servers();
    if (geteuid() != 0 || system("unshare -n true 2>/dev/null") != 0)
        skip();
    snprintf(
        script, sizeof(script),
        NS_COUNT "/usr/sbin/ip link set lo up && %s --listen-tls 127.0.0.1:4431 --tls-cert %s "
                 "--tls-key %s --groups 1 >/dev/null 2>&1 & p=$!; for i in $(seq 100); do "
                 "ss -ltnH 'sport = :4431' | grep -q . && break; sleep 0.05; done; "
                 "d0=$(count TcpExt DelayedACKs /proc/net/netstat); "
                 "%s --tls --tls-ca %s --tls-version 1.2 --mode short -c 1 -n 40 --tls-resume 1 "
                 "127.0.0.1:4431; rc=$?; "
                 "d1=$(count TcpExt DelayedACKs /proc/net/netstat); "
                 "[ -n \"$d0\" ] && [ -n \"$d1\" ] && echo \"delayed_acks $((d1 - d0))\"; "
                 "kill $p; wait $p; exit $rc",
        lfb.lfepolld, path_of("server.pem"), path_of("server.key"), lfb.lfbench, path_of("ca.pem"));
    rc = lfb_run((const char *[]){"/usr/bin/unshare", "-n", "/bin/sh", "-c", script, NULL}, lfb.out,
                 sizeof(lfb.out), 30 * (unsigned)lfb.slow);
    expect_clean(rc, 40);
    if ((p = strstr(lfb.out, "delayed_acks ")))
        delayed = strtol(p + 13, NULL, 10);
    if (delayed < 0 || delayed >= 20)
        fail_msg("want fewer than 20 delayed ACKs for 39 resumed connections, got %ld:\n%s",
                 delayed, lfb.out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tls_echo),
        cmocka_unit_test(test_tls_https_nginx),
        cmocka_unit_test(test_tls_resume),
        cmocka_unit_test(test_tls_resume_refused),
        cmocka_unit_test(test_tls_verify_fails),
        cmocka_unit_test(test_tls_client_cert),
        cmocka_unit_test(test_tls_plain_server),
        cmocka_unit_test(test_tls_handshake_timeout),
        cmocka_unit_test(test_tls_truncated),
        cmocka_unit_test(test_tls_phases),
        cmocka_unit_test(test_tls_short_closes_in_order),
        cmocka_unit_test(test_tls_last_close_waits_for_answer),
        cmocka_unit_test(test_tls_reconnects_count_two_descriptors),
        cmocka_unit_test(test_tls_resume_lfepolld),
        cmocka_unit_test(test_tls_request_not_held_by_nagle),
    };
    char cmd[256];
    int rc;

    if (lfb_init(true) < 0)
        return 1;
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    lfb_stop_server(&haproxy_pid);
    lfb_stop_server(&nginx_pid);
    lfb_stop_server(&echo_pid);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return rc;
}
