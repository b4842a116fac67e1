#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The remote path of every driver entry point, from api/remote/*.tsv (imported by api/gen.py).

Each family file (api/remote/<family>.tsv) has one row per entry point that openmps answers
in remote mode, tab-separated:

    symbol   form   params   options   # why

form     gen        client stub and server decoder are generated from `params`
         custom     both sides are written by hand: om_r_<symbol> in src/client/api/<family>.c,
                    om_x_<symbol> in src/server/api/<family>.c (declared by the generator,
                    so their signatures are checked against the driver's); the row ends with
                    a column "# why" (what the table's kinds cannot say yet), required
         client     the client side is written by hand (om_r_<symbol>) and uses the server
                    only through the operations named in `via=` (entry points, api/ops.tsv);
                    no entry point of its own
         local      answered in the client (om_r_<symbol>), no server
         alias:SYM  the same implementation as SYM (a _ptsz/_ptds/_v2 variant of one C type)
         shim       answered by the shim itself in every mode (cuInit, cuGetProcAddress)
         passthrough  the real driver in the client (calls that touch no GPU state)

params   for gen rows, one annotation per parameter of the prototype, in order, as
         name:kind (the name must be the prototype's; `-` where it has none); `-` for other
         forms. Kinds (each is one
         class of api/kinds.py, which holds all it means: parsing, sizes, the client's writes,
         the server's checks, the fuzz check and the corpus seed):

  in the request (host values)
    val                 a scalar passed by value (integer, device address unchecked; a float or
                        double travels as its bits); an enum
                        type needs its range:
    val(LO..HI)         ... within [LO, HI] (INVALID_VALUE otherwise)
    val:CHECK           ... accepted by om_check_CHECK(struct call *, uint64_t) on the server (an
                        attribute of those it lets through; its error is the call's)
    flags(MASK)         an unsigned whose bits lie in MASK
    dev                 a device ordinal of the client (its CUDA_VISIBLE_DEVICES numbering),
                        passed as the server's (INVALID_DEVICE where the client has none)
    zero                must be 0 / NULL (a reserved argument); the server passes 0
    ctx                 the CUcontext a graph node runs in: nothing travels (the client's contexts
                        are the shim's tokens), the server passes its current context
    KIND, KIND?         a handle of that kind the calling client owns (? : NULL allowed)
    free.KIND           ... that this call destroys: dropped from the client's set on success
    stream              a stream the call enqueues work on (the client's; its default stream
                        for NULL/legacy/per-thread; docs/architecture.md's concurrency rules)
    stream.query        a stream the call only queries or waits for
    stream.capture      a stream whose capture state the call asks: as stream.query, but the
                        legacy stream (NULL, CU_STREAM_LEGACY) is refused with
                        STREAM_CAPTURE_IMPLICIT while a blocking or the per-thread stream of
                        the client captures
    ptr(LEN)            a device address: [ptr, ptr + LEN) within the client's memory
    in, in?             a struct read through a pointer (sizeof the pointee)
    in:CHECK            ... checked by om_check_CHECK(struct call *, TYPE *) on the server
    arr(COUNT,MAX)      an array of COUNT pointees (COUNT <= MAX) read through a pointer; an
                        array of handles: each must be the client's, of the kind whose C type
                        it is (one kind of api/handles.tsv, or arr(..):CHECK checks them)
    str                 a NUL-terminated string of at most 4095 bytes
  in the answer (written through a pointer by the driver)
    out, out?           a scalar or struct (? : the pointer may be NULL; nothing written)
    out:CHECK           ... turned into the client's terms by om_answer_CHECK(struct call *,
                        TYPE *) before it travels (a device ordinal: out:dev, required for a
                        CUdevice); its error is the call's
    out:CHECK(P,...)    ... om_answer_CHECK(struct call *, TYPE *, P, ...) with those parameters
                        as the server has them (a dev: the server's ordinal; a stream: its
                        CUstream; else the request's u64): an answer the server makes its own
                        (the SM share's count, a memory cap, the priority the client asked)
    new.KIND            a handle this call creates: counted against the client's budget of
                        that kind and owned by the client from then on
    inout               a scalar read and written
    outarr(COUNT,MAX)   COUNT pointees (COUNT an expression of the other parameters; an inout
                        count is read as the capacity, the driver writes the real count)
    outarr?(COUNT,MAX)  ... the pointer may be NULL: the driver gets NULL, only the other
                        outputs travel (cuGraphGetNodes(graph, NULL, &count))
    outbuf(LEN,MAX)     LEN bytes (char or void buffers), at most MAX travel
    list.KIND?(COUNT,MAX)  handles the driver answers (a graph's nodes), each becoming the
                        client's; COUNT an inout after it (capacity in, count out); NULL: only the
                        count; a capacity above MAX: CUDA_ERROR_NOT_SUPPORTED
  LEN, COUNT: C expressions of other parameters' names (integers), naming two of them at most;
  the server refuses values that would wrap around (each at most 2^48, the result 64 bits).
  MAX: a number (or a macro, then the compiler checks the sizes). A row is refused when its
  largest request exceeds OM_CHUNK_BYTES or its largest answer OM_REPLY_MAX.

options  (space-separated) post: the call does not wait for its answer (errors reported at
         the next synchronising call); sync: after the call, wait for its stream (the
         synchronous variants); wrap: the generated client stub is om_rpc_<symbol> and the
         installed function is the hand-written om_r_<symbol> (caching, managed memory);
         via=SYM,...: for client rows, the operations used: entry points, or the server's
         private operations of api/ops.tsv (by name; indexed after the entry points,
         OM_IDX_op_<name>, handled by the hand-written om_x_op_<name> of their family).
         hook: the server's decoder, after its checks, calls the hand-written
         om_hook_<symbol>(struct call *, the driver's arguments as the server has them) in
         place of the driver: it calls the driver itself and keeps what the session keeps
         about the call (a reservation, a budget, an extra reference), and may refuse with a
         check only it can make (the session's own state); the answer's outputs travel as
         their kinds say (declared in src/server/gen/hooks.h).
         ptsz: for a _ptsz alias with a stream parameter: the shim sends its NULL stream as
         CU_STREAM_PER_THREAD (a generated wrapper), where the server must tell the per-thread
         stream from the legacy one (stream.capture).

Handle kinds are api/handles.tsv: kind, C type, destroy entry (- : destroyed by hand-written
code), budget field of struct om_budget.

An entry point without a row is unsupported in remote mode (CUDA_ERROR_NOT_SUPPORTED); its
reason, shown in docs/compatibility.md, is the first row of api/unsupported.tsv (a symbol or a
regular expression, the reason) that matches it, "not yet" where none does.

generate(api) runs on another folder of tables (tests/unit/check_generator.py); besides the
sources it writes tests/fuzz/gen/ (fuzz_exec's check layer for gen rows, and its handle kinds).
"""
import os
import re
import sys

import kinds as kinds_mod
from kinds import TableError, arg_names, fail, floating, fuzz_kind, kind_enum, FUZZ_KINDS

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
FORMS = ("gen", "custom", "client", "local", "shim", "passthrough")
REQ_FIXED_MAX = 1 << 18  # a record's payload (OM_CHUNK_BYTES)


# ------------------------------------------------------------------ inputs

def api_file(api, name):
    """A file of the api folder `api`; the real api/ folder's where `api` has none (a test table
    brings its own remote/ and handles.tsv and uses the driver's prototypes and types)."""
    path = os.path.join(api or HERE, name)
    return path if os.path.exists(path) else os.path.join(HERE, name)


def shown(path):
    """A path as an error names it: relative to the repository when inside it."""
    rel = os.path.relpath(path, ROOT)
    return path if rel.startswith("..") else rel


def load_protos(api=None):
    protos = {}
    for n, line in enumerate(open(api_file(api, "driver_api.tsv")), 1):
        if line.startswith("#") or not line.strip():
            continue
        f = line.rstrip("\n").split("\t")
        protos[f[0]] = (f[1], split_params(f[2]), f[2])
    return protos


def split_params(text):
    if text.strip() in ("void", ""):
        return []
    out = []
    for p in text.split(","):
        p = p.strip()
        m = re.match(r"(.*?)(\w+)\s*(\[\s*\d*\s*\])?$", p)
        if not m:
            out.append((p, "?"))
            continue
        ctype = re.sub(r"\s+", " ", m.group(1).strip())
        if m.group(3):  # an array parameter is a pointer
            ctype += " *"
        ctype = re.sub(r"\s*\*", " *", ctype).replace("* *", "**").strip()
        out.append((ctype, m.group(2)))
    return out


def load_types(api=None):
    types = {}
    for line in open(api_file(api, "types.tsv")):
        if line.startswith("#") or not line.strip():
            continue
        name, cls, detail = line.rstrip("\n").split("\t")
        types[name] = (cls, detail)
    return types


def load_handles(api=None):
    kinds = []
    path = api_file(api, "handles.tsv")
    for n, line in enumerate(open(path), 1):
        if line.startswith("#") or not line.strip():
            continue
        f = line.rstrip("\n").split("\t")
        if len(f) not in (4, 5):
            fail("%s:%d" % (shown(path), n), "expected kind, C type, destroy entry, budget[, "
                 "release hook]")
        hook = f[4] if len(f) == 5 and f[4] != "-" else None
        if hook and hook != "om_release_" + f[0]:
            fail("%s:%d" % (shown(path), n), "the release hook of %s is om_release_%s"
                 % (f[0], f[0]))
        kinds.append({"kind": f[0], "ctype": f[1], "destroy": f[2], "budget": f[3], "line": n,
                      "release": hook})
    return kinds


def load_ops(api=None):
    """api/ops.tsv, the server's private operations: [{name, family, what, where}] in order (a
    test table without one has none)."""
    path = os.path.join(api or HERE, "ops.tsv")
    ops, seen = [], {}
    if not os.path.exists(path):
        return ops
    families = {f[:-4] for f in os.listdir(os.path.join(api or HERE, "remote"))
                if f.endswith(".tsv")}
    for n, line in enumerate(open(path), 1):
        if line.startswith("#") or not line.strip():
            continue
        where = "%s:%d" % (shown(path), n)
        f = line.rstrip("\n").split("\t")
        if len(f) != 3 or not f[2].strip():
            fail(where, "expected name, family, what it does")
        if not re.match(r"^[a-z][a-z0-9_]*$", f[0]):
            fail(where, "%r: an operation's name is lower case (a-z, 0-9, _)" % f[0])
        if f[0] in seen:
            fail(where, "%s is already described at %s" % (f[0], seen[f[0]]))
        if f[1] not in families:
            fail(where, "%s: no family %r (api/remote/%s.tsv)" % (f[0], f[1], f[1]))
        seen[f[0]] = where
        ops.append({"name": f[0], "family": f[1], "what": f[2], "where": where})
    return ops


def load_rows(protos, kinds, api=None, types=None, ops=None):
    rows, seen = [], {}
    op_names = {o["name"] for o in (load_ops(api) if ops is None else ops)}
    folder = os.path.join(api or HERE, "remote")
    for fname in sorted(os.listdir(folder)):
        if not fname.endswith(".tsv"):
            continue
        family = fname[:-4]
        for n, line in enumerate(open(os.path.join(folder, fname)), 1):
            if line.startswith("#") or not line.strip():
                continue
            where = "%s:%d" % (shown(os.path.join(folder, fname)), n)
            f = line.rstrip("\n").split("\t")
            why = f.pop().lstrip("#").strip() if len(f) > 3 and f[-1].startswith("#") else None
            if len(f) < 3 or len(f) > 4:
                fail(where, "expected symbol, form, params[, options][, # why] separated by tabs")
            sym, form, params = f[0], f[1], f[2]
            opts = f[3].split() if len(f) == 4 else []
            if form == "custom" and not why:
                fail(where, "%s: a custom row says why it is not generated (a last column "
                     "\"# reason\")" % sym)
            if sym not in protos:
                fail(where, "%s is not an entry point of api/driver_api.tsv" % sym)
            if sym in seen:
                fail(where, "%s is already described at %s" % (sym, seen[sym]))
            seen[sym] = where
            row = {"sym": sym, "family": family, "form": form, "where": where, "opts": {},
                   "params": [], "why": why}
            for o in opts:
                k, _, v = o.partition("=")
                if k not in ("post", "sync", "wrap", "via", "hook", "ptsz"):
                    fail(where, "unknown option %r" % o)
                row["opts"][k] = v or True
            if form.startswith("alias:"):
                row["form"], row["target"] = "alias", form[6:]
            elif form not in FORMS:
                fail(where, "form %r is none of gen, custom, client, local, alias:SYM, "
                     "shim, passthrough" % form)
            if "ptsz" in row["opts"] and (row["form"] != "alias" or not sym.endswith("_ptsz") or
                                          not any(t in ("CUstream", "const CUlaunchConfig *")
                                                  for t, _ in protos[sym][1])):
                fail(where, "ptsz is for a _ptsz alias with a stream parameter")
            if row["form"] == "gen":
                row["params"] = parse_params(where, sym, params, protos[sym][1], kinds,
                                             types or {})
            elif params != "-":
                fail(where, "only gen rows have parameter annotations (write -)")
            if row["form"] == "client" and "via" not in row["opts"]:
                fail(where, "a client row names the operations it uses (via=SYM,...)")
            if "via" in row["opts"]:
                for v in row["opts"]["via"].split(","):
                    if v not in protos and v not in op_names:
                        fail(where, "via %s: not an entry point nor an operation of "
                             "api/ops.tsv" % v)
            rows.append(row)
    by = {r["sym"]: r for r in rows}
    for r in rows:
        if r["form"] == "alias":
            t = by.get(r["target"])
            if not t or t["form"] == "alias":
                fail(r["where"], "alias of %s, which has no row of its own" % r["target"])
            if [p[0] for p in protos[t["sym"]][1]] != [p[0] for p in protos[r["sym"]][1]]:
                fail(r["where"], "alias of %s, whose parameter types differ" % r["target"])
        for v in (r["opts"].get("via") or "").split(",") if r["opts"].get("via") else []:
            if v in op_names:
                continue
            if v not in by or by[v]["form"] not in ("gen", "custom"):
                fail(r["where"], "via %s, which the server does not execute" % v)
        if r["form"] == "gen":
            check_gen(r, types or {})
    return rows


ANN = re.compile(r"^(\w+):([\w.?]+)(?:\((.*?)\))?(?::(\w+)(?:\(([\w,]*)\))?)?$")


def parse_params(where, sym, text, proto, kinds, types):
    """The parameter objects (api/kinds.py) of a gen row's annotations."""
    anns = [] if text.strip() == "-" else text.split()  # - : a call without parameters
    if len(anns) != len(proto):
        fail(where, "%s has %d parameters, the row annotates %d" % (sym, len(proto), len(anns)))
    out = []
    for (ctype, pname), ann in zip(proto, anns):
        m = ANN.match(ann)
        if not m:
            fail(where, "cannot read the annotation %r" % ann)
        name, kind, args, check, check_args = m.groups()
        if name != pname:
            fail(where, "parameter %s of %s is annotated as %s" % (pname, sym, name))
        cargs = [a for a in (check_args or "").split(",") if a]
        if check_args is not None and kind.rstrip("?") != "out":
            fail(where, "%s: only an out:CHECK takes the call's parameters" % name)
        for a in cargs:
            if a not in [q[1] for q in proto]:
                fail(where, "%s: %s names no parameter of %s" % (name, a, sym))
        out.append(kinds_mod.make(where, name, ctype, kind, args, check, cargs, kinds, types))
    return out


def header_value(rel, name):
    """A size limit #defined in the C headers (N, N * M, with u suffixes)."""
    text = open(os.path.join(ROOT, rel)).read()
    m = re.search(r"#define\s+%s\s+\(?([0-9u *]+)\)?" % name, text)
    v = 1
    for f in m.group(1).replace("u", "").split("*"):
        v *= int(f)
    return v


def worst_sizes(r, types):
    """The largest request and answer a row's call exchanges: bytes the tables tell, and C terms
    for the rest (a struct's size, a MAX that is a macro), which the generated decoder asserts."""
    s = kinds_mod.Sizes()
    for p in r["params"]:
        p.sizes(s, types)
    return s.req, s.ans, s.req_c, s.ans_c


def check_gen(r, types=None):
    types = types or {}
    names = {p.name for p in r["params"]}
    streams = [p for p in r["params"] if p.base in ("stream", "stream.query")]
    if r["opts"].get("sync") and len(streams) != 1:
        fail(r["where"], "sync waits for the call's one stream parameter")
    outs = [p for p in r["params"] if p.reply_size() is not None]
    if r["opts"].get("post") and outs:
        fail(r["where"], "a posted call has no answer: %s is an output" % outs[0].name)
    for p in r["params"]:
        if p.args and p.base in ("ptr", "arr", "outarr", "outbuf", "list"):
            for ident in re.findall(r"[A-Za-z_]\w*", p.args):
                if ident not in names and not ident.isupper() and not ident.startswith("sizeof"):
                    fail(r["where"], "%s: %s names no parameter" % (p.name, ident))
            by_name = {q.name: q for q in r["params"]}
            for ident in arg_names(p.args.split(",")[0], names):
                if not by_name[ident].carries:
                    fail(r["where"], "%s: %s is a %s, not a value the request carries (val, "
                         "flags, dev, inout)" % (p.name, ident, by_name[ident].base))
            length = p.args.split(",")[0]
            if len(arg_names(length, names)) > 2:
                fail(r["where"], "%s: %s names more than two parameters (its bound against "
                     "wrapping around is for two)" % (p.name, length.strip()))
    req, ans, _, _ = worst_sizes(r, types)
    req_max = header_value("include/openmps/ops.h", "OM_CHUNK_BYTES")
    ans_max = header_value("src/server/internal.h", "OM_REPLY_MAX")
    if req > req_max:
        fail(r["where"], "the largest request is %d bytes, more than a record's %d "
             "(OM_CHUNK_BYTES): lower a MAX" % (req, req_max))
    if ans > ans_max:
        fail(r["where"], "the largest answer is %d bytes, more than the server's %d "
             "(OM_REPLY_MAX): lower a MAX" % (ans, ans_max))


# ------------------------------------------------------------------ C text

# A float or double travels as its bits in the u64 (an integer conversion would lose them): the
# helpers each side needs, for the types the rows use (an unused static function is an error).
FLOAT_HELPERS = {
    ("client", "float"): ["static inline uint64_t om_gen_bits_f32(float v)", "{", "    uint32_t b;",
                          "", "    memcpy(&b, &v, sizeof(b));", "    return b;", "}", ""],
    ("client", "double"): ["static inline uint64_t om_gen_bits_f64(double v)", "{",
                           "    uint64_t b;", "", "    memcpy(&b, &v, sizeof(b));", "    return b;",
                           "}", ""],
    ("server", "float"): ["static inline float om_gen_f32(uint64_t b)", "{",
                          "    uint32_t w = (uint32_t)b;", "    float v;", "",
                          "    memcpy(&v, &w, sizeof(v));", "    return v;", "}", ""],
    ("server", "double"): ["static inline double om_gen_f64(uint64_t b)", "{", "    double v;", "",
                           "    memcpy(&v, &b, sizeof(v));", "    return v;", "}", ""],
}


def float_helpers(rows, types, side):
    used = {floating(p.ctype, types) for r in rows if r["form"] == "gen"
            for p in r["params"] if p.base == "val"}
    return [line for t in ("float", "double") if t in used for line in FLOAT_HELPERS[(side, t)]]


def proto_c(sym, protos, name):
    ret, params, _ = protos[sym]
    return "%s %s(%s)" % (ret, name, ", ".join("%s %s" % (t, n) if not t.endswith("*") else
                                                  "%s%s" % (t, n) for t, n in params) or "void")


def fnptr_type(sym, protos):
    ret, params, _ = protos[sym]
    return "%s (*)(%s)" % (ret, ", ".join(t for t, _ in params) or "void")


def client_stub(r, protos, types, name, static):
    """The client side of a gen row: each kind checks and writes its parameter (Kind.put), the
    call goes out, each output kind reads its part of the answer back (Kind.take)."""
    sym = r["sym"]
    lines = ["%s%s" % ("static " if static else "", proto_c(sym, protos, name)), "{"]
    st = kinds_mod.Stub(r)
    for p in r["params"]:
        p.put(st, types)
    reply_parts = [p for p in r["params"] if p.reply_size() is not None]
    # an answer of many handles (list.KIND) is not put on the caller's stack
    heap = any(p.base == "list" for p in reply_parts)
    lines.append("    uint8_t req_buf[%d%s];" % (st.fixed + 8, "".join(" + " + v for v in st.var)))
    lines.append("    struct om_wbuf req = {.p = req_buf, .cap = sizeof(req_buf)};")
    if reply_parts:
        size = " + ".join(p.reply_size() for p in reply_parts)
        lines.append("    const size_t reply_cap = %s;" % size if heap else
                     "    uint8_t reply[%s];" % size)
        lines.append("    uint32_t got = 0;")
        lines.append("    struct om_rbuf in;")
        lines.append("    CUresult rc;")
    lines += st.checks
    lines += st.body
    if r["opts"].get("post"):
        lines.append("    return om_rpost(OM_IDX_%s, &req);" % sym)
    elif heap:
        lines.append("    uint8_t *reply = malloc(reply_cap);")
        lines.append("    if (!reply)\n        return CUDA_ERROR_OUT_OF_MEMORY;")
        lines.append("    rc = om_rcall(OM_IDX_%s, &req, reply, reply_cap, &got);" % sym)
        lines.append("    if (rc == CUDA_SUCCESS) {")
        lines.append("        in = (struct om_rbuf){.p = reply, .len = got};")
        for p in reply_parts:
            lines += ["    " + t.replace("\n", "\n    ") for t in p.take(r)]
        lines.append("        rc = in.bad ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;")
        lines.append("    }")
        lines.append("    free(reply);")
        lines.append("    return rc;")
    elif reply_parts:
        lines.append("    rc = om_rcall(OM_IDX_%s, &req, reply, sizeof(reply), &got);" % sym)
        lines.append("    if (rc != CUDA_SUCCESS)\n        return rc;")
        lines.append("    in = (struct om_rbuf){.p = reply, .len = got};")
        for p in reply_parts:
            lines += p.take(r)
        lines.append("    return in.bad ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;")
    else:
        lines.append("    return om_rcall(OM_IDX_%s, &req, NULL, 0, NULL);" % sym)
    lines.append("}")
    return "\n".join(lines)


def server_decoder(r, protos, types, kinds):
    """x_<symbol>: reads every argument, checks each against what the calling client owns, then
    calls the real driver; checks that fail before anything is allocated return at once, later
    ones leave through `out`, which frees what was allocated (Kind.decode, Kind.cleanup)."""
    sym, ps = r["sym"], r["params"]
    if any(p.base == "out" and p.check for p in ps) and any(p.base == "new" for p in ps):
        fail(r["where"], "an out:CHECK beside a new handle (a refused answer would leak it)")
    d = kinds_mod.Decoder(r)
    for p in ps:
        p.decode(d, types)
    for p in ps:
        if hasattr(p, "fix_args"):
            p.fix_args(d)
    L = []
    req, ans, req_c, ans_c = worst_sizes(r, types)
    req_c = req_c if any("*" in t for t in req_c) else []  # a lone struct fits: arrays may not
    ans_c = ans_c if any("*" in t or "sizeof" not in t for t in ans_c) else []
    if req_c:
        L.append("_Static_assert(%d + %s <= OM_CHUNK_BYTES, \"%s: its largest request exceeds a "
                 "record\");" % (req, " + ".join(req_c), sym))
    if ans_c:
        L.append("_Static_assert(%d + %s <= OM_REPLY_MAX, \"%s: its largest answer exceeds the "
                 "reply\");" % (ans, " + ".join(ans_c), sym))
    L += ["static CUresult x_%s(struct call *c)" % sym, "{"]
    L += d.reads + d.decls
    L += ["    CUresult rc = ARGS_OK(c);", "", "    if (rc != CUDA_SUCCESS)", "        return rc;"]
    L += d.checks + d.allocs + d.streams + d.before_call
    if r["opts"].get("hook"):
        L.append("    rc = om_hook_%s(%s);" % (sym, ", ".join(["c"] + d.args)))
    else:
        L.append("    rc = ((%s)REAL(%s))(%s);" % (fnptr_type(sym, protos), sym, ", ".join(d.args)))
    if r["opts"].get("sync"):
        sv = next(p.name for p in ps if p.base in ("stream", "stream.query"))
        L.append("    if (rc == CUDA_SUCCESS)\n        rc = om_wait_stream(s_%s);" % sv)
        L.append("    rc = om_take_call_error(c, rc);")
    if d.answers:
        L += ["    if (rc == CUDA_SUCCESS) {"] + d.answers + ["    }"]
    if d.ok:
        L += ["    if (rc == CUDA_SUCCESS) {"] + d.ok + ["    }"]
    if d.gotos:
        L.append("out:")
    for p in sorted(ps, key=lambda p: p.base != "arr"):  # the arrays read, then those answered
        L += p.cleanup()
    L += ["    return rc;", "}"]
    return "\n".join(L)

# ------------------------------------------------------------------ outputs

def banner(what):
    return ["/* SPDX-License-Identifier: MIT */",
            "/* %s, generated by api/gen.py from the tables in api/remote/: do not edit. */" % what]


def abi_names():
    text = open(os.path.join(ROOT, "include", "openmps", "cuda_abi.h")).read()
    names = set(re.findall(r"typedef[^;{]*?\b(\w+)\s*;", text))
    names |= set(re.findall(r"\}\s*(\w+)\s*;", text))
    return names


def types_h(types, kinds):
    have = abi_names()
    L = banner("The CUDA types of the driver's prototypes that cuda_abi.h does not declare")
    L += ["#ifndef OM_GEN_TYPES_H", "#define OM_GEN_TYPES_H", "", "#include <stddef.h>",
          "#include <stdint.h>", "", "#include \"openmps/cuda_abi.h\"", ""]
    order = {"scalar": 0, "enum": 1, "handle": 2, "struct": 3, "union": 3, "fnptr": 4}
    for name, (cls, detail) in sorted(types.items(), key=lambda kv: (order.get(kv[1][0], 9),
                                                                     kv[0])):
        if name in have:
            continue
        if cls == "scalar":
            L.append("typedef %s %s;" % (detail, name))
        elif cls == "enum":
            L.append("typedef int %s;" % name)
        elif cls == "handle":
            L.append("typedef struct %s_st *%s;" % (name, name))
        elif cls in ("struct", "union"):
            L.append("typedef %s om_%s %s; /* layout in cuda_abi.h where it is marshalled */"
                     % (cls, name, name))
        elif cls == "fnptr":
            L.append("typedef %s;" % detail.replace("(*)", "(*%s)" % name, 1))
    L += ["", "#endif", ""]
    return "\n".join(L)


def handles_h(kinds):
    L = banner("The kinds of handle a client owns in the server")
    L += ["#ifndef OM_GEN_HANDLES_H", "#define OM_GEN_HANDLES_H", "", "enum om_handle_kind {"]
    for k in kinds:
        L.append("    %s," % kind_enum(k["kind"]))
    L += ["    OM_HANDLE_KINDS", "};", "",
          "/* X(kind, name, destroy entry index or -1, budget field) */",
          "#define OM_HANDLE_KIND_TABLE(X) \\"]
    for i, k in enumerate(kinds):
        L.append("    X(%s, \"%s\", %s, %s)%s" % (
            kind_enum(k["kind"]), k["kind"],
            "OM_IDX_" + k["destroy"] if k["destroy"] != "-" else "-1", k["budget"],
            " \\" if i + 1 < len(kinds) else ""))
    L += ["", "#endif", ""]
    return "\n".join(L)


def client_c(rows, protos, types):
    """src/client/gen/stubs.c: the stub of every gen row (om_rpc_<symbol>): a call of the
    transport and nothing else, so hand-written code of any layer above the transport may call
    it."""
    L = banner("Remote mode's client stubs")
    L += ["#include <stdint.h>", "#include <stdlib.h>", "#include <string.h>", "",
          "#include \"../../common/gen/entries.h\"",
          "#include \"../../common/wire.h\"",
          "#include \"../remote.h\"", "#include \"stubs.h\"", ""]
    L += float_helpers(rows, types, "client")
    for r in rows:
        if r["form"] == "gen":
            L.append(client_stub(r, protos, types, "om_rpc_" + r["sym"], False))
            L.append("")
    return "\n".join(L)


def ptsz_wrapper(r, protos, fn):
    """The own function of a _ptsz alias with the ptsz option, whose NULL stream must reach the
    server as what it is: the calling thread's per-thread default stream, not the legacy one.
    It passes CU_STREAM_PER_THREAD for a NULL stream (a parameter, or a launch configuration's
    hStream) to the plain form's implementation (the capture queries: the legacy stream is
    refused while a blocking stream captures, the per-thread one is not; src/server/route.c).
    None: a row without the option (its NULL goes as NULL: the server serves both default
    streams with one stream)."""
    if r["form"] != "alias" or "ptsz" not in r["opts"]:
        return None
    ret, params, _ = protos[r["sym"]]
    fixes, args = [], []
    for i, (t, n) in enumerate(params):
        if t == "CUstream":
            fixes.append("    if (!%s)\n        %s = CU_STREAM_PER_THREAD;" % (n, n))
            args.append(n)
        elif t == "const CUlaunchConfig *":
            fixes.append("    CUlaunchConfig per_thread;\n"
                         "    if (%s && !%s->hStream) {\n"
                         "        per_thread = *%s;\n"
                         "        per_thread.hStream = CU_STREAM_PER_THREAD;\n"
                         "        %s = &per_thread;\n"
                         "    }" % (n, n, n, n))
            args.append(n)
        else:
            args.append(n)
    if not fixes:
        return None
    name = "om_ptsz_" + r["sym"]
    body = [("static " + proto_c(r["sym"], protos, name)), "{"] + fixes + \
        ["    return %s(%s);" % (fn, ", ".join(args)), "}", ""]
    return name, body


def client_install_c(rows, protos):
    """src/client/gen/remote_stubs.c: every row's installed implementation (om_remote_set)."""
    L = banner("Remote mode's table of implementations")
    L += ["#include \"../../common/gen/entries.h\"", "#include \"../remote.h\"",
          "#include \"remote_decls.h\"", ""]
    sets = []
    for r in rows:
        if r["form"] in ("passthrough", "shim"):
            continue
        target = r["target"] if r["form"] == "alias" else r["sym"]
        t = next(x for x in rows if x["sym"] == target)
        fn = ("om_rpc_" if t["form"] == "gen" and not t["opts"].get("wrap") else "om_r_") + target
        w = ptsz_wrapper(r, protos, fn)
        if w:
            fn = w[0]
            L += w[1]
        sets.append("    om_remote_set(OM_IDX_%s, (void *)%s);" % (r["sym"], fn))
    L += ["void om_remote_gen_install(void)", "{"] + sets + ["}", ""]
    return "\n".join(L)


def client_owns(r):
    """Whether a row's installed client function is hand-written (om_r_<symbol>)."""
    return r["form"] in ("custom", "client", "local") or bool(r["opts"].get("wrap"))


def client_decls(rows, protos):
    L = banner("The hand-written client implementations the table names")
    L += ["#ifndef OM_GEN_REMOTE_DECLS_H", "#define OM_GEN_REMOTE_DECLS_H", "",
          "#include \"stubs.h\"", "",
          "/* Every family's functions, for the table that installs them; a family's own file,",
          " * where CMakeLists.txt enforces its family, sees its own only (gen/fam_<family>.h). */",
          "#ifdef OM_FAMILY_DECLS", "#include OM_FAMILY_DECLS", "#else"]
    for r in rows:
        if client_owns(r):
            L.append("%s; /* %s */" % (proto_c(r["sym"], protos, "om_r_" + r["sym"]), r["family"]))
    L += ["#endif", "", "#endif", ""]
    return "\n".join(L)


def client_stubs_h(rows, protos):
    L = banner("The generated client stubs, callable from hand-written code")
    L += ["#ifndef OM_GEN_STUBS_H", "#define OM_GEN_STUBS_H", "",
          "#include \"../../common/gen/types.h\"", "",
          "/* The generated stubs (stubs.c): the call on the wire, nothing else; hand-written",
          " * code calls them instead of writing a row's request again. A wrap row's installed",
          " * function is its hand-written om_r_, which calls its stub. */"]
    for r in rows:
        if r["form"] == "gen":
            L.append("%s;" % proto_c(r["sym"], protos, "om_rpc_" + r["sym"]))
    L += ["", "/* Installs every row's implementation (om_remote_set; remote_stubs.c). */",
          "void om_remote_gen_install(void);", "", "#endif", ""]
    return "\n".join(L)


def client_calls_h(rows, protos):
    """src/client/gen/calls.h: another family's hand-written function called through the table of
    installed implementations (OM_CALL(symbol)(...)): a family's file sees its own functions'
    declarations only, so that one of another family defined there does not compile."""
    L = banner("Calls of another family's hand-written client functions")
    L += ["#ifndef OM_GEN_CALLS_H", "#define OM_GEN_CALLS_H", "",
          "#include \"../../common/gen/entries.h\"", "#include \"../../common/gen/types.h\"", "",
          "void *om_remote_entry(int index); /* remote.c: the installed implementation */", "",
          "/* OM_CALL(cuMemAlloc_v2)(&p, n): the installed om_r_cuMemAlloc_v2. */",
          "#define OM_CALL(sym) ((om_fn_##sym)om_remote_entry(OM_IDX_##sym))", ""]
    for r in rows:
        if client_owns(r):
            ret, params, _ = protos[r["sym"]]
            L.append("typedef %s (*om_fn_%s)(%s);" % (ret, r["sym"],
                                                    ", ".join(t for t, _ in params) or "void"))
    L += ["", "#endif", ""]
    return "\n".join(L)


def families(api=None):
    folder = os.path.join(api or HERE, "remote")
    return sorted(f[:-4] for f in os.listdir(folder) if f.endswith(".tsv"))


def family_headers(rows, protos, ops, fams):
    """path -> text: src/{client,server}/gen/fam_<family>.h, the hand-written functions of one
    family's rows, each included by that family's file only (src/{client,server}/api/<family>.c):
    built with -Wmissing-prototypes, a function of another family there has no prototype."""
    out = {}
    for fam in fams:
        guard = "OM_GEN_FAM_%s_H" % fam.upper()
        decls = ["%s;" % proto_c(r["sym"], protos, "om_r_" + r["sym"]) for r in rows
                 if r["family"] == fam and client_owns(r)]
        where = ("src/client/api/%s.c" % fam if decls else
                 "none: every row of it is generated on this side")
        L = banner("The hand-written client functions of the %s family (%s)" % (fam, where))
        L += ["#ifndef " + guard, "#define " + guard, "", "#include \"stubs.h\"", ""]
        L += decls + ["", "#endif", ""]
        out["src/client/gen/fam_%s.h" % fam] = "\n".join(L)
        decls = ["CUresult om_x_%s(struct call *c);" % r["sym"] for r in rows
                 if r["family"] == fam and r["form"] == "custom"]
        decls += ["CUresult om_x_op_%s(struct call *c); /* api/ops.tsv */" % o["name"]
                  for o in ops if o["family"] == fam]
        where = ("src/server/api/%s.c" % fam if decls else
                 "none: every row of it is generated on this side")
        L = banner("The hand-written server handlers of the %s family (%s)" % (fam, where))
        L += ["#ifndef " + guard, "#define " + guard, "", "#include \"hooks.h\"", "",
              "struct call;", ""]
        L += decls + ["", "#endif", ""]
        out["src/server/gen/fam_%s.h" % fam] = "\n".join(L)
    return out


def server_c(rows, protos, types, kinds, ops=()):
    L = banner("The server's decoders of generated entry points and the dispatch table")
    L += ["#include <stdint.h>", "#include <stdlib.h>", "#include <string.h>", "",
          "#include \"../exec.h\"", "#include \"openmps/ops.h\"", "",
          "/* A LEN or COUNT computed from several client values: each value at most this (256 TiB,",
          " * more than any device range or count), the result computed in 128 bits. */",
          "#define OM_GEN_LEN_MAX (1ull << 48)", "__extension__ typedef unsigned __int128 om_u128;",
          ""]
    L += float_helpers(rows, types, "server")
    for r in rows:
        if r["form"] == "gen":
            L.append(server_decoder(r, protos, types, kinds))
            L.append("")
    L += ["const om_handler om_handlers[OM_HANDLER_COUNT] = {"]
    for r in rows:
        if r["form"] == "gen":
            L.append("    [OM_IDX_%s] = x_%s," % (r["sym"], r["sym"]))
        elif r["form"] == "custom":
            L.append("    [OM_IDX_%s] = om_x_%s," % (r["sym"], r["sym"]))
    for o in ops:
        L.append("    [OM_IDX_op_%s] = om_x_op_%s," % (o["name"], o["name"]))
    L += ["};", ""]
    return "\n".join(L)


def release_hooks(rows):
    """[(kind, family)] of the release hooks gen rows call, each in the family of its first row."""
    out = {}
    for r in rows:
        for p in r["params"] if r["form"] == "gen" else []:
            if p.base == "free" and p.release:
                out.setdefault(p.hkind, r["family"])
    return sorted(out.items())


def check_hooks(rows):
    """[(declaration, family)] of the om_check_ and om_answer_ hooks gen rows name, sorted."""
    out = {}
    for r in rows:
        if r["form"] != "gen":
            continue
        by = {p.name: p for p in r["params"]}
        for p in r["params"]:
            if not p.check or p.base not in ("in", "arr", "out", "val"):
                continue
            if p.base == "val":
                decl = "CUresult om_check_%s(struct call *c, uint64_t v);" % p.check
            elif p.base == "out":
                extra = "".join(", %s" % ("int" if by[a].base == "dev" else "CUstream" if by[a].base
                                          in ("stream", "stream.query") else "uint64_t")
                                for a in p.check_args)
                decl = "CUresult om_answer_%s(struct call *c, %s *v%s);" % (p.check, p.el, extra)
            elif p.base == "arr":
                decl = "CUresult om_check_%s(struct call *c, %s *v, size_t n);" % (p.check, p.el)
            else:
                decl = "CUresult om_check_%s(struct call *c, %s *v);" % (p.check, p.el)
            out.setdefault(decl, r["family"])
    return sorted(out.items())


def hook_decls(rows, protos):
    """The om_hook_<symbol> declarations of the rows with the option hook."""
    out = []
    for r in rows:
        if r["form"] == "gen" and r["opts"].get("hook"):
            ret, params, _ = protos[r["sym"]]
            out.append("%s om_hook_%s(struct call *c%s);" % (ret, r["sym"], "".join(
                ", %s %s" % (t, n) if not t.endswith("*") else ", %s%s" % (t, n)
                for t, n in params)))
    return out


def server_hooks(rows, protos):
    """src/server/gen/hooks.h: the hand-written hooks generated decoders call (helpers of a kind,
    not handlers of a family: any file may define one)."""
    L = banner("The hooks the generated decoders call")
    L += ["#ifndef OM_GEN_HOOKS_H", "#define OM_GEN_HOOKS_H", "", "#include <stddef.h>",
          "#include <stdint.h>", "", "#include \"../../common/gen/types.h\"", "", "struct call;", ""]
    checks = check_hooks(rows)
    if checks:
        L += ["/* The check and answer hooks the rows name (val:CHECK, in:CHECK, arr(..):CHECK,",
              " * out:CHECK): an error refuses the call. */"]
    L += [decl for decl, _ in checks]
    if any(p.base == "ctx" for r in rows if r["form"] == "gen" for p in r["params"]):
        L += ["", "/* ctx: the context a node runs in, the server's current one (graphstate.c). */",
              "CUcontext om_graph_server_context(void);"]
    calls = hook_decls(rows, protos)
    if calls:
        L += ["", "/* The rows with the option hook: called in place of the driver, after the decoder's",
              " * checks, with the driver's arguments; they call the driver themselves. */"]
    L += calls
    hooks = release_hooks(rows)
    if hooks:
        L += ["", "/* The release hooks of api/handles.tsv: called by a generated decoder with a handle",
              " * of that kind the call destroys (free.KIND), after the checks, just before the",
              " * driver; CUDA_SUCCESS: the driver destroys it; OM_RELEASE_KEPT: the call succeeds",
              " * without the driver (the hook released what the client held); another error: the",
              " * call's. */", "#define OM_RELEASE_KEPT ((CUresult)-1)"]
    for kind, _ in hooks:
        L.append("CUresult om_release_%s(struct call *c, uint64_t h);" % kind)
    L += ["", "#endif", ""]
    return "\n".join(L)


def server_decls(rows, ops=()):
    L = banner("The hand-written server handlers the table names")
    L += ["#ifndef OM_GEN_HANDLERS_H", "#define OM_GEN_HANDLERS_H", "", "#include \"hooks.h\"", "",
          "struct call;", ""]
    L += ["/* Every family's handlers, for the dispatch table; a family's own file, where",
          " * CMakeLists.txt enforces its family, sees its own only (gen/fam_<family>.h). */",
          "#ifdef OM_FAMILY_DECLS", "#include OM_FAMILY_DECLS", "#else"]
    for r in rows:
        if r["form"] == "custom":
            L.append("CUresult om_x_%s(struct call *c); /* %s */" % (r["sym"], r["family"]))
    if ops:
        L += ["", "/* The private operations of api/ops.tsv. */"]
    for o in ops:
        L.append("CUresult om_x_op_%s(struct call *c); /* %s */" % (o["name"], o["family"]))
    L += ["#endif", "", "#endif", ""]
    return "\n".join(L)


def fuzz_kinds_h(kinds):
    L = banner("The handle kinds of api/handles.tsv that tests/fuzz/fuzz_exec.c has no kind of")
    L += ["/* X(enum constant, name) */", "#define OM_FUZZ_GEN_KINDS(X)%s" % (" \\" if any(
        k["kind"] not in FUZZ_KINDS for k in kinds) else "")]
    extra = [k for k in kinds if k["kind"] not in FUZZ_KINDS]
    for i, k in enumerate(extra):
        L.append("    X(%s, \"%s\")%s" % (fuzz_kind(k["kind"]), k["kind"],
                                          " \\" if i + 1 < len(extra) else ""))
    L.append("")
    return "\n".join(L)


def fuzz_wrapper(r, protos, types):
    """g_<symbol>: before the driver (the double, or fuzz_exec.c's hand-written wrapper) is
    called, every handle, stream and device range the decoder passes must be the fuzzed
    session's; handles the call makes become its own, those it destroys are forgotten
    (Kind.fuzz)."""
    sym, ps = r["sym"], r["params"]
    f = kinds_mod.Fuzz(r)
    for p in ps:
        p.fuzz(f)
    L = ["static %s" % proto_c(sym, protos, "g_" + sym), "{", "    CUresult rc;", "",
         "    ENTER(%s);" % sym] + f.before
    L.append("    rc = ((%s)gen_next[OM_IDX_%s])(%s);" % (fnptr_type(sym, protos), sym,
                                                       ", ".join(p.name for p in ps)))
    if f.after:
        L += ["    if (rc == CUDA_SUCCESS) {"] + f.after + ["    }"]
    L += ["    return rc;", "}"]
    return "\n".join(L)


def fuzz_checks_c(rows, protos, types):
    L = banner("tests/fuzz/fuzz_exec.c's check layer for the generated rows (included there)")
    L += ["", "/* The entry each generated wrapper calls: the double's, or a hand-written wrapper. */",
          "static void *gen_next[OM_ENTRY_COUNT];", ""]
    gen = [r for r in rows if r["form"] == "gen"]
    for r in gen:
        L += [fuzz_wrapper(r, protos, types), ""]
    L += ["static const struct {", "    int index;", "    void *wrapper;",
          "} gen_wrappers[] = {"]
    L += ["    {OM_IDX_%s, (void *)g_%s}," % (r["sym"], r["sym"]) for r in gen]
    if not gen:
        L.append("    {-1, NULL},")
    L += ["};", ""]
    return "\n".join(L)


def modes(rows):
    """symbol -> mode, for entries.h."""
    out = {}
    for r in rows:
        f = r["form"] if r["form"] != "alias" else None
        if f is None:
            continue
        out[r["sym"]] = {"gen": "remote", "custom": "remote", "client": "remote",
                         "local": "local", "shim": "local", "passthrough": "passthrough"}[f]
    for r in rows:
        if r["form"] == "alias":
            out[r["sym"]] = out[r["target"]]
    return out


def compat_md(rows, protos, reasons, ops=(), notes=""):
    by = {r["sym"]: r for r in rows}
    counts = {}
    L = ["# Compatibility: every driver entry point and how openmps treats it",
         "",
         "Generated by `api/gen.py` from `api/driver_api.tsv` and `api/remote/*.tsv`, and from "
         "`api/compatibility-notes.md` (the sections after the tables): do not edit.",
         "",
         "In remote mode (a daemon answers), each entry point of the CUDA 13.0 driver is one of:",
         "",
         "* **generated** — its client stub and the server's checking decoder are generated from "
         "its row;",
         "* **custom** — written by hand on both sides (src/client/api/, src/server/api/), named "
         "in the table;",
         "* **client** — written in the client, using the server through other entry points;",
         "* **local** — answered in the client (contexts, device counts);",
         "* **shim** — the shim's own answer in every mode (`cuInit`, `cuGetProcAddress`);",
         "* **alias** — the implementation of another variant of the same call;",
         "* **passthrough** — the real driver in the client (touches no GPU state);",
         "* **unsupported** — `CUDA_ERROR_NOT_SUPPORTED`, its name logged once.",
         "",
         "In passthrough mode (no daemon) every entry point is the real driver's.",
         ""]
    body = []
    for sym in sorted(protos):
        r = by.get(sym)
        if not r:
            how, fam, note = "unsupported", "", reason(sym, reasons)
            if note != "not yet":
                counts["with a reason"] = counts.get("with a reason", 0) + 1
        else:
            how = {"gen": "generated"}.get(r["form"], r["form"])
            fam = r["family"]
            note = ("of `%s`" % r["target"]) if r["form"] == "alias" else \
                ("via " + ", ".join("`%s`" % v for v in r["opts"]["via"].split(","))
                 if r["opts"].get("via") else r.get("why") or "")
        counts[how] = counts.get(how, 0) + 1
        body.append("| `%s` | %s | %s | %s |" % (sym, how, fam, note))
    L.append("| treatment | entry points |")
    L.append("|---|---|")
    for k in ("generated", "custom", "client", "local", "shim", "alias", "passthrough",
              "unsupported"):
        L.append("| %s | %d |" % (k, counts.get(k, 0)))
    L.append("| all | %d |" % len(protos))
    L += ["", "Of the %d unsupported, %d have a reason (api/unsupported.tsv), %d are \"not yet\"."
          % (counts.get("unsupported", 0), counts.get("with a reason", 0),
             counts.get("unsupported", 0) - counts.get("with a reason", 0))]
    L += ["", "| entry point | treatment | family | note |", "|---|---|---|---|"] + body + [""]
    if ops:
        L += ["## The server's private operations", "",
              "Calls of the client that are no driver entry point (`api/ops.tsv`); the rows above "
              "name those they use (via).", "", "| operation | family | what it does |",
              "|---|---|---|"]
        L += ["| `%s` | %s | %s |" % (o["name"], o["family"], o["what"]) for o in ops] + [""]
    if notes:
        L += [notes.rstrip("\n"), ""]
    return "\n".join(L)


def load_reasons(api=None):
    """api/unsupported.tsv: (compiled pattern, reason, where); a plain symbol matches itself."""
    out = []
    path = api_file(api, "unsupported.tsv")
    for n, line in enumerate(open(path), 1):
        if line.startswith("#") or not line.strip():
            continue
        where = "%s:%d" % (shown(path), n)
        f = line.rstrip("\n").split("\t")
        if len(f) != 2 or not f[1].strip():
            fail(where, "expected a symbol or regular expression, a reason")
        pat = "^%s$" % f[0] if re.match(r"^\w+$", f[0]) else f[0]
        try:
            out.append((re.compile(pat), f[1], where))
        except re.error as e:
            fail(where, "%r is not a regular expression: %s" % (f[0], e))
    return out


def load_notes(api=None):
    """api/compatibility-notes.md: hand-written sections appended to docs/compatibility.md (what
    differs beyond single entry points, and how other projects' test suites fare)."""
    path = api_file(api, "compatibility-notes.md")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        return f.read()


def reason(sym, reasons):
    for pat, why, _ in reasons:
        if pat.search(sym):
            return why
    return "not yet"


def generate(api=None):
    """path (relative to ROOT) -> text, and the modes for entries.h. `api`: the folder of the
    tables (remote/, handles.tsv; driver_api.tsv and types.tsv where it has them), api/ when
    None; tests/unit/check_generator.py runs it on a small table of its own."""
    protos = load_protos(api)
    types = load_types(api)
    kinds = load_handles(api)
    ops = load_ops(api)
    rows = load_rows(protos, kinds, api, types, ops)
    reasons = load_reasons(api)
    out = {
        "src/common/gen/types.h": types_h(types, kinds),
        "src/server/gen/handles.h": handles_h(kinds),
        "src/client/gen/stubs.c": client_c(rows, protos, types),
        "src/client/gen/remote_stubs.c": client_install_c(rows, protos),
        "src/client/gen/remote_decls.h": client_decls(rows, protos),
        "src/client/gen/stubs.h": client_stubs_h(rows, protos),
        "src/client/gen/calls.h": client_calls_h(rows, protos),
        "src/server/gen/decoders.c": server_c(rows, protos, types, kinds, ops),
        "src/server/gen/handlers.h": server_decls(rows, ops),
        "src/server/gen/hooks.h": server_hooks(rows, protos),
        "docs/compatibility.md": compat_md(rows, protos, reasons, ops, load_notes(api)),
        "tests/fuzz/gen/kinds.h": fuzz_kinds_h(kinds),
        "tests/fuzz/gen/checks.c": fuzz_checks_c(rows, protos, types),
    }
    out.update(family_headers(rows, protos, ops, families(api)))
    return out, modes(rows)


if __name__ == "__main__":
    try:
        generate()
    except TableError as e:
        sys.exit(str(e))
