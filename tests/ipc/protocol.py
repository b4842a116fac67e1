# SPDX-License-Identifier: MIT
"""The wire protocol's constants, read at test time from the C header that defines them
(include/openmps/protocol.h), so the IPC tests never carry a copy that can go stale.

MAGIC, MAJOR, MINOR: the framing header's fields; MSG: the message types by name (its
OM_MSG_TYPES list); HELLO_SIZE: the bytes of struct om_hello, laid out as a C compiler on the
targets (x86-64, aarch64) lays it out: each field at its natural alignment.
"""
import os
import re

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "include",
                      "openmps", "protocol.h")
_SCALARS = {"uint8_t": 1, "uint16_t": 2, "uint32_t": 4, "uint64_t": 8, "int32_t": 4,
            "int64_t": 8, "char": 1}


def _text():
    with open(HEADER) as f:
        return re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)  # comments out


def _defines(text):
    out = {}
    for name, value in re.findall(r"^#define\s+(\w+)\s+(0x[0-9a-fA-F]+|\d+)u?\s*$", text, re.M):
        out[name] = int(value, 0)
    return out


def _struct_layout(text, defines, name, known):
    """(size, alignment) of struct NAME from its fields: scalars, arrays of them, and structs
    laid out before it. Anything else is an error: a new kind of field must be taught here."""
    m = re.search(r"^struct\s+%s\s*\{(.*?)^\};" % name, text, re.M | re.S)
    if not m:
        raise ValueError("struct %s not found in %s" % (name, HEADER))
    size = align = 0
    for decl in filter(None, (d.strip() for d in m.group(1).split(";"))):
        f = re.fullmatch(r"(struct\s+\w+|\w+)\s+(\w+)(?:\[(\w+)\])?", decl)
        if not f:
            raise ValueError("struct %s: field %r not understood" % (name, decl))
        ftype, count = f.group(1), f.group(3)
        if ftype.startswith("struct"):
            fsize, falign = known[ftype.split()[1]]
        else:
            fsize = falign = _SCALARS[ftype]
        n = 1 if count is None else (int(count) if count.isdigit() else defines[count])
        size = (size + falign - 1) // falign * falign + fsize * n
        align = max(align, falign)
    return (size + align - 1) // align * align, align


def _read():
    text = _text()
    d = _defines(text)
    types = re.search(r"^#define OM_MSG_TYPES\(X\)((?:.*\\\n)*.*)$", text, re.M)
    msg = {n: int(v) for n, v in re.findall(r"X\((\w+),\s*(\d+)\)", types.group(1))}
    layouts = {}
    for s in ("om_limits", "om_hello"):
        layouts[s] = _struct_layout(text, d, s, layouts)
    return d["OM_PROTO_MAGIC"], d["OM_PROTO_MAJOR"], d["OM_PROTO_MINOR"], msg, \
        layouts["om_hello"][0]


MAGIC, MAJOR, MINOR, MSG, HELLO_SIZE = _read()
