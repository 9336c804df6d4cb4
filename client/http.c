/* http: where one HTTP/1.1 response ends (RFC 9112), fed bytes as they arrive in any split; and
 * the checks of a request file.
 *
 * The head is parsed a byte at a time by a state machine that keeps no copy of it: a line may
 * arrive split anywhere, and a buffer per connection (64 KiB heads) would cost more memory than
 * the connections themselves. Only three field names matter for framing (Content-Length,
 * Transfer-Encoding, Connection); their values are read as they pass. Bodies are skipped by
 * count. Line ends are CRLF; a bare LF is taken as one (RFC 9112 §2.2 allows it), a bare CR is
 * bad. */
#include "http.h"

#include <errno.h>
#include <string.h>

enum {
    ST_VERSION,    /* "HTTP/1." and the minor digit */
    ST_VERSION_SP, /* the space after it */
    ST_CODE,       /* three digits */
    ST_CODE_END,   /* a space, or the line's end (an empty reason) */
    ST_REASON,     /* to the line's end */
    ST_FIELD,      /* a line's first byte in the head or the trailers */
    ST_NAME,       /* a field name, to its colon */
    ST_VALUE,      /* a field value, to the line's end */
    ST_LF,         /* after a CR: the LF, then the line ends (after_cr says which line) */
    ST_CHUNK_SIZE, /* hex digits */
    ST_CHUNK_BWS,  /* blanks after the size, before ';' or the line's end */
    ST_CHUNK_EXT,  /* chunk extensions, to the line's end */
    ST_CHUNK_DATA, /* remain bytes */
    ST_CHUNK_END,  /* the CRLF after the data */
    ST_BODY_LEN,   /* remain bytes of a Content-Length body */
    ST_BODY_EOF,   /* everything, until the connection ends */
    ST_DONE,
    ST_BAD,
};

/* which line a CR (or an LF) ends */
enum { L_STATUS, L_FIELD, L_EMPTY, L_CHUNK_SIZE, L_CHUNK_END };

/* the fields that frame a response; F_OTHER is any other */
enum { F_CL, F_TE, F_CONN, F_OTHER };
static const char *const field_name[] = {"content-length", "transfer-encoding", "connection"};
/* their lengths, which the byte-by-byte match asks for at every byte (a strlen each showed in
 * lfbench's profile against an HTTP server: docs/bench.md, "lfbench scripts: what they cost") */
static const uint8_t field_len[] = {sizeof("content-length") - 1, sizeof("transfer-encoding") - 1,
                                    sizeof("connection") - 1};
#define NFIELDS 3

/* list elements of Transfer-Encoding and Connection that mean something */
enum { T_CHUNKED, T_CLOSE, T_KEEPALIVE };
static const char *const token_name[] = {"chunked", "close", "keep-alive"};
static const uint8_t token_len[] = {sizeof("chunked") - 1, sizeof("close") - 1,
                                    sizeof("keep-alive") - 1};
#define NTOKENS 3

/* a list element's progress: before it, in its token, after it (blanks, parameters) */
enum { E_BEFORE, E_TOKEN, E_AFTER };

static bool is_tchar(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* A byte a field value, reason phrase or chunk extension may hold: VCHAR, obs-text, SP, HTAB. */
static bool is_vbyte(uint8_t c)
{
    return c == '\t' || (c >= 0x20 && c != 0x7f);
}

static uint8_t lower(uint8_t c)
{
    return c >= 'A' && c <= 'Z' ? (uint8_t)(c | 0x20) : c;
}

static int hexval(uint8_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = lower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Per-head state back to its start: a 1xx response is followed by another head. */
static void head_reset(struct http_resp *h)
{
    h->state = ST_VERSION;
    h->pos = 0;
    h->have_cl = h->have_te = h->te_chunked = h->conn_close = h->conn_keep = false;
    h->cl = 0;
}

void http_start(struct http_resp *h, bool head_request)
{
    memset(h, 0, sizeof(*h));
    h->head_req = head_request;
    head_reset(h);
}

/* The element of a list field just ended (a comma or the line's end). Returns false if the
 * field cannot have it. */
static bool elem_end(struct http_resp *h)
{
    int tok = -1;

    for (int i = 0; i < NTOKENS; i++)
        if ((h->tok_mask >> i & 1) && h->pos == token_len[i])
            tok = i;
    switch (h->field) {
    case F_CL:
        if (h->elem == E_BEFORE)
            return false; /* empty: "Content-Length:" or "5,,5" */
        if (h->have_cl && h->cl != h->num)
            return false; /* two different lengths: which is the body? */
        h->have_cl = true;
        h->cl = h->num;
        break;
    case F_TE:
        if (h->elem == E_BEFORE)
            return true; /* lists may hold empty elements */
        /* chunked must be the final coding; anything after it makes the body close-delimited */
        h->te_chunked = tok == T_CHUNKED && h->elem == E_TOKEN;
        break;
    case F_CONN:
        if (tok == T_CLOSE)
            h->conn_close = true;
        if (tok == T_KEEPALIVE)
            h->conn_keep = true;
        break;
    }
    h->elem = E_BEFORE;
    h->pos = 0;
    h->num = 0;
    h->tok_mask = (1u << NTOKENS) - 1;
    return true;
}

/* One byte of a field value that frames the response (not the line's end). */
static bool value_byte(struct http_resp *h, uint8_t c)
{
    bool blank = c == ' ' || c == '\t';

    if (c == ',')
        return elem_end(h);
    if (h->field == F_CL) {
        if (blank)
            h->elem = h->elem == E_BEFORE ? E_BEFORE : E_AFTER;
        else if (c < '0' || c > '9' || h->elem == E_AFTER)
            return false; /* "-1", "0x10", "1 2" */
        else if (h->num > (UINT64_MAX - (uint64_t)(c - '0')) / 10)
            return false; /* overflows */
        else {
            h->num = h->num * 10 + (uint64_t)(c - '0');
            h->elem = E_TOKEN;
        }
        return true;
    }
    /* a token of Transfer-Encoding or Connection: matched against the ones that matter as it
     * goes; anything after it (blanks, ";param") stops the match */
    if (blank) {
        if (h->elem == E_TOKEN)
            h->elem = E_AFTER;
        return true;
    }
    if (h->elem == E_AFTER) {
        h->tok_mask = 0;
        return true;
    }
    h->elem = E_TOKEN;
    for (int i = 0; i < NTOKENS; i++)
        if (h->pos >= token_len[i] || (uint8_t)token_name[i][h->pos] != lower(c))
            h->tok_mask &= (uint8_t) ~(1u << i);
    if (h->pos < UINT16_MAX)
        h->pos++;
    return true;
}

/* The final head is in: how the body is framed (RFC 9112 §6.3). */
static bool head_end(struct http_resp *h)
{
    if (h->status < 200) {
        if (h->status == 101)
            return false; /* switching protocols: nothing lfbench asked for */
        head_reset(h);    /* 100 Continue, 103 Early Hints: the response is still to come */
        return true;
    }
    h->close = h->conn_close || (h->minor == 0 && !h->conn_keep);
    if (h->head_req || h->status == 204 || h->status == 304) {
        h->state = ST_DONE;
    } else if (h->have_te) {
        if (h->have_cl)
            return false; /* both: a smuggling attempt or a broken server (§6.3 item 3) */
        if (h->te_chunked) {
            h->state = ST_CHUNK_SIZE;
            h->num = 0;
            h->pos = 0;
            h->span = 0;
        } else {
            h->state = ST_BODY_EOF; /* chunked not last: the body runs to the close */
            h->eof_body = h->close = true;
        }
    } else if (h->have_cl) {
        h->remain = h->cl;
        h->state = h->cl ? ST_BODY_LEN : ST_DONE;
    } else {
        h->state = ST_BODY_EOF;
        h->eof_body = h->close = true;
    }
    return true;
}

/* The line that a CR or LF ended. */
static bool line_end(struct http_resp *h, int line)
{
    switch (line) {
    case L_STATUS:
    case L_FIELD:
        h->state = ST_FIELD;
        return true;
    case L_EMPTY:
        if (h->trailer) {
            h->state = ST_DONE;
            return true;
        }
        return head_end(h);
    case L_CHUNK_SIZE:
        if (h->num == 0) { /* the last chunk: trailers follow, then an empty line */
            h->trailer = true;
            h->span = 0;
            h->state = ST_FIELD;
        } else {
            h->remain = h->num;
            h->state = ST_CHUNK_DATA;
        }
        return true;
    default: /* L_CHUNK_END */
        h->state = ST_CHUNK_SIZE;
        h->num = 0;
        h->pos = 0;
        h->span = 0;
        return true;
    }
}

/* CR or LF ending a line: the LF ends it now, the CR once its LF comes. Returns false for
 * anything else (the caller's byte is then bad, unless it handles it). */
static bool eol(struct http_resp *h, uint8_t c, int line, bool *ok)
{
    if (c == '\r') {
        h->after_cr = (uint8_t)line;
        h->state = ST_LF;
        *ok = true;
        return true;
    }
    if (c == '\n') {
        *ok = line_end(h, line);
        return true;
    }
    return false;
}

/* "HTTP/1." and the minor version's digit. */
static bool version_byte(struct http_resp *h, uint8_t c)
{
    if (h->pos < 7) {
        if (c != (uint8_t) "HTTP/1."[h->pos])
            return false;
        h->pos++;
        return true;
    }
    if (c < '0' || c > '9')
        return false;
    h->minor = (uint8_t)(c - '0');
    h->state = ST_VERSION_SP;
    return true;
}

/* The status code's three digits: 100-599. */
static bool code_byte(struct http_resp *h, uint8_t c)
{
    if (c < '0' || c > '9' || (h->pos == 0 && (c < '1' || c > '5')))
        return false;
    h->status = (uint16_t)(h->status * 10 + (c - '0'));
    if (++h->pos == 3)
        h->state = ST_CODE_END;
    return true;
}

/* A byte of a field name, matched against the names that frame a response as it goes; its
 * colon says which one it was. */
static bool name_byte(struct http_resp *h, uint8_t c)
{
    if (c == ':') {
        h->field = F_OTHER;
        for (int i = 0; i < NFIELDS; i++)
            if ((h->tok_mask >> i & 1) && h->pos == field_len[i])
                h->field = (uint8_t)i;
        if (h->field == F_TE)
            h->have_te = true;
        h->state = ST_VALUE;
        h->elem = E_BEFORE;
        h->pos = 0;
        h->num = 0;
        h->tok_mask = (1u << NTOKENS) - 1;
        return true;
    }
    if (!is_tchar(c))
        return false; /* includes a blank before the colon (§5.1) */
    for (int i = 0; i < NFIELDS; i++)
        if (h->pos >= field_len[i] || (uint8_t)field_name[i][h->pos] != lower(c))
            h->tok_mask &= (uint8_t) ~(1u << i);
    if (h->pos < UINT16_MAX)
        h->pos++;
    return true;
}

/* A byte of a field value, or the line's end. */
static bool field_value_byte(struct http_resp *h, uint8_t c)
{
    bool ok;

    if (c == '\r' || c == '\n') {
        if (h->field != F_OTHER && !elem_end(h))
            return false;
        eol(h, c, L_FIELD, &ok);
        return ok;
    }
    if (!is_vbyte(c))
        return false;
    return h->field == F_OTHER || value_byte(h, c);
}

/* A byte of a chunk-size line's hex digits, or what ends them. */
static bool chunk_size_byte(struct http_resp *h, uint8_t c)
{
    int d = hexval(c);
    bool ok;

    if (d >= 0) {
        if (h->num > UINT64_MAX >> 4)
            return false; /* overflows */
        h->num = h->num << 4 | (uint64_t)d;
        h->pos = 1;
        return true;
    }
    if (!h->pos)
        return false; /* no digit */
    if (c == ' ' || c == '\t') {
        h->state = ST_CHUNK_BWS;
        return true;
    }
    if (c == ';') {
        h->state = ST_CHUNK_EXT;
        return true;
    }
    return eol(h, c, L_CHUNK_SIZE, &ok) && ok;
}

/* One byte of a line: the head, a chunk-size line, a chunk's CRLF, the trailers. */
static bool step(struct http_resp *h, uint8_t c)
{
    bool ok;

    switch (h->state) {
    case ST_VERSION:
        return version_byte(h, c);
    case ST_VERSION_SP:
        if (c != ' ')
            return false;
        h->state = ST_CODE;
        h->pos = 0;
        h->status = 0;
        return true;
    case ST_CODE:
        return code_byte(h, c);
    case ST_CODE_END:
        if (c == ' ') {
            h->state = ST_REASON;
            return true;
        }
        return eol(h, c, L_STATUS, &ok) && ok;
    case ST_REASON:
        if (eol(h, c, L_STATUS, &ok))
            return ok;
        return is_vbyte(c);
    case ST_FIELD:
        if (eol(h, c, L_EMPTY, &ok))
            return ok;
        if (!is_tchar(c))
            return false; /* a blank here is obs-fold (refused, §5.2), a colon an empty name */
        h->state = ST_NAME;
        h->tok_mask = h->trailer ? 0 : (1u << NFIELDS) - 1; /* trailers frame nothing */
        h->pos = 0;
        /* the byte is the name's first */
        __attribute__((fallthrough));
    case ST_NAME:
        return name_byte(h, c);
    case ST_VALUE:
        return field_value_byte(h, c);
    case ST_LF:
        return c == '\n' && line_end(h, h->after_cr);
    case ST_CHUNK_SIZE:
        return chunk_size_byte(h, c);
    case ST_CHUNK_BWS:
        if (c == ' ' || c == '\t')
            return true;
        if (c == ';') {
            h->state = ST_CHUNK_EXT;
            return true;
        }
        return eol(h, c, L_CHUNK_SIZE, &ok) && ok;
    case ST_CHUNK_EXT:
        if (eol(h, c, L_CHUNK_SIZE, &ok))
            return ok;
        return is_vbyte(c);
    case ST_CHUNK_END:
        return eol(h, c, L_CHUNK_END, &ok) && ok;
    default:
        return false;
    }
}

/* Whether the next byte belongs to a head (the final one or a 1xx), not to the body. */
static bool in_head(const struct http_resp *h)
{
    if (h->trailer)
        return false;
    return h->state == ST_LF ? h->after_cr <= L_EMPTY : h->state < ST_LF;
}

enum http_result http_feed(struct http_resp *h, const uint8_t *buf, size_t n, size_t *used)
{
    size_t i = 0;

    while (i < n) {
        switch (h->state) {
        case ST_DONE:
            *used = i;
            return HTTP_DONE;
        case ST_BAD:
            *used = i;
            return HTTP_BAD;
        case ST_BODY_LEN:
        case ST_CHUNK_DATA: {
            size_t take = n - i < h->remain ? n - i : (size_t)h->remain;
            i += take;
            h->body_bytes += take;
            h->remain -= take;
            if (h->remain == 0)
                h->state = h->state == ST_BODY_LEN ? ST_DONE : ST_CHUNK_END;
            continue;
        }
        case ST_BODY_EOF:
            h->body_bytes += n - i;
            i = n;
            continue;
        default:
            break;
        }
        /* a line of the head, of the chunk framing or of the trailers: bounded */
        bool head = in_head(h);

        if ((head ? h->head_bytes : h->span) >= HTTP_MAX_HEAD || !step(h, buf[i])) {
            h->state = ST_BAD; /* and the byte is not consumed */
            continue;
        }
        i++;
        if (head) {
            h->head_bytes++;
        } else {
            h->body_bytes++;
            h->span++;
        }
    }
    *used = i;
    return h->state == ST_DONE ? HTTP_DONE : h->state == ST_BAD ? HTTP_BAD : HTTP_MORE;
}

enum http_result http_eof(struct http_resp *h)
{
    if (h->state == ST_BODY_EOF) {
        h->state = ST_DONE;
        return HTTP_DONE;
    }
    if (h->state != ST_DONE)
        h->state = ST_BAD;
    return h->state == ST_DONE ? HTTP_DONE : HTTP_BAD;
}

/* --- request files ------------------------------------------------------------------------ */

/* Whether [p, end) holds name (lower case) as a field name followed by a colon. */
static bool field_is(const uint8_t *p, const uint8_t *end, const char *name)
{
    size_t k = strlen(name);

    if ((size_t)(end - p) <= k || p[k] != ':')
        return false;
    for (size_t i = 0; i < k; i++)
        if (lower(p[i]) != (uint8_t)name[i])
            return false;
    return true;
}

/* Whether the comma-separated list [p, end) holds token (lower case) as an element. */
static bool list_has(const uint8_t *p, const uint8_t *end, const char *token)
{
    size_t k = strlen(token);

    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == ','))
            p++;
        const uint8_t *s = p;
        while (p < end && *p != ',' && *p != ' ' && *p != '\t')
            p++;
        if ((size_t)(p - s) == k) {
            size_t i = 0;
            while (i < k && lower(s[i]) == (uint8_t)token[i])
                i++;
            if (i == k)
                return true;
        }
        while (p < end && *p != ',')
            p++;
    }
    return false;
}

int http_field_check(const char *s, size_t *name_len, const char **why)
{
    const uint8_t *p = (const uint8_t *)s, *name = p;

    while (is_tchar(*p))
        p++;
    if (p == name) {
        *why = *p == ':' ? "its name is empty"
                         : "it does not start with a field name (letters, digits and "
                           "!#$%&'*+-.^_`|~)";
        return -EINVAL;
    }
    if (*p != ':') {
        *why = *p ? "its name holds a byte no field name has (letters, digits and "
                    "!#$%&'*+-.^_`|~ only, and no blank before the colon)"
                  : "it has no colon after the name";
        return -EINVAL;
    }
    *name_len = (size_t)(p - name);
    for (p++; *p; p++)
        if (!is_vbyte(*p)) {
            *why = "its value holds a control byte (a newline?); a tab is the only one allowed";
            return -EINVAL;
        }
    return 0;
}

/* What a request's head says of how its body is framed. */
struct req_framing {
    bool have_cl, have_te, keep, close;
    uint64_t cl;
};

/* The request line at req's start: METHOD TARGET HTTP/1.x and CRLF; *minor: x. Returns its LF,
 * or NULL with *why. */
static const uint8_t *request_line(const uint8_t *req, size_t len, struct http_req_info *info,
                                   int *minor, const char **why)
{
    const uint8_t *p = req, *eolp = memchr(p, '\n', len), *target;

    if (!eolp || eolp == p || eolp[-1] != '\r') {
        *why = "the first line is not a request line ending in CRLF";
        return NULL;
    }
    while (p < eolp && is_tchar(*p))
        p++;
    if (p == req || *p != ' ') {
        *why = "the request line does not start with a method and a space (GET / HTTP/1.1)";
        return NULL;
    }
    info->head = p - req == 4 && !memcmp(req, "HEAD", 4);
    target = ++p;
    while (p<eolp && * p> ' ' && *p != 0x7f)
        p++;
    if (p == target || *p != ' ' || eolp - (p + 1) != 9 || memcmp(p + 1, "HTTP/1.", 7) ||
        p[8] < '0' || p[8] > '9') {
        *why = "the request line is not METHOD TARGET HTTP/1.x";
        return NULL;
    }
    *minor = p[8] - '0';
    return eolp;
}

/* Content-Length's value [d, end): one decimal number between blanks, in *x. */
static bool content_length(const uint8_t *d, const uint8_t *end, uint64_t *x)
{
    const uint8_t *d0;

    *x = 0;
    while (d < end && (*d == ' ' || *d == '\t'))
        d++;
    d0 = d;
    while (d < end && *d >= '0' && *d <= '9' && *x <= (UINT64_MAX - (uint64_t)(*d - '0')) / 10)
        *x = *x * 10 + (uint64_t)(*d++ - '0');
    while (d < end && (*d == ' ' || *d == '\t'))
        d++;
    return d != d0 && d == end;
}

/* One field line [p, eolp), eolp its LF after a CR: NAME: VALUE, and what it says of the framing
 * in *f. 0, or -EINVAL with *why. */
static int field_line(const uint8_t *p, const uint8_t *eolp, struct req_framing *f,
                      const char **why)
{
    const uint8_t *colon = p, *v;
    uint64_t x;

    while (colon < eolp - 1 && is_tchar(*colon))
        colon++;
    if (colon == p || *colon != ':') {
        *why = "a header line is not NAME: VALUE (no blank before the colon, no folding)";
        return -EINVAL;
    }
    for (v = colon + 1; v < eolp - 1; v++)
        if (!is_vbyte(*v)) {
            *why = "a header value holds a control byte";
            return -EINVAL;
        }
    if (field_is(p, eolp, "content-length")) {
        if (!content_length(colon + 1, eolp - 1, &x) || (f->have_cl && x != f->cl)) {
            *why = "Content-Length is not one decimal number";
            return -EINVAL;
        }
        f->have_cl = true;
        f->cl = x;
    } else if (field_is(p, eolp, "transfer-encoding")) {
        f->have_te = true;
    } else if (field_is(p, eolp, "connection")) {
        f->close |= list_has(colon + 1, eolp - 1, "close");
        f->keep |= list_has(colon + 1, eolp - 1, "keep-alive");
    }
    return 0;
}

/* The body after a head of info->head_len bytes: its length, in info->len (whole: the rest of
 * req's len bytes, which must be the body; else the first request's, which must fit). */
static int request_body(size_t len, struct http_req_info *info, const struct req_framing *f,
                        bool whole, const char **why)
{
    if (f->have_te && f->have_cl) {
        *why = "it has both Content-Length and Transfer-Encoding";
        return -EINVAL;
    }
    if (!whole) {
        if (f->have_te) {
            *why = "a request with Transfer-Encoding cannot be told from the next one: give it "
                   "Content-Length";
            return -EINVAL;
        }
        if ((uint64_t)(len - info->head_len) < f->cl) {
            *why = "the body after the head is shorter than its Content-Length";
            return -EINVAL;
        }
        info->len = info->head_len + (size_t)f->cl;
        return 0;
    }
    info->len = len;
    if (!f->have_te && (uint64_t)(len - info->head_len) != (f->have_cl ? f->cl : 0)) {
        *why = f->have_cl ? "the body after the head is not Content-Length bytes long"
                          : "bytes follow the head, but there is no Content-Length (one request "
                            "a file; no newline after the empty line)";
        return -EINVAL;
    }
    return 0;
}

/* One request at req's start: the whole of req[0, len) (whole), or its first request. */
static int check_request(const uint8_t *req, size_t len, struct http_req_info *info,
                         const char **why, bool whole)
{
    const uint8_t *p, *end = req + len, *eolp;
    struct req_framing f = {0};
    int minor;

    memset(info, 0, sizeof(*info));
    if (!(eolp = request_line(req, len, info, &minor, why)))
        return -EINVAL;
    /* field lines, then the empty line */
    for (p = eolp + 1;; p = eolp + 1) {
        eolp = p < end ? memchr(p, '\n', (size_t)(end - p)) : NULL;
        if (!eolp) {
            *why = "no empty line ends the head (it must end in CRLF CRLF)";
            return -EINVAL;
        }
        if (eolp == p || eolp[-1] != '\r') {
            *why = "a line of the head does not end in CRLF";
            return -EINVAL;
        }
        if (eolp - 1 == p)
            break; /* the empty line */
        if (field_line(p, eolp, &f, why) < 0)
            return -EINVAL;
    }
    info->head_len = (size_t)(eolp + 1 - req);
    info->close = f.close || (minor == 0 && !f.keep);
    return request_body(len, info, &f, whole, why);
}

int http_request_check(const uint8_t *req, size_t len, struct http_req_info *info, const char **why)
{
    return check_request(req, len, info, why, true);
}

int http_request_first(const uint8_t *req, size_t len, struct http_req_info *info, const char **why)
{
    return check_request(req, len, info, why, false);
}

size_t http_request_crlf(const uint8_t *req, size_t len, uint8_t *out)
{
    size_t head = 0, bare = 0, line = 0, o = 0;

    for (size_t i = 0; i < len; i++) {
        if (req[i] != '\n')
            continue;
        bare += i == 0 || req[i - 1] != '\r';
        head = i + 1;
        if (i == line || (i == line + 1 && req[line] == '\r'))
            break; /* the empty line: the body follows, as it is */
        line = i + 1;
    }
    if (bare == 0 || !out)
        return bare ? len + bare : 0;
    for (size_t i = 0; i < len; i++) {
        if (i < head && req[i] == '\n' && (i == 0 || req[i - 1] != '\r'))
            out[o++] = '\r';
        out[o++] = req[i];
    }
    return o;
}
