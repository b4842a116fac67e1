# SPDX-License-Identifier: MIT
"""The modules family (tests/cpu/modules_driver.c, api/remote/modules.tsv): occupancy, files,
the linker, libraries, stream values and attributes.
"""
import os
import re
import subprocess

from harness import SANITIZER, check, driver_program, wait_for


MODULES_DRIVER = os.environ.get("OM_MODULES_DRIVER", "build/tests/modules-driver")


def modules_driver(e, *args, stdin=None):
    return driver_program(e, MODULES_DRIVER, args, stdin=stdin)


def fake_resident(b, smem):
    """The double's occupancy model (tests/cpu/fakecuda/fake_modules.c): at most 32 blocks,
    2048 threads and 232448 bytes of shared memory on a multiprocessor."""
    n = min(32, 2048 // b)
    return min(n, 232448 // smem) if smem else n


def expected_block_size(limit, warp, sms, smem_of):
    """The documented search: candidates from the limit down by the warp size, the most
    resident threads wins, the largest block size among equals."""
    best = (0, 0, 0)
    b = limit
    while b > 0:
        n = fake_resident(b, smem_of(b))
        if n * b > best[0]:
            best = (n * b, b, n)
        b = b - b % warp if b % warp else b - warp
    return best[2] * sms, best[1]


def test_modules_occupancy_answers_and_block_size_search(daemon):
    """Every occupancy entry point answers what the double computes; the block-size search runs
    in the client and calls the program's own callback for each candidate; flags, launch
    attributes with handles and a foreign stream are refused; another client's kernel is refused
    by every call."""
    e = daemon(start=False)
    mlog = os.path.join(e.dir, "modules")
    e.env["FAKECUDA_MODULES_LOG"] = mlog
    e.start()
    p = modules_driver(e, "occupancy")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "occupancy ok" in out, "occupancy: %r %r" % (out, err))
    check(not SANITIZER.search(err), "sanitizer: " + err)
    got = {}
    for line in out.splitlines():
        k, _, v = line.rpartition(" ")
        got[k] = v
    check(got["active 256 0"] == str(fake_resident(256, 0)), out)
    check(got["active 96 20000"] == str(fake_resident(96, 20000)), out)
    check(got["active again 96 20000"] == got["active 96 20000"], out)
    check(got["flags2"] == "1", "flags outside the mask: INVALID_VALUE: " + out)
    check(got["available 4 256"] == str(232448 // 4 // 128 * 128), out)
    # the double: a function's MAX_THREADS_PER_BLOCK is 1000 (attribute + 1000), the
    # device's 1024, its warp size attribute 10 (echoed), 132 multiprocessors
    grid, block = expected_block_size(1000, 10, 132, lambda b: b * 64)
    want = "potential callback %d %d calls %d first 1000 last 10" % (grid, block, 100)
    check(want in out, "expected %r in %r" % (want, out))
    grid, block = expected_block_size(300, 10, 132, lambda b: 30000)
    check("potential fixed %d %d calls 0" % (grid, block) in out, out)
    check(got["potential flags2"] == "1", out)
    check(got["clustersize 128"] == "16", out)
    check(got["clusters 512 1000 2"] == str(132 * fake_resident(512, 1000) // 2), out)
    check(got["clusters event"] == "801", "an attribute naming a handle: NOT_SUPPORTED")
    check(got["clusters stream"] == "400", "a stream the client does not own: "
          "INVALID_HANDLE: " + out)
    calls = open(mlog).read().splitlines()
    check(calls.count("occupancy 96 20000 1") == 1,
          "the flags reached the driver, the same question once: %r" % calls[:5])
    check("occupancy 1000 64000 0" in calls and "occupancy 10 640 0" in calls,
          "the callback's sizes reached the driver")
    check(sum(1 for c in calls if c.startswith("occupancy")) == 2 + 100 + 30,
          "one driver call per candidate: %r" % calls)
    check("clusters 512,1,1 1000 cluster 2" in calls, "the cluster attribute: %r" % calls)
    # another client's kernel
    holder = modules_driver(e, "holdk", stdin=subprocess.PIPE)
    handles = holder.stdout.readline().split()
    check(len(handles) == 2 and all(h.isdigit() for h in handles),
          "holder printed its kernel and library: %r" % handles)
    p = modules_driver(e, "stealk", *handles)
    out, err = p.communicate(timeout=30)
    holder.stdin.close()
    holder.wait(timeout=30)
    check(p.returncode == 0, "stealk: %r %r" % (out, err))
    for what in ("active", "flags", "available", "potential", "clustersize", "clusters",
                 "name", "library", "count", "enumerate"):
        check("steal %s 400" % what in out, "%s with a foreign kernel: %r" % (what, out))


def test_modules_stream_values_on_the_clients_memory(daemon):
    """cuStreamWriteValue/WaitValue (v2 and v1 names) reach the driver for the client's memory
    and its streams; an address outside its memory, flags outside the mask and a stream it
    does not own are refused before the driver sees them."""
    e = daemon(start=False)
    mlog = os.path.join(e.dir, "modules")
    e.env["FAKECUDA_MODULES_LOG"] = mlog
    e.start()
    p = modules_driver(e, "values")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "values ok" in out, "values: %r %r" % (out, err))
    check(not SANITIZER.search(err), "sanitizer: " + err)
    check("read a5a5a5a5 77 1122334455667788" in out, "the writes landed: " + out)
    for k, rc in (("outside32", 1), ("outside64", 1), ("waitoutside", 1), ("hostaddr", 1),
                  ("writeflags", 1), ("waitflags", 1), ("foreignstream", 400),
                  ("foreignid", 400), ("ids", 1), ("batchoutside", 1), ("batchkind", 1),
                  ("batchforeign", 400), ("batchflags", 1)):
        check("%s %d" % (k, rc) in out, "%s: %d expected in %r" % (k, rc, out))
    calls = open(mlog).read().splitlines()
    want = ["write32 2779096485 0", "write32 77 1", "write64 1234605616436508552 0",
            "wait32 2779096485 0x1 now 2779096485",
            "wait64 5 0x40000000 now 1234605616436508552", "batch 4", "write32 11 0",
            "write64 22 0", "wait32 11 0 now 11", "op 6"]
    check("batch 11 22" in out, "the batch's writes landed: " + out)
    check(calls == want, "exactly the client's calls reached the driver: %r" % calls)


def test_modules_loaded_from_files_the_client_reads(daemon):
    """cuModuleLoad and cuLibraryLoadFromFile: the client reads the file and sends its bytes
    (with the NUL a text image ends at); a missing file is FILE_NOT_FOUND; the JIT logs of a load
    that asks for them are what the driver wrote in the server (a new image's load, or for an
    image the server had loaded, its JIT again through the linker), within the program's sizes,
    with the filled sizes and the wall time written back; a load that asks for no log gets empty
    answers; parameter queries answer the kernel's layout and refuse handles the process never
    obtained."""
    e = daemon(start=False)
    e.env["FAKECUDA_MODULE_LOADS"] = os.path.join(e.dir, "module-loads")
    e.start()
    path = os.path.join(e.dir, "module.fakecubin")
    image = "fakecubin\nfromfile:8,4,2\n"
    with open(path, "w") as f:
        f.write(image)
    p = modules_driver(e, "files", path)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "files ok" in out, "files: %r %r" % (out, err))
    check(not SANITIZER.search(err), "sanitizer: " + err)
    again = "fake linker: created\nfake linker: added image (%d bytes)\nfake linker: complete\n" \
        % (len(image) + 1)
    loaded = "fake jit: loaded an image of 16 bytes\n"
    for want in ("logs [%s] [] %d 1 1.5" % (again, len(again) + 1),
                 "exlogs [%s] 20" % loaded[:19], "exlogs2 [%s] %d" % (loaded.replace("16", "17"),
                                                                       len(loaded) + 1),
                 "nolog X 0 0", "bad 200 [fake jit: not an image (10 bytes)\n] 35",
                 # a PTX that does not compile: the driver's library load says success (580),
                 # the server asks the module load, whose answer and log are the program's
                 "badptx 218 [fake ptxas: aborted due to errors (21 bytes)\n] 46",
                 "badptxnolog 218", "badptxinfo 218", "badptxzero 218"):
        check(want in out, "expected %r in %r" % (want, out))
    calls = open(os.path.join(e.dir, "module-loads")).read().splitlines()
    check(calls == ["module load 218", "library unload 0"] * 4,
          "only the four failed PTX loads were loaded again as modules: %r" % calls)
    for want in ("param 0 0 8", "param 1 8 4", "param 2 12 2", "param3 1",
                 "paramforeign 400", "loaded 1", "missing 301", "kparam 2 12 2"):
        check(want in out.splitlines(), "expected %r in %r" % (want, out))
    check("loaded a new module image of %d bytes" % (len(image) + 1) in e.log("server.log"),
          "the file's bytes reached the server")


def test_modules_linker_round_trip_with_logs_in_the_client(daemon):
    """cuLinkCreate/AddData/AddFile/Complete/Destroy: options travel as values, the server's
    logs fill the program's buffers and size slots, an input's file is read by the client, the
    cubin comes back into the client's memory (in pieces when large) and loads; options that
    are arrays of pointers are refused; a link state left at the end is destroyed."""
    e = daemon(start=False)
    mlog = os.path.join(e.dir, "modules")
    e.env["FAKECUDA_MODULES_LOG"] = mlog
    e.start()
    path = os.path.join(e.dir, "b.ptx")
    with open(path, "w") as f:
        f.write("fakecubin\nlinked_b:4,4\n")
    p = modules_driver(e, "link", path)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "link ok" in out, "link: %r %r" % (out, err))
    check(not SANITIZER.search(err), "sanitizer: " + err)
    created = "fake linker: created\n"
    added = created + "fake linker: added a.ptx (22 bytes)\nfake linker: added %s (24 " \
        "bytes)\n" % path
    info = added + "fake linker: complete\n"
    error = "fake linker: garbage.o is not an image\n"
    inlog = "fake ptxas: compiled a.ptx\n"
    for want in ("created [%s]" % created, "input log [%s] %d" % (inlog, len(inlog) + 1),
                 "badinput 200",
                 "error [%s] %d" % (error, len(error) + 1),
                 "cubin 35 [fakecubin\nlinked_a:8\nlinked_b:4,4\n]",
                 "info [%s] %d wall 1.5" % (info, len(info) + 1), "linked_b 1 4 4",
                 "again 1", "destroyed 400 400", "pointers 801", "big 1 1"):
        check(want in out, "expected %r in %r" % (want, out))
    wait_for(lambda: "disconnected" in e.log("server.log"), what="the session to end")
    calls = open(mlog).read().splitlines()
    check("linkcreate option 4 256" in calls and "linkcreate option 12 1" in calls,
          "the option values reached the driver: %r" % calls)
    # the log buffers are the server's own: no address of the client's reaches the driver
    mine = re.search(r"^buffers (\d+) (\d+)$", out, re.M).groups()
    given = [c.split()[-1] for c in calls if c.startswith(("linkcreate option 3 ",
                                                            "linkcreate option 5 "))]
    check(len(given) == 2 and not set(given) & set(mine),
          "the driver got the server's log buffers, not the client's: %r %r" % (given, mine))
    check("linkadd 1 24 %s options 0" % path in calls, "the file's bytes: %r" % calls)
    check("linkadd 1 22 a.ptx options 3" in calls, "an input's options, its logs too: %r" % calls)
    check(calls.count("linkdestroy") == 2, "both link states destroyed: %r" % calls)


def test_modules_library_and_function_queries(daemon):
    """Counts, enumeration (the enumerated kernels get their layouts, so they launch and
    answer parameter queries), names kept by the client, a function's module and a kernel's
    library (modules are the server's libraries); an image loaded twice stays loaded until its
    second unload (CuPy's test_ufunc_kernel_cache: its threads load one kernel's image each and
    unload the extra ones); another client's kernels and libraries are refused
    (modules_occupancy_answers_and_block_size_search)."""
    e = daemon()
    p = modules_driver(e, "queries")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "queries ok" in out, "queries: %r %r" % (out, err))
    check(not SANITIZER.search(err), "sanitizer: " + err)
    for want in ("count 2", "module same 1", "names q_one q_two stable 1",
                 "enumerated layout 8 8", "same handle 1", "owner 1 1", "toomany 1",
                 "twice unloaded 400"):  # CUDA_ERROR_INVALID_HANDLE once both are unloaded
        check(want in out.splitlines(), "expected %r in %r" % (want, out))


def test_tables_served_in_remote_mode(daemon):
    """The private tables cuBLAS and cuFFT ask for (21318c60, 6e163fbe) are the shim's in remote
    mode, sized as the driver's: slot 4 says whether a context was given, slots 51 and 39 give
    a stream's id as cuStreamGetId does (the NULL stream's its own), slot 7 calls back once per
    function of the module with the functions cuModuleEnumerateFunctions gives; other slots
    refuse with NOT_SUPPORTED; a table the shim neither serves nor forwards (the double's sized
    test table) is NOT_FOUND although the local driver has it; the runtime's context checks
    (263e8860) come from the local driver with slot 2 given the local driver's context for a
    token of ours (the double echoes it), any other context as it is, other slots unchanged."""
    e = daemon()
    p = modules_driver(e, "tables")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "tables ok" in out, "tables: %r %r" % (out, err))
    check(not SANITIZER.search(err), "sanitizer: " + err)
    for want in ("sizes 744 792", "slot4 null 0 ctx 1", "stream id same 1 null stream 1",
                 "other slot 801", "functions 3 same 1", "module other slot 801",
                 "unknown table 500",
                 "checks token replaced 1 stable 1 other kept 1 others 42"):
        check(want in out.splitlines(), "expected %r in %r" % (want, out))


def test_modules_streams_context_and_device(daemon):
    """cuStreamGetCtx/_v2 and cuStreamGetDevice answer the context a stream was created in (the
    current one for the NULL stream); a stream the client does not own, or destroyed with the v1
    cuStreamDestroy, is INVALID_HANDLE."""
    e = daemon()
    p = modules_driver(e, "streamctx")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "streamctx ok" in out, "streamctx: %r %r" % (out, err))
    for want in ("s1 ctx 1", "s1 device 0", "s0 ctx 1 green 1", "null device 0",
                 "foreign 400", "destroyed 400"):
        check(want in out.splitlines(), "expected %r in %r" % (want, out))


def test_modules_stream_attributes_and_attached_memory(daemon):
    """cuStreamSet/GetAttribute and CopyAttributes on the client's streams (an access policy
    window only over its memory; attributes outside the stream set refused);
    cuStreamAttachMemAsync accepts the client's whole managed allocations only."""
    e = daemon(start=False)
    mlog = os.path.join(e.dir, "modules")
    e.env["FAKECUDA_MODULES_LOG"] = mlog
    e.start()
    p = modules_driver(e, "attrs")
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and "attrs ok" in out, "attrs: %r %r" % (out, err))
    check(not SANITIZER.search(err), "sanitizer: " + err)
    for want in ("priority -2", "window 1 4096", "window outside 1", "attr 7 801",
                 "copied -2", "get foreign 400", "get attr 65 1", "copy foreign 400",
                 "attach 0 0",
                 "attach part 1", "attach device 1", "attach flags 1", "attach foreign 400"):
        check(want in out.splitlines(), "expected %r in %r" % (want, out))
    calls = open(mlog).read().splitlines()
    check(calls == ["setattr 8", "setattr 1", "copyattrs"],
          "only the accepted calls reached the driver: %r" % calls)
