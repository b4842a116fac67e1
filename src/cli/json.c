/* SPDX-License-Identifier: MIT */
/* The strict JSON reader of openmps top (json.h): RFC 8259's grammar, no extensions, with the
 * bounds of json.h; strings are printable ASCII, as the daemon writes them (a \u escape of
 * U+0001..U+007F is read, anything above is refused: the daemon never writes one). Recursive
 * descent, its depth bounded by OM_JSON_MAX_DEPTH. */
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    struct om_json *j;
    const char *s;
    size_t len, pos;
    char *err;
    size_t errcap;
    char buf[OM_JSON_MAX_STRING + 1]; /* the string being read */
};

static int fail(struct parser *p, const char *fmt, ...)
{
    va_list ap;
    int n = snprintf(p->err, p->errcap, "at byte %zu: ", p->pos);

    if (n >= 0 && (size_t)n < p->errcap) {
        va_start(ap, fmt);
        vsnprintf(p->err + n, p->errcap - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static void skip_ws(struct parser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

/* A new value: its index, or 0 when the document has too many (said in err). */
static uint32_t new_value(struct parser *p, uint8_t type)
{
    struct om_json *j = p->j;

    if (j->n >= OM_JSON_MAX_VALUES) {
        fail(p, "more than %u values", OM_JSON_MAX_VALUES);
        return 0;
    }
    if (j->n == j->cap) {
        uint32_t cap = j->cap ? j->cap * 2 : 256;
        struct om_json_value *v = realloc(j->v, cap * sizeof(*v));
        if (!v) {
            fail(p, "out of memory");
            return 0;
        }
        j->v = v;
        j->cap = cap;
    }
    memset(&j->v[j->n], 0, sizeof(j->v[0]));
    j->v[j->n].type = type;
    return j->n++ + 1; /* + 1: index 0 of the caller means failure; see value() */
}

/* Keeps p->buf (n bytes) in the document's strings: its offset, or -1. */
static int64_t keep_string(struct parser *p, size_t n)
{
    struct om_json *j = p->j;

    if (j->slen + n + 1 > j->scap) {
        size_t cap = j->scap ? j->scap : 4096;
        while (cap < j->slen + n + 1)
            cap *= 2;
        if (cap > UINT32_MAX)
            return fail(p, "too much string text");
        char *s = realloc(j->strings, cap);
        if (!s)
            return fail(p, "out of memory");
        j->strings = s;
        j->scap = cap;
    }
    memcpy(j->strings + j->slen, p->buf, n);
    j->strings[j->slen + n] = '\0';
    j->slen += n + 1;
    return (int64_t)(j->slen - n - 1);
}

static int hex(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* A string at p->pos (its opening quote) into p->buf: its length, or -1. */
static int64_t read_string(struct parser *p)
{
    size_t n = 0;

    p->pos++; /* the quote */
    for (;;) {
        if (p->pos >= p->len)
            return fail(p, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20 || c > 0x7e)
            return fail(p, "byte 0x%02x in a string (printable ASCII only)", c);
        if (c == '\\') {
            if (p->pos + 1 >= p->len)
                return fail(p, "unterminated escape");
            char e = p->s[p->pos + 1];
            const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t", *at = strchr(from, e);
            if (e && at) {
                c = (unsigned char)to[at - from];
                p->pos += 2;
            } else if (e == 'u') {
                int code = 0;
                for (int i = 2; i < 6; i++) {
                    int h = p->pos + (size_t)i < p->len ? hex(p->s[p->pos + (size_t)i]) : -1;
                    if (h < 0)
                        return fail(p, "bad \\u escape");
                    code = code * 16 + h;
                }
                if (code == 0 || code > 0x7f)
                    return fail(p, "\\u%04x: only U+0001..U+007F are read", code);
                c = (unsigned char)code;
                p->pos += 6;
            } else {
                return fail(p, "bad escape \\%c", e >= 0x20 && e < 0x7f ? e : '?');
            }
        } else {
            p->pos++;
        }
        if (n == OM_JSON_MAX_STRING)
            return fail(p, "a string longer than %u bytes", OM_JSON_MAX_STRING);
        p->buf[n++] = (char)c;
    }
    return (int64_t)n;
}

static bool digit(struct parser *p)
{
    return p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9';
}

/* A number at p->pos, RFC 8259's grammar exactly, into value vi. */
static int read_number(struct parser *p, uint32_t vi)
{
    size_t start = p->pos;
    bool integer = true, negative = false;
    char text[64];

    if (p->s[p->pos] == '-') {
        negative = true;
        p->pos++;
    }
    if (!digit(p))
        return fail(p, "a number without digits");
    if (p->s[p->pos] == '0') {
        p->pos++;
        if (digit(p))
            return fail(p, "a number with a leading zero");
    } else {
        while (digit(p))
            p->pos++;
    }
    if (p->pos < p->len && p->s[p->pos] == '.') {
        integer = false;
        p->pos++;
        if (!digit(p))
            return fail(p, "no digits after a decimal point");
        while (digit(p))
            p->pos++;
    }
    if (p->pos < p->len && (p->s[p->pos] == 'e' || p->s[p->pos] == 'E')) {
        integer = false;
        p->pos++;
        if (p->pos < p->len && (p->s[p->pos] == '+' || p->s[p->pos] == '-'))
            p->pos++;
        if (!digit(p))
            return fail(p, "no digits in an exponent");
        while (digit(p))
            p->pos++;
    }
    if (p->pos - start >= sizeof(text))
        return fail(p, "a number longer than %zu characters", sizeof(text) - 1);
    memcpy(text, p->s + start, p->pos - start);
    text[p->pos - start] = '\0';
    struct om_json_value *v = &p->j->v[vi];
    v->num = strtod(text, NULL);
    if (integer && !negative) {
        uint64_t u = 0;
        bool fits = true;
        for (const char *c = text; *c && fits; c++) {
            unsigned d = (unsigned)(*c - '0');
            fits = u <= (UINT64_MAX - d) / 10;
            u = u * 10 + d;
        }
        v->is_uint = fits;
        v->u = fits ? u : 0;
    }
    return 0;
}

static bool literal(struct parser *p, const char *word)
{
    size_t n = strlen(word);

    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return false;
    p->pos += n;
    return true;
}

/* One value at p->pos: its index + 1 in j->v, or 0 (the reason in err). */
static uint32_t value(struct parser *p, unsigned depth)
{
    uint32_t vi, last = 0, members = 0;
    int64_t off;

    skip_ws(p);
    if (p->pos >= p->len) {
        fail(p, "a value expected, the text ended");
        return 0;
    }
    char c = p->s[p->pos];
    if (c == '{' || c == '[') {
        bool object = c == '{';
        if (depth >= OM_JSON_MAX_DEPTH) {
            fail(p, "nested deeper than %u", OM_JSON_MAX_DEPTH);
            return 0;
        }
        if (!(vi = new_value(p, object ? OM_JSON_OBJECT : OM_JSON_ARRAY)))
            return 0;
        p->pos++;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) {
            p->pos++;
            return vi;
        }
        for (;;) {
            uint32_t key = 0, ci;
            skip_ws(p);
            if (object) {
                if (p->pos >= p->len || p->s[p->pos] != '"') {
                    fail(p, "a key (a string) expected");
                    return 0;
                }
                if (members == OM_JSON_MAX_MEMBERS) {
                    fail(p, "an object of more than %u members", OM_JSON_MAX_MEMBERS);
                    return 0;
                }
                int64_t n = read_string(p);
                if (n < 0)
                    return 0;
                if (memchr(p->buf, '\0', (size_t)n)) { /* cannot happen: \u0000 is refused */
                    fail(p, "a key with a NUL");
                    return 0;
                }
                p->buf[n] = '\0';
                for (uint32_t m = p->j->v[vi - 1].child; m; m = p->j->v[m - 1].next)
                    if (!strcmp(p->j->strings + p->j->v[m - 1].key, p->buf)) {
                        fail(p, "the key \"%.40s\" twice in one object", p->buf);
                        return 0;
                    }
                if ((off = keep_string(p, (size_t)n)) < 0)
                    return 0;
                key = (uint32_t)off;
                skip_ws(p);
                if (p->pos >= p->len || p->s[p->pos] != ':') {
                    fail(p, "':' expected after a key");
                    return 0;
                }
                p->pos++;
                members++;
            }
            if (!(ci = value(p, depth + 1)))
                return 0;
            p->j->v[ci - 1].key = key;
            if (last)
                p->j->v[last - 1].next = ci;
            else
                p->j->v[vi - 1].child = ci;
            last = ci;
            skip_ws(p);
            if (p->pos < p->len && p->s[p->pos] == ',') {
                p->pos++;
                continue;
            }
            if (p->pos < p->len && p->s[p->pos] == (object ? '}' : ']')) {
                p->pos++;
                return vi;
            }
            fail(p, "',' or '%c' expected", object ? '}' : ']');
            return 0;
        }
    }
    if (c == '"') {
        int64_t n;
        if (!(vi = new_value(p, OM_JSON_STRING)) || (n = read_string(p)) < 0 ||
            (off = keep_string(p, (size_t)n)) < 0)
            return 0;
        p->j->v[vi - 1].str = (uint32_t)off;
        return vi;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        if (!(vi = new_value(p, OM_JSON_NUMBER)) || read_number(p, vi - 1) < 0)
            return 0;
        return vi;
    }
    if (literal(p, "null"))
        return new_value(p, OM_JSON_NULL);
    if (literal(p, "true"))
        return new_value(p, OM_JSON_TRUE);
    if (literal(p, "false"))
        return new_value(p, OM_JSON_FALSE);
    fail(p, "a value expected");
    return 0;
}

void om_json_free(struct om_json *j)
{
    free(j->v);
    free(j->strings);
    memset(j, 0, sizeof(*j));
}

int om_json_parse(struct om_json *j, const char *text, size_t len, char *err, size_t errcap)
{
    struct parser *p = malloc(sizeof(*p));

    memset(j, 0, sizeof(*j));
    if (!p) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    *p = (struct parser){.j = j, .s = text, .len = len, .err = err, .errcap = errcap};
    int rc = 0;
    if (len > OM_JSON_MAX_TEXT) {
        snprintf(err, errcap, "a document of %zu bytes (at most %u)", len, OM_JSON_MAX_TEXT);
        rc = -1;
    } else if (!value(p, 0)) {
        rc = -1;
    } else {
        skip_ws(p);
        if (p->pos != len)
            rc = fail(p, "text after the document");
    }
    free(p);
    if (rc < 0)
        om_json_free(j);
    return rc;
}

const struct om_json_value *om_json_root(const struct om_json *j)
{
    return j->n ? &j->v[0] : NULL;
}

const struct om_json_value *om_json_get(const struct om_json *j, const struct om_json_value *obj,
                                        const char *key)
{
    if (!obj || obj->type != OM_JSON_OBJECT)
        return NULL;
    for (uint32_t m = obj->child; m; m = j->v[m - 1].next)
        if (!strcmp(j->strings + j->v[m - 1].key, key))
            return &j->v[m - 1];
    return NULL;
}

const struct om_json_value *om_json_first(const struct om_json *j, const struct om_json_value *a)
{
    if (!a || (a->type != OM_JSON_ARRAY && a->type != OM_JSON_OBJECT) || !a->child)
        return NULL;
    return &j->v[a->child - 1];
}

const struct om_json_value *om_json_next(const struct om_json *j, const struct om_json_value *v)
{
    return v && v->next ? &j->v[v->next - 1] : NULL;
}

const char *om_json_str(const struct om_json *j, const struct om_json_value *v)
{
    return v && v->type == OM_JSON_STRING ? j->strings + v->str : NULL;
}
