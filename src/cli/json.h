/* SPDX-License-Identifier: MIT */
/* A small, strict JSON reader for what the control daemon writes (openmps stats --json,
 * src/control/stats.c), read by openmps top (top.c). Every bound is fixed here: the text's
 * length, the nesting, a string's length, the members of one object, the values in all. */
#ifndef OM_CLI_JSON_H
#define OM_CLI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OM_JSON_MAX_TEXT (64u << 20)  /* bytes of one document */
#define OM_JSON_MAX_DEPTH 8           /* the daemon writes 4: {clients: [{devices: [{...}]}]} */
#define OM_JSON_MAX_STRING 4096       /* bytes of one decoded string (a key or a value) */
#define OM_JSON_MAX_MEMBERS 256       /* members of one object (keys are checked unique) */
#define OM_JSON_MAX_VALUES (1u << 20) /* values in one document */

enum om_json_type {
    OM_JSON_NULL,
    OM_JSON_FALSE,
    OM_JSON_TRUE,
    OM_JSON_NUMBER,
    OM_JSON_STRING,
    OM_JSON_ARRAY,
    OM_JSON_OBJECT,
};

/* One value. Values are kept in one array, the document's root first; a value's children (an
 * array's elements, an object's members) are linked through `next`; index 0 ends a list (the
 * root is never a child). */
struct om_json_value {
    uint8_t type;   /* enum om_json_type */
    bool is_uint;   /* a number written as a non-negative integer that fits 64 bits: `u` */
    uint32_t child; /* the first element or member, 0: none */
    uint32_t next;  /* the next sibling, 0: none */
    uint32_t key;   /* a member's key: offset in the document's strings */
    uint32_t str;   /* a string's text: offset in the document's strings (NUL-terminated) */
    uint64_t u;     /* is_uint: the number exactly */
    double num;     /* a number */
};

struct om_json {
    struct om_json_value *v;
    uint32_t n, cap;
    char *strings; /* the keys and strings, each NUL-terminated */
    size_t slen, scap;
};

/* Reads `len` bytes of text (no NUL needed) into *j: 0, or -1 with the reason, naming the byte
 * offset where it is, in err. A document that fails leaves *j empty (om_json_free is safe). */
int om_json_parse(struct om_json *j, const char *text, size_t len, char *err, size_t errcap);
void om_json_free(struct om_json *j);

/* The root (NULL for an empty document). */
const struct om_json_value *om_json_root(const struct om_json *j);
/* Object `obj`'s member `key`, or NULL (obj NULL or not an object: NULL). */
const struct om_json_value *om_json_get(const struct om_json *j, const struct om_json_value *obj,
                                        const char *key);
/* An array's first element and an element's next sibling, NULL at the end. */
const struct om_json_value *om_json_first(const struct om_json *j, const struct om_json_value *a);
const struct om_json_value *om_json_next(const struct om_json *j, const struct om_json_value *v);
/* A string's text, or NULL where v is not a string. */
const char *om_json_str(const struct om_json *j, const struct om_json_value *v);

#endif
