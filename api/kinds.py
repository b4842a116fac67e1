# SPDX-License-Identifier: MIT
"""The vocabulary of api/remote/*.tsv by kind: one class per parameter kind (imported by
api/remote.py and tests/fuzz/make_corpus.py).

Everything one kind means lives in its class, side by side:

    parse      check the annotation against the prototype (errors name the table's line)
    sizes      its share of the largest request and answer (Sizes)
    put        the client stub: its checks and how it is written into the request (Stub)
    reply_size, take   the client stub: its room in the answer and how it is read back
    decode     the server's decoder: read, check against what the client owns, pass (Decoder)
    cleanup    the decoder's frees on the way out
    fuzz       tests/fuzz/gen/checks.c: what the check layer asserts before the driver runs
    seed       tests/fuzz/make_corpus.py: the bytes of a request, well-formed or hostile

The C a kind writes goes into lists that its row's assembly (api/remote.py) joins in the order
of the parameters, so a kind adds lines and never sees another kind's. Adding a kind is one
class here and one entry in KINDS (or the handle kinds' prefixes in make()).
"""
import re
import struct


class TableError(Exception):
    pass


def fail(where, msg):
    raise TableError("%s: %s" % (where, msg))


# ------------------------------------------------------------------ C types and expressions

SCALARS = {"char": 1, "unsigned char": 1, "signed char": 1, "short": 2, "unsigned short": 2,
           "int": 4, "unsigned int": 4, "unsigned": 4, "float": 4, "uint32_t": 4, "int32_t": 4,
           "long": 8, "unsigned long": 8, "long int": 8, "unsigned long int": 8, "long long": 8,
           "unsigned long long": 8, "double": 8, "size_t": 8, "ssize_t": 8, "uint64_t": 8,
           "int64_t": 8, "void": 1}


def pointee(ctype):
    t = ctype[:-1].strip()
    return re.sub(r"^const\s+", "", t)


def csize(t, types):
    """sizeof a C type, where the tables tell it (structs: None, checked by the compiler)."""
    t = re.sub(r"^const\s+", "", t.strip())
    if t.endswith("*"):
        return 8
    if t in SCALARS:
        return SCALARS[t]
    cls, detail = types.get(t, ("", ""))
    if cls == "scalar":
        return csize(detail, types)
    return {"enum": 4, "handle": 8, "fnptr": 8}.get(cls)


def limit_value(expr):
    try:
        return int(expr, 0)
    except ValueError:
        return None


def floating(ctype, types):
    """float or double (through the tables' scalar typedefs), else None."""
    t = re.sub(r"^const\s+", "", ctype.strip())
    while types.get(t, ("",))[0] == "scalar":
        t = types[t][1].strip()
    return t if t in ("float", "double") else None


def cast_in(ctype, types, expr):
    """The u64 a client sends for a by-value parameter."""
    fl = floating(ctype, types)
    if fl:
        return "om_gen_bits_%s(%s)" % ("f32" if fl == "float" else "f64", expr)
    cls = types.get(ctype, ("", ""))[0]
    if ctype.endswith("*") or cls == "handle":
        return "(uint64_t)(uintptr_t)%s" % expr
    if ctype in ("int", "short", "char", "long", "long long", "CUdevice", "ssize_t") or cls == "enum":
        return "(uint64_t)(int64_t)%s" % expr
    return "(uint64_t)%s" % expr


def cast_out(ctype, types, expr):
    """A by-value parameter on the server from its u64."""
    fl = floating(ctype, types)
    if fl:
        return "om_gen_%s(%s)" % ("f32" if fl == "float" else "f64", expr)
    cls = types.get(ctype, ("", ""))[0]
    if ctype.endswith("*") or cls == "handle":
        return "(%s)(uintptr_t)%s" % (ctype, expr)
    return "(%s)%s" % (ctype, expr)


def cexpr(expr, names, prefix="a_"):
    """A LEN/COUNT expression on the server: each parameter name becomes its decoded value
    (other identifiers are constants: sizeof, macros)."""
    return re.sub(r"\b([A-Za-z_]\w*)\b",
                  lambda m: prefix + m.group(1) if m.group(1) in names else m.group(1), expr)


def arg_names(expr, names):
    return [i for i in re.findall(r"[A-Za-z_]\w*", expr) if i in names]


def len_guard(expr, names, fail_stmt):
    """Checks that a LEN/COUNT expression computed from client values does not wrap around:
    each parameter it names is at most OM_GEN_LEN_MAX and the value, computed in 128 bits,
    fits 64. Nothing for a single name or a constant."""
    if re.match(r"^\s*\w*\s*$", expr):
        return []
    used = sorted(set(arg_names(expr, names)))
    if not used:
        return []
    big = " || ".join("a_%s > OM_GEN_LEN_MAX" % n for n in used)
    wide = cexpr(expr, names, "(om_u128)a_")
    return ["    if (%s || (%s) > UINT64_MAX)\n        %s" % (big, wide, fail_stmt)]


def kind_enum(k):
    return "OM_H_" + k.upper()


# fuzz_exec.c's own kinds for the handle kinds it had before the table; the others are added to
# its enum by tests/fuzz/gen/kinds.h.
FUZZ_KINDS = {"stream": "K_STREAM", "event": "K_EVENT", "library": "K_LIBRARY",
              "function": "K_KERNEL"}


def fuzz_kind(k):
    return FUZZ_KINDS.get(k, "K_H_" + k.upper())


def u64(v):
    return struct.pack("<Q", v & (1 << 64) - 1)


# ------------------------------------------------------------------ what a row's parts collect

class Sizes:
    """The largest request and answer of a row: bytes the tables tell, and C terms for the rest
    (a struct's size, a MAX that is a macro), which the generated decoder asserts."""

    def __init__(self):
        self.req, self.ans, self.req_c, self.ans_c = 0, 0, [], []


class Stub:
    """A client stub being written: its argument checks, the request's writes, the request's
    fixed bytes and variable terms."""

    def __init__(self, row):
        self.row, self.checks, self.body, self.fixed, self.var = row, [], [], 0, []


class Decoder:
    """A server decoder being written, in the order its parts run."""

    def __init__(self, row):
        self.row = row
        self.names = {p.name for p in row["params"]}
        self.reads, self.decls, self.checks, self.allocs, self.streams = [], [], [], [], []
        self.before_call = []  # after every check and allocation, just before the driver
        self.args, self.ok, self.answers = [], [], []
        self.gotos = False


class Fuzz:
    """A check-layer wrapper being written: checks before the driver, notes after success."""

    def __init__(self, row):
        self.row = row
        self.names = {p.name for p in row["params"]}
        self.before, self.after = [], []


# ------------------------------------------------------------------ the kinds

class Kind:
    """One annotated parameter of a gen row. `base` names the kind as other rules of the table
    refer to it; `carries` says whether the request holds a value a LEN or COUNT may use."""
    base = None
    carries = False

    def __init__(self, name, ctype, kind, args, check, check_args, nullable):
        self.name, self.ctype, self.kind, self.args = name, ctype, kind, args
        self.check, self.check_args, self.nullable = check, check_args, nullable
        self.hkind = self.elem_kind = None

    @property
    def el(self):
        """The pointee of a pointer parameter, the type itself otherwise."""
        return pointee(self.ctype) if self.ctype.endswith("*") else self.ctype

    def two_args(self):
        return [a.strip() for a in self.args.split(",")]

    def parse(self, where, ctx):
        pass

    def sizes(self, s, types):
        pass

    def put(self, st, types):
        pass

    def reply_size(self):
        """The C size of this parameter's part of the answer, None when it has none."""
        return None

    def take(self, row):
        return []

    def decode(self, d, types):
        pass

    def cleanup(self):
        return []

    def fuzz(self, f):
        pass

    def seed(self, handles, huge, types):
        """The bytes the decoder reads for this parameter: `handles` maps "ptr", "stream" and
        each handle kind to a word naming one (the session's own, or the victim's); `huge`
        asks for the out-of-range values the decoder must refuse."""
        return b""


class Word(Kind):
    """A value the request carries as one u64 (the common part of the by-value kinds)."""

    def sizes(self, s, types):
        s.req += 8

    def put(self, st, types):
        st.body.append("    om_put_u64(&req, %s);" % cast_in(self.ctype, types, self.name))
        st.fixed += 8

    def decode(self, d, types):
        d.reads.append("    uint64_t a_%s = om_get_u64(&c->in);" % self.name)
        self.check_value(d, types)

    def check_value(self, d, types):
        d.args.append(cast_out(self.ctype, types, "a_%s" % self.name))


class Scalar(Word):
    """val, flags, dev: a by-value scalar."""
    carries = True

    def parse(self, where, ctx):
        name, ctype, base, args = self.name, self.ctype, self.base, self.args
        if base != "zero" and ctx.pointer and ctype not in ("void *",):
            fail(where, "%s: %s is a pointer, not a value" % (name, ctype))
        if base != "val" and floating(ctype, ctx.types):
            fail(where, "%s: a %s is a val (it travels as its bits)" % (name, ctype))


class Val(Scalar):
    """val, val(LO..HI): any value (a float travels as its bits), or one within [LO, HI];
    val:CHECK: then om_check_CHECK(struct call *, uint64_t) accepts it or says the call's error
    (an attribute of those the server lets through)."""
    base = "val"

    def parse(self, where, ctx):
        Scalar.parse(self, where, ctx)
        name, ctype, args, types = self.name, self.ctype, self.args, ctx.types
        if args and not re.match(r"^-?\w+\.\.-?\w+$", args):
            fail(where, "%s: val(LO..HI) expected" % name)
        if args and floating(ctype, types):
            fail(where, "%s: a %s has no val(LO..HI) range" % (name, ctype))
        if not args and not self.check and types.get(ctype, ("",))[0] == "enum":
            fail(where, "%s: the enum %s needs its range, val(LO..HI), or a check, val:CHECK"
                 % (name, ctype))
        if self.check and floating(ctype, types):
            fail(where, "%s: a %s takes no :CHECK" % (name, ctype))

    def check_value(self, d, types):
        n = self.name
        if self.args:
            lo, hi = self.args.split("..")
            d.checks.append("    if ((int64_t)a_%s < %s || (int64_t)a_%s > %s)\n"
                            "        return CUDA_ERROR_INVALID_VALUE;" % (n, lo, n, hi))
        if self.check:
            d.checks.append("    if ((rc = om_check_%s(c, a_%s)) != CUDA_SUCCESS)\n"
                            "        return rc;" % (self.check, n))
        d.args.append(cast_out(self.ctype, types, "a_%s" % n))

    def seed(self, handles, huge, types):
        lo = self.args.split("..")[0] if self.args else "1"
        return u64(0xFFFFFFFFFFFFFFF0 if huge else int(lo, 0))


class Flags(Scalar):
    """flags(MASK): an unsigned whose bits lie in MASK."""
    base = "flags"

    def parse(self, where, ctx):
        Scalar.parse(self, where, ctx)
        if not self.args:
            fail(where, "%s: flags(MASK) expected" % self.name)

    def check_value(self, d, types):
        d.checks.append("    if (a_%s & ~(uint64_t)(%s))\n        return CUDA_ERROR_INVALID_VALUE;"
                        % (self.name, self.args))
        d.args.append(cast_out(self.ctype, types, "a_%s" % self.name))

    def seed(self, handles, huge, types):
        return u64(0xFFFFFFFF if huge else 0)


class Dev(Scalar):
    """dev: the client's device ordinal, passed as the server's."""
    base = "dev"

    def check_value(self, d, types):
        n = self.name
        d.decls.append("    int d_%s = om_dev_in(c->s, a_%s);" % (n, n))
        d.checks.append("    if (d_%s < 0)\n        return CUDA_ERROR_INVALID_DEVICE;" % n)
        d.args.append("(%s)d_%s" % (self.ctype, n))

    seed = Flags.seed


class Zero(Kind):
    """zero: a reserved argument, 0 or NULL; the request holds nothing."""
    base = "zero"
    parse = Scalar.parse

    def put(self, st, types):
        st.checks.append("    if (%s)\n        return CUDA_ERROR_INVALID_VALUE;" % self.name)

    def decode(self, d, types):
        d.args.append("NULL" if self.ctype.endswith("*") else "0")


class Ctx(Kind):
    """ctx: the CUcontext a graph node runs in. The client's contexts are tokens of the shim, so
    nothing travels; the server passes its own current context (om_graph_server_context)."""
    base = "ctx"

    def parse(self, where, ctx):
        if self.ctype != "CUcontext":
            fail(where, "%s: ctx on a %s" % (self.name, self.ctype))

    def decode(self, d, types):
        d.args.append("om_graph_server_context()")


class Handle(Word):
    """KIND, KIND?: a handle of that kind the calling client owns (?: NULL allowed)."""
    base = "handle"

    def parse(self, where, ctx):
        if self.hkind not in ctx.kind_names:
            fail(where, "%s: no handle kind %r in api/handles.tsv" % (self.name, self.hkind))

    def check_value(self, d, types):
        n = self.name
        d.checks.append("    if ((rc = om_arg_handle(c, %s, a_%s, %s)) != CUDA_SUCCESS)\n"
                        "        return rc;" % (kind_enum(self.hkind), n,
                                                "true" if self.nullable else "false"))
        d.args.append(cast_out(self.ctype, types, "a_%s" % n))

    def fuzz(self, f):
        f.before.append("    %scheck(%s, H(%s), 1);" % (
            "if (%s)\n        " % self.name if self.nullable else "", fuzz_kind(self.hkind),
            self.name))

    def seed(self, handles, huge, types):
        return u64(handles.get(self.hkind, 0))


class Free(Handle):
    """free.KIND: a handle of the client's that this call destroys (dropped on success). Where
    api/handles.tsv names the kind's release hook, om_release_KIND(c, h) runs just before the
    driver: it forgets what the session keeps about the handle, may refuse (a handle of the
    kind's that is not destroyable by itself) or release it without the driver
    (OM_RELEASE_KEPT: the call succeeds)."""
    base = "free"
    release = None

    def parse(self, where, ctx):
        Handle.parse(self, where, ctx)
        self.release = next(k["release"] for k in ctx.kinds if k["kind"] == self.hkind)

    def check_value(self, d, types):
        Handle.check_value(self, d, types)
        if self.release:
            d.before_call.append("    if ((rc = %s(c, a_%s)) != CUDA_SUCCESS) {\n"
                                 "        if (rc == OM_RELEASE_KEPT)\n"
                                 "            rc = CUDA_SUCCESS;\n        goto out;\n    }"
                                 % (self.release, self.name))
            d.gotos = True
        d.ok.append("        om_own_drop(c->s, %s, a_%s);" % (kind_enum(self.hkind), self.name))

    def fuzz(self, f):
        Handle.fuzz(self, f)
        f.after.append("        forget(%s, H(%s));" % (fuzz_kind(self.hkind), self.name))


class Stream(Word):
    """stream: a stream the call enqueues work on; stream.query: one it only queries."""
    base = "stream"
    enqueue = "true"

    def parse(self, where, ctx):
        if self.ctype != "CUstream":
            fail(where, "%s: a stream annotation on a %s" % (self.name, self.ctype))

    def check_value(self, d, types):
        n = self.name
        d.streams.append("    s_%s = om_arg_stream(c, a_%s, %s, &rc);\n    if (!s_%s)\n"
                         "        goto out;" % (n, n, self.enqueue, n))
        d.decls.append("    CUstream s_%s = NULL;" % n)
        d.gotos = True
        d.args.append("s_%s" % n)

    def fuzz(self, f):
        f.before.append("    check(K_STREAM, H(%s), 1);" % self.name)

    def seed(self, handles, huge, types):
        return u64(handles["stream"])


class StreamQuery(Stream):
    base = "stream.query"
    enqueue = "false"


class StreamCapture(StreamQuery):
    """stream.capture: a stream whose capture state is asked (om_arg_capture_stream: the legacy
    stream is refused while a blocking or the per-thread stream of the client captures, as
    natively). Its base stays stream.query: everything else (the request's bytes, sync's and
    out:CHECK's stream arguments, the fuzz checks) treats it as the query it is."""

    def check_value(self, d, types):
        n = self.name
        d.streams.append("    s_%s = om_arg_capture_stream(c, a_%s, &rc);\n    if (!s_%s)\n"
                         "        goto out;" % (n, n, n))
        d.decls.append("    CUstream s_%s = NULL;" % n)
        d.gotos = True
        d.args.append("s_%s" % n)


class Ptr(Word):
    """ptr(LEN): a device address; [ptr, ptr + LEN) within the client's memory."""
    base = "ptr"

    def parse(self, where, ctx):
        if not self.args:
            fail(where, "%s: ptr(LEN) expected" % self.name)

    def check_value(self, d, types):
        n = self.name
        d.checks += len_guard(self.args, d.names, "return CUDA_ERROR_INVALID_VALUE;")
        d.checks.append("    if (!om_arg_range(c, a_%s, (uint64_t)(%s)))\n"
                        "        return CUDA_ERROR_INVALID_VALUE;" % (n, cexpr(self.args, d.names)))
        d.args.append("(%s)a_%s" % (self.ctype, n))

    def fuzz(self, f):
        n, ln = self.name, self.args
        wide = re.sub(r"\b([A-Za-z_]\w*)\b", lambda m: "(om_u128)" + m.group(1)
                      if m.group(1) in f.names else m.group(1), ln)
        # One value cannot wrap around (and comparing a narrow type with UINT64_MAX is always
        # false: -Wtype-limits); an expression is computed in 128 bits.
        if re.match(r"^\s*\w+\s*$", ln):
            f.before.append("    check(K_DEVICE, (uint64_t)%s, (uint64_t)(%s));" % (n, ln.strip()))
        else:
            f.before.append("    check(K_DEVICE, (uint64_t)%s, (%s) > UINT64_MAX ? UINT64_MAX : "
                            "(uint64_t)(%s));" % (n, wide, wide))

    def seed(self, handles, huge, types):
        return u64(handles["ptr"])


class Pointed(Kind):
    """A kind read or written through a pointer parameter (in, out, inout)."""

    def parse(self, where, ctx):
        base, name, ctype = self.base, self.name, self.ctype
        if not ctx.pointer:
            fail(where, "%s: %s needs a pointer parameter, not %s" % (name, base, ctype))
        if pointee(ctype) == "void":
            fail(where, "%s: %s through void * has no size (custom)" % (name, base))


class In(Pointed):
    """in, in?, in:CHECK: a struct read through a pointer (sizeof the pointee)."""
    base = "in"

    def sizes(self, s, types):
        s.req += 8
        size = csize(self.el, types)
        if size is None:
            s.req_c.append("sizeof(%s)" % self.el)
        else:
            s.req += size

    def put(self, st, types):
        n = self.name
        if self.nullable:
            st.body.append("    om_put_u64(&req, %s != NULL);" % n)
            st.body.append("    if (%s)\n        om_put_bytes(&req, %s, sizeof(*%s));" % (n, n, n))
            st.fixed += 8
        else:
            st.checks.append("    if (!%s)\n        return CUDA_ERROR_INVALID_VALUE;" % n)
            st.body.append("    om_put_bytes(&req, %s, sizeof(*%s));" % (n, n))
        st.var.append("sizeof(*%s)" % n)

    def decode(self, d, types):
        n, T = self.name, self.el
        if self.nullable:
            d.reads.append("    uint64_t a_%s = om_get_u64(&c->in);" % n)
        d.decls.append("    %s v_%s;" % (T, n))
        get = "om_get_bytes(&c->in, sizeof(%s))" % T
        d.reads.append("    const void *b_%s = %s;" % (n, ("a_%s ? %s : NULL" % (n, get))
                                                       if self.nullable else get))
        if self.nullable:
            d.checks.append("    if (b_%s)\n        memcpy(&v_%s, b_%s, sizeof(v_%s));"
                            % (n, n, n, n))
            arg = "b_%s ? &v_%s : NULL" % (n, n)
        else:
            d.checks.append("    memcpy(&v_%s, b_%s, sizeof(v_%s));" % (n, n, n))
            arg = "&v_%s" % n
        if self.check:
            d.checks.append("    if ((rc = om_check_%s(c, %s)) != CUDA_SUCCESS)\n"
                            "        return rc;" % (self.check, arg))
        d.args.append(arg)

    def seed(self, handles, huge, types):
        size = csize(self.el, types) or 64
        return (u64(1) if self.nullable else b"") + bytes(size)


class Answer(Pointed):
    """The kinds the driver writes through a pointer and the answer carries back."""

    def put_answer(self, st):
        if not self.nullable:
            st.checks.append("    if (!%s)\n        return CUDA_ERROR_INVALID_VALUE;" % self.name)

    def put(self, st, types):
        self.put_answer(st)

    def reply_size(self):
        return "sizeof(*%s)" % self.name

    def take(self, row):
        n = self.name
        return ["    {\n        const void *v = om_get_bytes(&in, sizeof(*%s));\n"
                "        if (v && %s)\n            memcpy(%s, v, sizeof(*%s));\n    }"
                % (n, n, n, n)]


class Out(Answer):
    """out, out?, out:CHECK, out:CHECK(P,...): a scalar or struct the driver writes."""
    base = "out"

    def parse(self, where, ctx):
        Pointed.parse(self, where, ctx)
        # what the driver answers in the server's device numbering: the client's (devmap.c)
        if pointee(self.ctype) == "CUdevice" and self.check != "dev":
            fail(where, "%s: a device the driver answers needs out:dev (the client's "
                 "ordinal)" % self.name)

    def sizes(self, s, types):
        size = csize(self.el, types)
        if size is None:
            s.ans_c.append("sizeof(%s)" % self.el)
        else:
            s.ans += size

    def decode(self, d, types):
        n, T = self.name, self.el
        d.decls.append("    %s o_%s;" % (T, n))
        d.checks.append("    memset(&o_%s, 0, sizeof(o_%s));" % (n, n))
        self.preset(d)
        d.args.append("&o_%s" % n)
        if self.check:  # the answer in the client's terms first (device ordinals, limits)
            kinds_of = {q.name: q.base for q in d.row["params"]}
            extra = "".join(", %s_%s" % ("d" if kinds_of[a] == "dev" else "s" if kinds_of[a]
                                         in ("stream", "stream.query") else "a", a)
                            for a in self.check_args)
            d.answers.append("        %src = om_answer_%s(c, &o_%s%s);"
                             % ("if (rc == CUDA_SUCCESS)\n            " if d.answers else "",
                                self.check, n, extra))
        d.ok.append("        om_put_bytes(&c->out, &o_%s, sizeof(o_%s));" % (n, n))

    def preset(self, d):
        pass


class Inout(Out):
    """inout: a scalar read and written (a count: the capacity in, the real count out)."""
    base = "inout"
    carries = True

    def parse(self, where, ctx):
        Pointed.parse(self, where, ctx)
        if self.check:
            fail(where, "%s: inout takes no :CHECK" % self.name)

    def sizes(self, s, types):
        s.req += 8
        s.ans += csize(self.el, types) or 0

    def put(self, st, types):
        self.put_answer(st)
        n = self.name
        st.body.append("    om_put_u64(&req, %s ? (uint64_t)*%s : 0);" % (n, n))
        st.fixed += 8

    def decode(self, d, types):
        d.reads.append("    uint64_t a_%s = om_get_u64(&c->in);" % self.name)
        Out.decode(self, d, types)

    def preset(self, d):
        d.checks.append("    o_%s = (%s)a_%s;" % (self.name, self.el, self.name))

    def seed(self, handles, huge, types):
        return u64(0xFFFFFFFFFFFFFFF0 if huge else 1)


class New(Answer):
    """new.KIND: a handle this call creates, counted against the client's budget and owned by
    it from then on."""
    base = "new"

    def parse(self, where, ctx):
        if self.hkind not in ctx.kind_names:
            fail(where, "%s: no handle kind %r in api/handles.tsv" % (self.name, self.hkind))
        if not ctx.pointer:
            fail(where, "%s: new.%s needs a pointer parameter" % (self.name, self.hkind))

    def sizes(self, s, types):
        s.ans += 8

    def reply_size(self):
        return "8"

    def take(self, row):
        return ["    {\n        uint64_t v = om_get_u64(&in);\n"
                "        if (!in.bad)\n            *%s = (%s)(uintptr_t)v;\n    }"
                % (self.name, pointee(self.ctype))]

    def decode(self, d, types):
        n, k = self.name, kind_enum(self.hkind)
        d.decls.append("    %s o_%s = 0;" % (self.el, n))
        d.checks.append("    if ((rc = om_own_room(c->s, %s)) != CUDA_SUCCESS)\n        return rc;"
                        % k)
        d.args.append("&o_%s" % n)
        d.ok.append("        if ((rc = om_own_add(c, %s, (uint64_t)(uintptr_t)o_%s)) != "
                    "CUDA_SUCCESS)\n            goto out;" % (k, n))
        d.ok.append("        om_put_u64(&c->out, (uint64_t)(uintptr_t)o_%s);" % n)
        d.gotos = True

    def fuzz(self, f):
        f.after.append("        note(%s, H(*%s), 1, false);" % (fuzz_kind(self.hkind), self.name))


class Counted(Kind):
    """The array kinds: (COUNT,MAX) on a pointer."""

    def parse(self, where, ctx):
        if not ctx.pointer or not self.args or len(self.args.split(",")) != 2:
            fail(where, "%s: %s(COUNT,MAX) on a pointer expected" % (self.name, self.base))

    def many(self, terms, types):
        """MAX elements in bytes where the tables tell both, else a C term in `terms`."""
        mxs = self.two_args()[1]
        mx, size = limit_value(mxs), csize(self.el, types)
        if mx is not None and size is not None:
            return mx * size
        terms.append("(uint64_t)(%s) * sizeof(%s)" % (mxs, self.el))
        return 0


class Arr(Counted):
    """arr(COUNT,MAX): COUNT pointees read through a pointer; handles each the client's own."""
    base = "arr"

    def parse(self, where, ctx):
        Counted.parse(self, where, ctx)
        el, kinds = pointee(self.ctype), ctx.kinds
        if ctx.types.get(el, ("",))[0] == "handle" and not self.check:
            hk = [k["kind"] for k in kinds if k["ctype"] == el]
            if len(hk) != 1:  # each element must be checked as the client's own
                fail(where, "%s: an array of %s handles, which %s kind of api/handles.tsv "
                     "names (one kind, or arr(..):CHECK)" % (self.name, el,
                                                             "more than one" if hk else "no"))
            self.elem_kind = hk[0]

    def sizes(self, s, types):
        s.req += 8 + self.many(s.req_c, types)

    def put(self, st, types):
        n = self.name
        count, mx = self.two_args()
        st.checks.append("    if ((size_t)(%s) > %s || ((%s) && !%s))\n"
                         "        return CUDA_ERROR_INVALID_VALUE;" % (count, mx, count, n))
        st.body.append("    om_put_u64(&req, (uint64_t)(%s));" % count)
        st.body.append("    if (%s)\n        om_put_bytes(&req, %s, (size_t)(%s) * sizeof(*%s));"
                       % (count, n, count, n))
        st.fixed += 8
        st.var.append("(size_t)(%s) * sizeof(*%s)" % (mx, n))

    def decode(self, d, types):
        n, T = self.name, self.el
        cnt, mx = self.two_args()
        d.reads.append("    uint64_t a_%s = om_get_u64(&c->in);" % n)
        d.reads.append("    const void *b_%s = a_%s <= %s ? om_get_bytes(&c->in, (size_t)a_%s * "
                       "sizeof(%s)) : NULL;" % (n, n, mx, n, T))
        d.decls.append("    %s *v_%s = NULL;" % (T, n))
        d.checks += len_guard(cnt, d.names, "return CUDA_ERROR_INVALID_VALUE;")
        d.checks.append("    if (a_%s > %s || (a_%s && !b_%s) || a_%s != (uint64_t)(%s))\n"
                        "        return CUDA_ERROR_INVALID_VALUE;"
                        % (n, mx, n, n, n, cexpr(cnt, d.names)))
        d.allocs.append("    if (a_%s && !(v_%s = malloc((size_t)a_%s * sizeof(%s)))) {\n"
                        "        rc = CUDA_ERROR_OUT_OF_MEMORY;\n        goto out;\n    }"
                        % (n, n, n, T))
        d.allocs.append("    if (a_%s)\n        memcpy(v_%s, b_%s, (size_t)a_%s * sizeof(%s));"
                        % (n, n, n, n, T))
        if self.elem_kind and not self.check:  # an array of handles: each the client's own
            d.allocs.append("    for (uint64_t i = 0; i < a_%s; i++)\n"
                            "        if ((rc = om_arg_handle(c, %s, (uint64_t)(uintptr_t)v_%s[i], "
                            "false)) != CUDA_SUCCESS)\n            goto out;"
                            % (n, kind_enum(self.elem_kind), n))
        if self.check:
            d.allocs.append("    if ((rc = om_check_%s(c, v_%s, (size_t)a_%s)) != CUDA_SUCCESS)\n"
                            "        goto out;" % (self.check, n, n))
        d.gotos = True
        d.args.append("v_%s" % n)

    def cleanup(self):
        return ["    free(v_%s);" % self.name]

    def fuzz(self, f):
        if self.elem_kind:
            cnt = self.two_args()[0]
            f.before.append("    for (uint64_t i = 0; %s && i < (uint64_t)(%s); i++)\n"
                            "        check(%s, H(%s[i]), 1);"
                            % (self.name, cnt, fuzz_kind(self.elem_kind), self.name))

    def seed(self, handles, huge, types):
        size = csize(self.el, types) or 64
        item = u64(handles.get(self.elem_kind, 0)) if size == 8 else bytes(size)
        return u64(1) + item


class OutArr(Counted, Answer):
    """outarr(COUNT,MAX), outarr?(COUNT,MAX): COUNT pointees the driver writes (an inout count
    is the capacity); ?: the pointer may be NULL, then only the other outputs travel."""
    base = "outarr"
    parse = Counted.parse

    def sizes(self, s, types):
        s.req += 8 if self.nullable else 0
        s.ans += self.many(s.ans_c, types)

    def put(self, st, types):
        self.put_answer(st)
        n = self.name
        count, mx = self.two_args()
        if self.nullable:  # NULL: only the count is asked for
            st.body.append("    om_put_u64(&req, %s != NULL);" % n)
            st.fixed += 8
        st.checks.append("    if (%s(size_t)(%s) > %s)\n        return CUDA_ERROR_INVALID_VALUE;"
                         % ("%s && " % n if self.nullable else "", cexpr_client(count, st.row), mx))

    def reply_size(self):
        return "(%s) * sizeof(*%s)" % (self.two_args()[1], self.name)

    def take(self, row):
        n = self.name
        count = cexpr_client(self.two_args()[0], row)
        return ["    %s{\n        const void *v = om_get_bytes(&in, (size_t)(%s) * "
                "sizeof(*%s));\n        if (v && %s)\n"
                "            memcpy(%s, v, (size_t)(%s) * sizeof(*%s));\n    }"
                % ("if (%s) " % n if self.nullable else "", count, n, n, n, count, n)]

    def decode(self, d, types):
        # COUNT (the value the client sent: for an inout count, its capacity) entries are
        # allocated, passed and answered; outarr?: the client's pointer was NULL (a_ is 0), the
        # driver gets NULL and only the other outputs (the count) are answered.
        n, T = self.name, self.el
        if self.nullable:
            d.reads.append("    uint64_t a_%s = om_get_u64(&c->in);" % n)
        cnt, mx = self.two_args()
        ce = cexpr(cnt, d.names)
        # the driver gets a buffer (of one entry at least) where the client passed one
        d.decls.append("    %s *o_%s = NULL;" % (T, n))
        guard = len_guard(cnt, d.names, "return CUDA_ERROR_INVALID_VALUE;")
        big = "(uint64_t)(%s) > %s" % (ce, mx)
        if self.nullable:
            guard = ["    if (a_%s) {\n%s\n    }" % (
                n, "\n".join("    " + l.replace("\n", "\n    ") for l in guard))] if guard else []
            big = "a_%s && %s" % (n, big)
        d.checks += guard
        d.checks.append("    if (%s)\n        return CUDA_ERROR_INVALID_VALUE;" % big)
        d.allocs.append("    if (%s!(o_%s = calloc((size_t)(%s) ? (size_t)(%s) : 1, sizeof(%s)))) {\n"
                        "        rc = CUDA_ERROR_OUT_OF_MEMORY;\n        goto out;\n    }"
                        % ("a_%s && " % n if self.nullable else "", n, ce, ce, T))
        d.gotos = True
        d.args.append("o_%s" % n)
        d.ok.append("        if (o_%s)\n            om_put_bytes(&c->out, o_%s, (size_t)(%s) * "
                    "sizeof(%s));" % (n, n, ce, T))

    def cleanup(self):
        return ["    free(o_%s);" % self.name]

    def seed(self, handles, huge, types):
        return u64(1) if self.nullable else b""


class OutBuf(Counted, Answer):
    """outbuf(LEN,MAX): LEN bytes the driver writes (char or void buffers), at most MAX travel;
    the driver gets the clamped length."""
    base = "outbuf"
    parse = Counted.parse

    def sizes(self, s, types):
        mxs = self.two_args()[1]
        if limit_value(mxs) is None:
            s.ans_c.append("(uint64_t)(%s)" % mxs)
        else:
            s.ans += limit_value(mxs)

    def put(self, st, types):
        ln, mx = self.two_args()
        st.checks.append("    if (!%s || (%s) <= 0)\n        return CUDA_ERROR_INVALID_VALUE;"
                         % (self.name, ln))

    def reply_size(self):
        return self.two_args()[1]

    def take(self, row):
        ln, mx = self.two_args()
        return ["    {\n        size_t n = (size_t)(%s) < %s ? (size_t)(%s) : %s;\n"
                "        const void *v = om_get_bytes(&in, n);\n"
                "        if (v)\n            memcpy(%s, v, n);\n    }"
                % (ln, mx, ln, mx, self.name)]

    def decode(self, d, types):
        n = self.name
        ln, mx = self.two_args()
        d.decls.append("    uint8_t o_%s[%s];" % (n, mx))
        d.decls.append("    uint64_t n_%s = (uint64_t)(%s) < %s ? (uint64_t)(%s) : %s;"
                       % (n, cexpr(ln, d.names), mx, cexpr(ln, d.names), mx))
        d.checks.append("    memset(o_%s, 0, sizeof(o_%s));" % (n, n))
        d.args.append("(%s)o_%s" % (self.ctype, n))
        d.ok.append("        om_put_bytes(&c->out, o_%s, (size_t)n_%s);" % (n, n))

    def fix_args(self, d):
        """The buffer's length parameter passes the clamped length."""
        ln = self.two_args()[0]
        if re.match(r"^[a-z]\w*$", ln):
            ps = d.row["params"]
            i = [q.name for q in ps].index(ln)
            d.args[i] = "(%s)n_%s" % (ps[i].ctype, self.name)


class List(Counted, Answer):
    """list.KIND?(COUNT,MAX): handles the driver answers into an array, each becoming the
    client's (one it owns already stays as it is; cuGraphGetNodes). COUNT names an inout
    parameter after this one: the capacity in, the count out, at most the capacity while an
    array was passed. The array may be NULL (only the count is asked). A capacity above MAX is a
    limit of openmps: CUDA_ERROR_NOT_SUPPORTED. The answer: the count, then the handles."""
    base = "list"

    def parse(self, where, ctx):
        Counted.parse(self, where, ctx)
        if self.hkind not in ctx.kind_names:
            fail(where, "%s: no handle kind %r in api/handles.tsv" % (self.name, self.hkind))
        if not self.nullable:
            fail(where, "%s: list.%s? (the array may be NULL: only the count)" % (self.name,
                                                                                  self.hkind))
        if not re.match(r"^\w+$", self.two_args()[0]):
            fail(where, "%s: a list's COUNT is an inout parameter" % self.name)

    def count(self, row):
        """The inout parameter that counts the list (checked to come after it)."""
        names = [p.name for p in row["params"]]
        c = self.two_args()[0]
        if c not in names or row["params"][names.index(c)].base != "inout" or \
                names.index(c) < names.index(self.name):
            fail(row["where"], "%s: %s is no inout parameter after the list" % (self.name, c))
        return c

    def sizes(self, s, types):
        s.req += 8
        s.ans += 8 + self.many(s.ans_c, types)

    def put(self, st, types):
        n, mx = self.name, self.two_args()[1]
        st.checks.append("    if (%s && (size_t)(%s) > %s)\n        return CUDA_ERROR_NOT_SUPPORTED;"
                         % (n, cexpr_client(self.count(st.row), st.row), mx))
        st.body.append("    om_put_u64(&req, %s != NULL);" % n)
        st.fixed += 8

    def reply_size(self):
        return "8 + (%s) * sizeof(*%s)" % (self.two_args()[1], self.name)

    def take(self, row):
        n = self.name
        cap = cexpr_client(self.count(row), row)
        return ["    if (%s) {\n        uint64_t k = om_get_u64(&in);\n        const void *v = NULL;\n"
                "        if (k > (uint64_t)(%s) || (k && !(v = om_get_bytes(&in, (size_t)k * "
                "sizeof(*%s)))))\n            in.bad = true;\n        else if (k)\n"
                "            memcpy(%s, v, (size_t)k * sizeof(*%s));\n    }" % (n, cap, n, n, n)]

    def decode(self, d, types):
        n, T, mx = self.name, self.el, self.two_args()[1]
        c = self.count(d.row)
        d.reads.append("    uint64_t a_%s = om_get_u64(&c->in);" % n)
        d.decls.append("    %s *o_%s = NULL;" % (T, n))
        d.checks.append("    if (a_%s && a_%s > %s) {\n        client_err(c->s, \"client %%d: a list of more "
                        "than %%d handles is not supported\", (int)c->s->pid, %s);\n"
                        "        return CUDA_ERROR_NOT_SUPPORTED;\n    }" % (n, c, mx, mx))
        d.allocs.append("    if (a_%s && a_%s && !(o_%s = calloc((size_t)a_%s, sizeof(%s)))) {\n"
                        "        rc = CUDA_ERROR_OUT_OF_MEMORY;\n        goto out;\n    }"
                        % (n, c, n, c, T))
        d.gotos = True
        d.args.append("o_%s" % n)
        d.ok.append("        if (a_%s && o_%s > a_%s)\n            o_%s = a_%s;" % (n, c, c, c, c))
        d.ok.append("        for (size_t i = 0; a_%s && i < (size_t)o_%s; i++)\n"
                    "            if ((rc = om_own_adopt(c, %s, (uint64_t)(uintptr_t)o_%s[i])) != "
                    "CUDA_SUCCESS)\n                goto out;" % (n, c, kind_enum(self.hkind), n))
        d.ok.append("        if (a_%s) {\n            om_put_u64(&c->out, (uint64_t)o_%s);\n"
                    "            if (o_%s)\n                om_put_bytes(&c->out, o_%s, (size_t)o_%s * "
                    "sizeof(%s));\n        }" % (n, c, c, n, c, T))

    def cleanup(self):
        return ["    free(o_%s);" % self.name]

    def seed(self, handles, huge, types):
        return u64(1)


class Str(Kind):
    """str: a NUL-terminated string of at most 4095 bytes."""
    base = "str"

    def parse(self, where, ctx):
        if self.ctype != "const char *":
            fail(where, "%s: str on a %s" % (self.name, self.ctype))

    def sizes(self, s, types):
        s.req += 8 + 4096

    def put(self, st, types):
        n = self.name
        st.checks.append("    if (!%s || strlen(%s) > 4095)\n"
                         "        return CUDA_ERROR_INVALID_VALUE;" % (n, n))
        st.body.append("    om_put_u64(&req, strlen(%s));" % n)
        st.body.append("    om_put_bytes(&req, %s, strlen(%s));" % (n, n))
        st.fixed += 8
        st.var.append("4096")

    def decode(self, d, types):
        n = self.name
        d.reads.append("    uint64_t a_%s = om_get_u64(&c->in);" % n)
        d.reads.append("    const char *b_%s = a_%s <= 4095 ? om_get_bytes(&c->in, a_%s) : NULL;"
                       % (n, n, n))
        d.decls.append("    char v_%s[4096];" % n)
        d.checks.append("    if (!b_%s || memchr(b_%s, 0, a_%s))\n"
                        "        return CUDA_ERROR_INVALID_VALUE;" % (n, n, n))
        d.checks.append("    memcpy(v_%s, b_%s, a_%s);\n    v_%s[a_%s] = '\\0';" % (n, n, n, n, n))
        d.args.append("v_%s" % n)

    def seed(self, handles, huge, types):
        return u64(8) + b"fill_u32"


def cexpr_client(expr, r):
    """A COUNT expression on the client: an inout parameter is read through its pointer."""
    inouts = {p.name for p in r["params"] if p.base == "inout"}
    return re.sub(r"\b([A-Za-z_]\w*)\b",
                  lambda m: "(%s ? *%s : 0)" % (m.group(1), m.group(1)) if m.group(1) in inouts
                  else m.group(1), expr)


# The annotation (without its ? and arguments) -> its class; handle kinds by prefix in make().
KINDS = {"val": Val, "flags": Flags, "dev": Dev, "zero": Zero, "ctx": Ctx, "stream": Stream,
         "stream.query": StreamQuery, "stream.capture": StreamCapture, "ptr": Ptr, "in": In,
         "out": Out, "inout": Inout, "arr": Arr, "outarr": OutArr, "outbuf": OutBuf, "str": Str}


class Context:
    """What parse() may consult: the handle kinds, the types, whether the C type is a pointer."""

    def __init__(self, kinds, types, ctype):
        self.kinds, self.types = kinds, types
        self.kind_names = {k["kind"] for k in kinds}
        self.pointer = ctype.endswith("*")


def make(where, name, ctype, kind, args, check, check_args, kinds, types):
    """The parameter object of one annotation, parsed and checked."""
    ctx = Context(kinds, types, ctype)
    base = kind.rstrip("?")
    hkind = None
    if base in KINDS:
        cls = KINDS[base]
    elif base.startswith("free."):
        cls, hkind = Free, base[5:]
    elif base.startswith("new."):
        cls, hkind = New, base[4:]
    elif base.startswith("list."):
        cls, hkind = List, base[5:]
    elif base in ctx.kind_names:
        cls, hkind = Handle, base
    else:
        fail(where, "%s: unknown kind %r" % (name, kind))
    p = cls(name, ctype, kind, args, check, check_args, kind.endswith("?"))
    p.hkind = hkind
    p.parse(where, ctx)
    return p
