#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The generator's own tests (api/remote.py).

1. tests/unit/generator/ is a small table (remote/test.tsv, handles.tsv) with every kind, form
   and option of the vocabulary; what the generator makes of it must equal the checked-in files
   of tests/unit/generator/expected/ (after a deliberate change of the generator, read the diff
   and rewrite them: check_generator.py --update).
   They compile, and a loopback (generator/loop_*.c: the client stubs calling the decoders,
   a driver of its own) checks what the fixes of the decoders are about: an inout count with
   an outarr? (cuGraphGetNodes), a LEN that would wrap, an array of handles.
2. Rejected rows: each bad row must be refused with an error that names its file and line and
   says what is wrong.
"""
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "api"))
import remote  # noqa: E402

TABLE = os.path.join(HERE, "generator")
EXPECTED = os.path.join(TABLE, "expected")
OUTPUTS = ["src/server/gen/decoders.c", "src/server/gen/handlers.h", "src/server/gen/hooks.h",
           "src/server/gen/handles.h",
           "src/client/gen/stubs.c", "src/client/gen/remote_stubs.c", "src/client/gen/remote_decls.h",
           "src/client/gen/stubs.h",
           "tests/fuzz/gen/checks.c", "tests/fuzz/gen/kinds.h"]

failures = []


def expect(cond, what):
    print("%s: %s" % ("ok" if cond else "FAIL", what))
    if not cond:
        failures.append(what)


def expected_outputs(update):
    out, modes = remote.generate(TABLE)
    for rel in OUTPUTS:
        if rel not in out:
            expect(False, "the generator makes %s" % rel)
            continue
        path = os.path.join(EXPECTED, os.path.basename(rel))
        if update:
            os.makedirs(EXPECTED, exist_ok=True)
            with open(path, "w") as f:
                f.write(out[rel])
        want = open(path).read() if os.path.exists(path) else ""
        if out[rel] != want:
            sys.stdout.writelines(difflib.unified_diff(
                want.splitlines(True), out[rel].splitlines(True), "expected/" +
                os.path.basename(rel), "generated", n=2))
        expect(out[rel] == want, "%s of the test table equals expected/%s" %
               (rel, os.path.basename(rel)))
    expect(modes.get("cuStreamQuery") == "remote" and modes.get("cuCtxGetDevice") == "local" and
           modes.get("cuGetErrorName") == "passthrough" and
           modes.get("cuEventRecord_ptsz") == "remote", "the modes of entries.h by form")


# A row that is fine, then the row under test (line 3 of remote/r.tsv).
GOOD = "# rejected rows\ncuStreamQuery\tgen\thStream:stream.query\n"
REJECTED = [
    ("a float with a range", "cuTexRefSetMipmapLevelBias\tgen\thTexRef:zero bias:val(0..1)",
     "bias: a float has no val(LO..HI) range"),
    ("a float as flags", "cuTexRefSetMipmapLevelBias\tgen\thTexRef:zero bias:flags(0x1)",
     "bias: a float is a val (it travels as its bits)"),
    ("a parameter too many", "cuEventQuery\tgen\thEvent:event extra:val",
     "cuEventQuery has 1 parameters, the row annotates 2"),
    ("a parameter of another name", "cuEventQuery\tgen\tev:event",
     "parameter hEvent of cuEventQuery is annotated as ev"),
    ("an unknown kind", "cuEventQuery\tgen\thEvent:bogus", "unknown kind 'bogus'"),
    ("a custom row without its reason", "cuEventQuery\tcustom\t-",
     "cuEventQuery: a custom row says why it is not generated"),
    ("a client row using no operation there is",
     "cuEventQuery\tclient\t-\tvia=no_such_op",
     "via no_such_op: not an entry point nor an operation of api/ops.tsv"),
    ("an answer hook's parameter that is not one",
     "cuStreamGetPriority\tgen\thStream:stream.query priority:out:asked(stream)",
     "priority: stream names no parameter"),
    ("parameters for an in check",
     "cuStreamGetPriority\tgen\thStream:stream.query(x):asked(hStream) priority:out",
     "only an out:CHECK takes the call's parameters"),
    ("a device answered in the server's numbering",
     "cuDeviceGetByPCIBusId\tgen\tdev:out pciBusId:str", "dev: a device the driver answers"),
    ("an unknown handle kind", "cuEventDestroy_v2\tgen\thEvent:free.widget",
     "no handle kind 'widget'"),
    ("post with an output", "cuStreamGetPriority\tgen\thStream:stream.query priority:out\tpost",
     "a posted call has no answer: priority is an output"),
    ("sync without a stream", "cuEventDestroy_v2\tgen\thEvent:free.event\tsync",
     "sync waits for the call's one stream parameter"),
    ("an alias of another type", "cuEventRecord_ptsz\talias:cuStreamQuery\t-",
     "alias of cuStreamQuery, whose parameter types differ"),
    ("via an op the server does not execute",
     "cuCtxGetDevice\tlocal\t-\ncuStreamCreateWithPriority\tclient\t-\tvia=cuCtxGetDevice",
     "via cuCtxGetDevice, which the server does not execute"),
    ("a symbol twice", "cuStreamQuery\tgen\thStream:stream",
     "cuStreamQuery is already described at "),
    ("a bad form", "cuEventQuery\tgenerated\t-", "form 'generated' is none of"),
    ("ptsz on a row that is no _ptsz alias", "cuEventQuery\tgen\thEvent:event\tptsz",
     "ptsz is for a _ptsz alias with a stream parameter"),
    ("an enum without its range", "cuStreamBeginCapture_v2\tgen\thStream:stream mode:val",
     "mode: the enum CUstreamCaptureMode needs its range"),
    ("a float with a check", "cuTexRefSetMipmapLevelBias\tgen\thTexRef:zero bias:val:x",
     "bias: a float takes no :CHECK"),
    ("a LEN naming no parameter", "cuMemsetD8_v2\tgen\tdstDevice:ptr(n) uc:val N:val",
     "dstDevice: n names no parameter"),
    ("a COUNT of an output", "cuLibraryGetKernelCount\tgen\tcount:outbuf(count,8) lib:library",
     "count: count is a outbuf, not a value the request carries"),
    ("an answer past OM_REPLY_MAX",
     "cuLibraryEnumerateKernels\tgen\tkernels:outarr(numKernels,100000) numKernels:val "
     "lib:library", "the largest answer is 800000 bytes, more than the server's 524288"),
    ("a request past OM_CHUNK_BYTES",
     "cuGraphAddDependencies\tgen\thGraph:graph from:arr(numDependencies,20000):nodes "
     "to:arr(numDependencies,20000):nodes numDependencies:val",
     "the largest request is 320032 bytes, more than a record's 262144"),
    ("an array of handles of no kind",
     "cuGraphAddEmptyNode\tgen\tphGraphNode:new.graph hGraph:graph "
     "dependencies:arr(numDependencies,8) numDependencies:val",
     "dependencies: an array of CUgraphNode handles, which no kind of api/handles.tsv names"),
]
HANDLES = "stream\tCUstream\t-\tclient_streams\nevent\tCUevent\t-\tclient_events\n" \
          "library\tCUlibrary\t-\tclient_handles\ngraph\tCUgraph\tcuGraphDestroy\tclient_handles\n"


def rejected_rows():
    tmp = tempfile.mkdtemp(prefix="om-gentest-")
    try:
        for what, row, msg in REJECTED:
            os.makedirs(os.path.join(tmp, "remote"), exist_ok=True)
            with open(os.path.join(tmp, "handles.tsv"), "w") as f:
                f.write(HANDLES)
            text = GOOD + row + "\n"
            with open(os.path.join(tmp, "remote", "r.tsv"), "w") as f:
                f.write(text)
            line = text.count("\n")  # the last row is the bad one
            try:
                remote.generate(tmp)
                err = None
            except remote.TableError as e:
                err = str(e)
            where = "%s:%d: " % (os.path.join(tmp, "remote", "r.tsv"), line)
            ok = err is not None and err.startswith(where) and msg in err
            expect(ok, "refused, naming r.tsv:%d: %s (%s)" % (line, what, err))
        # A handles.tsv row of three columns: its file and line.
        with open(os.path.join(tmp, "handles.tsv"), "w") as f:
            f.write(HANDLES + "widget\tCUwidget\t-\n")
        try:
            remote.generate(tmp)
            err = None
        except remote.TableError as e:
            err = str(e)
        expect(err is not None and err.startswith(os.path.join(tmp, "handles.tsv") + ":5: "),
               "refused, naming handles.tsv:5: a kind without its budget (%s)" % err)
        # unsupported.tsv: a reason for a symbol and for a pattern reach compatibility.md; a row
        # without its reason is refused with its file and line.
        with open(os.path.join(tmp, "handles.tsv"), "w") as f:
            f.write(HANDLES)
        with open(os.path.join(tmp, "remote", "r.tsv"), "w") as f:
            f.write(GOOD)
        with open(os.path.join(tmp, "unsupported.tsv"), "w") as f:
            f.write("# reasons\ncuEventQuery\tbecause of a test\n^cuGraphics\tdisplays\n")
        out, _ = remote.generate(tmp)
        md = out["docs/compatibility.md"]
        expect("| `cuEventQuery` | unsupported |  | because of a test |" in md and
               "| `cuGraphicsMapResources` | unsupported |  | displays |" in md and
               "| `cuEventSynchronize` | unsupported |  | not yet |" in md and
               re.search(r"Of the \d+ unsupported, 1\d have a reason", md),
               "unsupported.tsv's reasons by symbol and pattern, the rest \"not yet\", counted")
        with open(os.path.join(tmp, "unsupported.tsv"), "a") as f:
            f.write("cuEventSynchronize\n")
        try:
            remote.generate(tmp)
            err = None
        except remote.TableError as e:
            err = str(e)
        expect(err is not None and err.startswith(os.path.join(tmp, "unsupported.tsv") + ":4: "),
               "refused, naming unsupported.tsv:4: a symbol without its reason (%s)" % err)
    finally:
        shutil.rmtree(tmp)
    # The project's own tables pass (what api/gen.py --check regenerates).
    try:
        remote.generate()
        err = None
    except remote.TableError as e:
        err = str(e)
    expect(err is None, "the project's tables are accepted (%s)" % err)


def compiles():
    """The test table's outputs compile (-Werror) where the project's would: a copy of src/,
    include/ and tests/fuzz/ with them in place of the generated files."""
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if not cc:
        print("skip: no C compiler")
        return
    tmp = tempfile.mkdtemp(prefix="om-gencc-")
    try:
        for d in ("src", "include", os.path.join("tests", "fuzz")):
            shutil.copytree(os.path.join(ROOT, d), os.path.join(tmp, d),
                            ignore=shutil.ignore_patterns("corpus"))
        for rel in OUTPUTS:
            shutil.copy(os.path.join(EXPECTED, os.path.basename(rel)), os.path.join(tmp, rel))
        # fuzz_exec.c's hand-written wrappers name the project's kinds too: its kinds.h is the
        # test table's followed by the project's others.
        kinds = os.path.join(tmp, "tests", "fuzz", "gen", "kinds.h")
        xs = re.findall(r"X\((\w+), \"[^\"]*\"\)", open(kinds).read())
        extra = [m for m in re.findall(r"X\((\w+), (\"[^\"]*\")\)",
                                       open(os.path.join(ROOT, "tests/fuzz/gen/kinds.h")).read())
                 if m[0] not in xs]
        if extra:
            text = open(kinds).read().rstrip("\n")
            if text.endswith("(X)"):
                text += " \\"
            lines = ["    X(%s, %s)" % m for m in extra]
            text += "\n" + " \\\n".join(lines) + "\n"
            text = text.replace(")\n    X(", ") \\\n    X(")
            open(kinds, "w").write(text)
        for src in ("src/server/gen/decoders.c", "src/client/gen/stubs.c",
                    "src/client/gen/remote_stubs.c", "tests/fuzz/fuzz_exec.c"):
            res = subprocess.run([cc, "-std=c11", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
                                  "-Wshadow", "-Wno-unused-parameter", "-include",
                                  os.path.join(TABLE, "stubs.h"), "-I", os.path.join(tmp, "include"),
                                  "-I", tmp, "-DOM_FAKECUDA_PATH=\"x\"", os.path.join(tmp, src)],
                                 capture_output=True, text=True)
            sys.stdout.write(res.stderr[:3000])
            expect(res.returncode == 0, "the test table's %s compiles" % src)
        # Loopback: the client stubs call the decoders (loop_*.c): counts, ranges, handles.
        exe = os.path.join(tmp, "loop")
        res = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-Wno-unused-parameter",
                              "-include", os.path.join(TABLE, "stubs.h"),
                              "-I", os.path.join(tmp, "include"), "-I", tmp, "-o", exe,
                              os.path.join(tmp, "src/server/gen/decoders.c"),
                              os.path.join(tmp, "src/client/gen/stubs.c"),
                              os.path.join(tmp, "src/client/gen/remote_stubs.c"),
                              os.path.join(TABLE, "loop_server.c"),
                              os.path.join(TABLE, "loop_client.c")],
                             capture_output=True, text=True)
        sys.stdout.write(res.stderr[:3000])
        expect(res.returncode == 0, "the loopback of the test table builds")
        if res.returncode == 0:
            res = subprocess.run([exe], capture_output=True, text=True)
            sys.stdout.write(res.stdout + res.stderr)
            expect(res.returncode == 0, "the loopback's calls behave")
    finally:
        shutil.rmtree(tmp)


def main():
    expected_outputs("--update" in sys.argv)
    compiles()
    rejected_rows()
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
