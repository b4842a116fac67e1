#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed inputs of the fuzz corpora (tests/fuzz/corpus/<target>/seed-*).

Run it after a protocol change; libFuzzer adds what it finds beside the seeds
(`make fuzz`), and CTest replays every file of each corpus.
"""
import os
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ENTRIES = os.path.join(HERE, "..", "..", "src", "common", "gen", "entries.h")
MAGIC = 0x53504D4F


MAJOR = int(re.search(r"#define OM_PROTO_MAJOR (\d+)", open(os.path.join(
    HERE, "..", "..", "include", "openmps", "protocol.h")).read()).group(1))


def msg(mtype, payload=b"", major=MAJOR, length=None):
    return struct.pack("<IHHHHI", MAGIC, major, 0, mtype, 0,
                       len(payload) if length is None else length) + payload


def limits(atp=0, prio=0, mem=()):
    mem = list(mem) + [0] * (64 - len(mem))
    return struct.pack("<IIII", atp, prio, len([m for m in mem if m]), 0) + \
        struct.pack("<64Q", *mem)


def device(i):
    return struct.pack("<II", i, 0) + bytes(range(16)) + b"0000:10:00.0".ljust(32, b"\0") + \
        b"fake GPU".ljust(96, b"\0") + struct.pack("<III", 132, 8, 16)


def part(flags=0, dev=0, chunk_sms=0, serial=0, mask=(0, 0)):
    """struct om_part_assign: a client's static SM partition"""
    return struct.pack("<IIIIQQQ", flags, dev, chunk_sms, 0, serial, *mask)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# fuzz_exec (tests/fuzz/fuzz_exec.c): records of u16 index (| 0x8000 posted), u16 length,
# payload; u64 words 0xF0F0F0 << 40 | offset << 8 | n name the n-th value: the victim's
# handles first (VICTIM), then every u64 the fuzzed session was answered, in order (F(j)).
def entry_indices():
    """Entry points by symbol, the private operations of api/ops.tsv as op_<name>."""
    with open(ENTRIES) as f:
        text = f.read()
    idx = {m.group(2): int(m.group(1)) for m in re.finditer(r"X\((\d+), (\w+), \w+\)", text)}
    idx.update({"op_" + m.group(1): int(m.group(2))
                for m in re.finditer(r"#define OM_IDX_op_(\w+) (\d+)", text)})
    return idx


IDX = entry_indices()
STAGE_APPEND, STAGE_RESET, POSTED = 0x7FFF, 0x7FFE, 0x8000
(V_A1, V_A2, V_A1_64, V_S1, V_S2, V_E1, V_E2, V_LIB, V_K, V_HOST, V_DEFAULT) = range(11)


def image_keys(data):
    """om_image_keys (src/common/image.c), for seeds that name an image by its keys."""
    M = (1 << 64) - 1

    def rotl(v, r):
        return ((v << r) | (v >> (64 - r))) & M
    n = len(data)
    h1, h2 = 0x9e3779b97f4a7c15 ^ n, 0x6a09e667f3bcc908 ^ ((n * 3) & M)
    i = 0
    while i + 8 <= n:
        w = int.from_bytes(data[i:i + 8], "little")
        h1 ^= rotl((w * 0xff51afd7ed558ccd) & M, 31)
        h1 = (rotl(h1, 27) * 5 + 0x52dce729) & M
        h2 ^= rotl((w * 0xc2b2ae3d27d4eb4f) & M, 29)
        h2 = (rotl(h2, 33) * 0x9e3779b97f4a7c15 + 0x165667b19e3779f9) & M
        i += 8
    w = int.from_bytes(data[i:], "little")
    h1 ^= (w * 0xc4ceb9fe1a85ec53) & M
    h2 ^= (w * 0x94d049bb133111eb) & M
    h1 ^= h1 >> 33
    h1 = (h1 * 0xff51afd7ed558ccd) & M
    h2 ^= h2 >> 31
    h2 = (h2 * 0xbf58476d1ce4e5b9) & M
    return h1 ^ (h1 >> 29), h2 ^ (h2 >> 32)


def ref(n, off=0):
    return 0xF0F0F0 << 40 | (off & 0xFFFFFFFF) << 8 | n


def F(j, off=0):
    return ref(11 + j, off)


def rec(entry, *words, tail=b"", posted=False):
    payload = struct.pack("<%dQ" % len(words), *words) + tail
    op = entry if isinstance(entry, int) else IDX[entry] | (POSTED if posted else 0)
    return struct.pack("<HH", op, len(payload)) + payload


def stage(data):
    return struct.pack("<HH", STAGE_RESET, 0) + struct.pack("<HH", STAGE_APPEND, len(data)) + data


def launch_dims(gx, bx):
    # exec.c's packing: (gx | gy << 32), (gz | bx << 32), (by | bz << 32)
    return gx | 1 << 32, 1 | bx << 32, 1 | 1 << 32


def exec_seeds():
    # Text images travel with their NUL, as the shim sends them (api/modules.c's image_size).
    image = b"fakecubin\nfill_u32:8,4,4\nfail:8\n\0"
    victim_image = b"fakecubin\nvictim_fill:8,4,4\nvictim_other:8\n\0"
    args = struct.pack("<QII", F(9), 7, 16)
    yield "alloc-copy", b"".join([
        rec("cuMemAlloc_v2", 4096),
        rec("op_copy_htod", F(0), 8, 0, tail=b"12345678"),
        rec("op_copy_dtoh", F(0), 8, 0),
        rec("op_memset", F(0), 0x5A, 4, 1024, 0, 1),
        rec("op_copy_dtod", F(0, 16), F(0), 8, 0, 1),
        rec("cuMemFree_v2", F(0)),
        rec("cuMemAlloc_v2", 4096),  # from the session's cache of freed allocations
        rec("cuMemFree_v2", F(2))])
    yield "stream-event", b"".join([
        rec("cuStreamCreate", 0, 0), rec("cuEventCreate", 0),
        rec("cuEventRecord", F(1), F(0)), rec("cuStreamWaitEvent", 0, F(1), 0),
        rec("cuEventSynchronize", F(1)), rec("cuEventQuery", F(1)), rec("cuStreamQuery", F(0)),
        rec("cuStreamGetFlags", F(0)), rec("cuStreamGetPriority", 0),
        rec("cuEventElapsedTime_v2", F(1), F(1)), rec("cuStreamSynchronize", 0),
        rec("cuEventDestroy_v2", F(1)), rec("cuStreamDestroy_v2", F(0)),
        rec("cuCtxSynchronize")])
    g, m, b = launch_dims(2, 64)
    attr = struct.pack("<iiI", 8, 0, 1).ljust(72, b"\0")  # priority
    yield "library-launch", b"".join([
        stage(image), rec("cuLibraryLoadData", len(image), 0, 0, 1),  # staged (keys unread)
        rec("cuLibraryGetKernel", F(0), tail=b"fill_u32"),  # F(1) kernel, F(2) count, F(3..8)
        rec("cuMemAlloc_v2", 4096),  # F(9)
        rec("cuLaunchKernel", F(1), g, m, b, 0, 0, tail=args),
        rec("cuKernelGetAttribute", 0, F(1), 0), rec("cuKernelSetAttribute", 8, 1000, F(1), 0),
        rec("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", F(1), 64, 0, 0),
        rec("cuLaunchKernelEx", F(1), g, m, b, 0, 0, 1, tail=attr + args),
        rec("op_copy_dtoh", F(9), 64, 0), rec("cuLibraryUnload", F(0))])
    yield "victim-handles", b"".join([
        rec("cuMemAlloc_v2", 4096),  # F(0): its own, beside the victim's
        rec("op_copy_dtod", F(0), ref(V_A1), 16, 0, 1),
        rec("op_copy_dtod", ref(V_A2), F(0), 16, 0, 1),
        rec("op_copy_2d", 2, 2, ref(V_A2), 256, F(0), 256, 16, 0, 4, 1),
        rec("op_memset_2d", ref(V_A2), 256, 3, 1, 16, 4, 0, 1),
        rec("op_copy_dtoh_pinned", ref(V_HOST), F(0), 8, 0),
        rec("cuStreamSynchronize", ref(V_S1)), rec("cuEventRecord", ref(V_E1), 0),
        rec("cuStreamWaitEvent", 0, ref(V_E2), 0),
        rec("op_memset", ref(V_A1), 1, 1, 16, 0, 1), rec("cuMemFree_v2", ref(V_A1)),
        rec("op_copy_htod", ref(V_A2), 4, 0, tail=b"abcd"),
        rec("op_copy_dtoh", ref(V_A1_64), 16, 0),
        rec("cuLaunchKernel", ref(V_K), g, m, b, 0, 0, tail=struct.pack("<QII", ref(V_A1), 1, 1)),
        rec("cuLibraryGetKernel", ref(V_LIB), tail=b"victim_fill"),
        rec("cuStreamDestroy_v2", ref(V_S2)), rec("cuEventDestroy_v2", ref(V_E2)),
        rec("cuMemFreeHost", ref(V_HOST)), rec("cuStreamQuery", ref(V_DEFAULT)),
        rec("op_copy_htod_pinned", ref(V_A1), ref(V_HOST), 8, 0)])
    yield "same-image", b"".join([
        rec("cuLibraryLoadData", len(victim_image), *image_keys(victim_image), 0),  # by keys
        rec("cuLibraryLoadData", len(victim_image), 1, 2, 0),  # keys of no image: 0
        stage(victim_image), rec("cuLibraryLoadData", len(victim_image), 0, 0, 1),
        rec("cuLibraryGetKernel", F(0), tail=b"victim_fill"),
        rec("cuMemAlloc_v2", 64),  # F(9)
        rec("cuLaunchKernel", F(1), g, m, b, 0, 0, tail=args)])
    yield "hostmem", b"".join([
        rec("cuMemHostAlloc", 8192),  # F(0) address, F(1) length, F(2) device address
        rec("cuMemAlloc_v2", 4096),  # F(3)
        rec("op_copy_htod_pinned", F(3), F(0), 64, 0),
        rec("op_copy_dtoh_pinned", F(0, 64), F(3), 64, 0),
        rec("op_copy_dtoh_pinned", F(0, 8190), F(3), 64, 0),  # past the region's end
        rec("cuMemFreeHost", F(0)), rec("cuMemHostRegister_v2", 0x700000000000, 4096)])
    yield "copy-2d", b"".join([
        rec("cuMemAlloc_v2", 65536), stage(bytes(range(64))),
        rec("op_copy_2d", 1, 2, 0, 0, F(0), 256, 16, 0, 4, 1),
        rec("op_copy_2d", 2, 1, F(0), 256, 0, 0, 16, 0, 4, 1),
        rec("op_copy_2d", 2, 2, F(0), 256, F(0, 4096), 512, 16, 0, 4, 0),
        rec("op_memset_2d", F(0), 256, 3, 1, 16, 4, 0, 1),
        rec("op_memset_2d", F(0), 256, 3, 4, 16, 4, 0, 1),
        rec("op_memset_2d", F(0), 256, 3, 2, 200, 255, 0, 1)])  # past the end
    yield "devices", b"".join([
        rec("cuDeviceGetName", 0), rec("cuDeviceGetPCIBusId", 0), rec("cuDeviceTotalMem_v2", 0),
        rec("cuDeviceGetAttribute", 16, 0), rec("cuDeviceGetUuid_v2", 0),
        rec("cuDeviceGetName", 5), rec("cuMemGetInfo_v2"), rec("cuCtxGetLimit", 0),
        rec("cuCtxSetLimit", 0, 1024), rec("cuCtxGetStreamPriorityRange"), rec(0),
        rec(IDX["op_memset"] | POSTED, 1, 1, 1, 1, 0, 0), rec("cuCtxSynchronize")])
    yield "managed-posted", b"".join([
        rec("cuMemAllocManaged", 4096, 1),
        rec("op_memset", F(0), 9, 2, 2048, 0, 0, posted=True),
        rec("cuStreamSynchronize", 0), rec("cuMemFree_v2", F(0))])
    # Images whose own headers reach past what was staged: the driver takes no size, so the
    # server must refuse them rather than let the driver read past its staging buffer.
    elf = bytearray(64)
    elf[0:5] = b"\x7fELF\x02"
    struct.pack_into("<QQ", elf, 32, 64, 1 << 20)  # program headers at 64, sections at 1 MiB
    struct.pack_into("<HHHH", elf, 54, 56, 1, 64, 8)
    yield "image-past-staged", b"".join([
        stage(b"fakecubin\nfill_u32:8,4,4\n"), rec("cuLibraryLoadData", 25, 0, 0, 1),  # no NUL
        stage(bytes(elf)), rec("cuLibraryLoadData", len(elf), 0, 0, 1),
        stage(struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 4096)),
        rec("cuLibraryLoadData", 16, 0, 0, 1)])
    # Host nodes (api/remote/hostnodes.tsv): made, read back, set, set in an executable graph,
    # launched (the check layer's no-op stands in for the trampoline); a host function on a
    # stream that is not capturing (nothing made); a host node after another client's handle.
    yield "host-nodes", b"".join([
        rec("cuGraphCreate", 0),
        rec("cuGraphAddHostNode", F(0), 0, 0x1234, 0x5678, 1),
        rec("cuGraphHostNodeGetParams", F(1)),
        rec("cuGraphHostNodeSetParams", F(1), 0x9999, 0),
        rec("cuGraphInstantiateWithFlags", F(0), 0),
        rec("cuGraphExecHostNodeSetParams", F(5), F(1), 0x1, 0x2),
        rec("cuGraphLaunch", F(5), 0, posted=True),
        rec("cuLaunchHostFunc", 0, 0x1, 0x2, 0),
        rec("cuGraphAddHostNode", ref(V_S1), 1, ref(V_E1), 0x1, 0x2, 0),
        rec("cuStreamSynchronize", 0)])
    # An empty append to a session that never staged (its buffer is still NULL).
    yield "stage-empty", struct.pack("<HH", STAGE_APPEND, 0) + rec("cuLibraryLoadData", 0)
    # Shareable handles (api/shareable.c): a pool shareable as a descriptor and a fabric handle,
    # its fabric export imported again (F(1..8) the 64 bytes, F(9) the new pool), pool memory
    # (F(10), F(11)) exported as pointer data (F(12..19)) and imported into the new pool (its
    # own memory already: refused, the import freed again); descriptor imports without one.
    props = struct.pack("<iiiiQQH", 1, 9, 1, 0, 0, 0, 0).ljust(88, b"\0")
    yield "shareable", b"".join([
        rec("cuMemPoolCreate", tail=props),
        rec("cuMemPoolExportToShareableHandle", F(0), 8, 0),
        rec("cuMemPoolImportFromShareableHandle", 8, 0, *[F(j) for j in range(1, 9)]),
        rec("cuMemAllocFromPoolAsync", 65536, F(0), 0),
        rec("cuMemPoolExportPointer", F(10)),
        rec("cuMemPoolImportPointer", F(9), *[F(j) for j in range(12, 20)]),
        rec("cuMemPoolExportPointer", ref(V_A1)),
        rec("cuMemPoolExportToShareableHandle", F(0), 1, 0),
        rec("cuMemImportFromShareableHandle", 1, 0),
        rec("cuMemPoolImportFromShareableHandle", 1, 0),
        rec("cuMemExportToShareableHandle", 0x1234, 1, 0),
        rec("cuMemPoolImportPointer", F(0), *[F(j) for j in range(12, 20)]),
        rec("cuMemFree_v2", F(10)), rec("cuMemPoolDestroy", F(9))])
    # Green contexts (api/green.c): the device's SM resource (18 words, F(0..17)) split in two
    # (F(18) the count, the groups F(19..36) and F(37..54), the rest F(55..72)), a descriptor of
    # the first group (F(73)), its green context (F(74)), the context's resource (F(75..92)), a
    # stream in it (F(93)) and back (F(94)), its token made current, an event (F(95)) recorded
    # and waited on; then forged resources, the victim's stream and event, and the destruction.
    res = [F(j) for j in range(0, 18)]
    forged = [F(j) for j in range(0, 17)] + [0x4141414141414141]
    yield "green", b"".join([
        rec("cuDeviceGetDevResource", 0, 1),
        rec("cuDevSmResourceSplitByCount", 2, 1, 1, 0, 8, *res),
        rec("cuDevResourceGenerateDesc", 1, *[F(j) for j in range(19, 37)]),
        rec("cuGreenCtxCreate", F(73), 0, 1),
        rec("cuGreenCtxGetDevResource", F(74), 1),
        rec("cuGreenCtxStreamCreate", F(74), 1, 0),
        rec("cuStreamGetGreenCtx", F(93)),
        rec("cuCtxFromGreenCtx", F(74)),
        rec("cuEventCreate", 0),
        rec("cuGreenCtxRecordEvent", F(74), F(95)),
        rec("cuGreenCtxWaitEvent", F(74), F(95)),
        rec("cuGreenCtxRecordEvent", F(74), ref(V_E1)),
        rec("cuGreenCtxStreamCreate", ref(V_S1), 1, 0),
        rec("cuDevSmResourceSplitByCount", 2, 1, 1, 0, 8, *forged),
        rec("cuDevResourceGenerateDesc", 1, *forged),
        rec("cuDevResourceGenerateDesc", 100000, *res),
        rec("cuCtxFromGreenCtx", 0),
        rec("cuGreenCtxDestroy", F(74)),
        rec("cuStreamGetGreenCtx", F(93))])
    yield "malformed", b"".join(struct.pack("<HH", i, 3) + b"\x01" * 3 for i in [
        IDX["cuMemAlloc_v2"], IDX["op_copy_htod"], IDX["cuLaunchKernel"],
        IDX["op_copy_2d"], IDX["cuStreamCreate"], IDX["cuLibraryGetKernel"]])
    # Pinned memory is device memory to the driver (unified addressing): the answer's third word
    # is its device pointer, which the session may set and copy to like any allocation of its.
    yield "pinned-device", b"".join([
        rec("cuMemHostAlloc", 8192, 0),  # F(0) address, F(1) length, F(2) device pointer
        rec("op_memset", F(2), 0x5A, 1, 8192, 0, 1),
        rec("cuMemAlloc_v2", 4096),  # F(3)
        rec("op_copy_dtod", F(3), F(2, 64), 4096, 0, 1),
        rec("cuMemFreeHost", F(0))])
    # A 2D set of rows of 0 elements sets nothing, however many rows: the driver is not asked to
    # walk 2^40 of them (the double would, for hours). Arguments: dst, pitch, value, element
    # size, width, height, stream, wait.
    yield "memset2d-empty-rows", b"".join([
        rec("cuMemAlloc_v2", 4096),
        rec("op_memset_2d", F(0), 0, 1, 2, 0, 1 << 40, 0, 1),
        rec("op_memset_2d", F(0), 2, 1, 4, 0, 1 << 40, 0, 1),
        rec("op_memset_2d", F(0), 1, 1, 1, 0, (1 << 64) - 1, 0, 1),
        rec("op_memset_2d", F(0), 4096, 1, 1, 64, 0, 0, 1)])
    # An array the session still holds at its end: its count in the memory cap goes with it.
    yield "array-held", b"".join([
        rec("cuArrayCreate_v2", tail=struct.pack("<QQII", 16, 16, 1, 1))])


# One seed per generated row (api/remote/*.tsv, form gen): a session makes one of each handle
# the rows take, then calls the entry well-formed, with the victim's handles and ranges, and with
# huge values; the decoder must refuse the last two before the driver sees them (the check layer
# of tests/fuzz/gen/checks.c aborts otherwise).
def gen_rows():
    import sys
    sys.path.insert(0, os.path.join(HERE, "..", "..", "api"))
    import remote
    protos, types, kinds = remote.load_protos(), remote.load_types(), remote.load_handles()
    return types, [r for r in remote.load_rows(protos, kinds, None, types) if r["form"] == "gen"]


# the prelude's answers: F(0) device memory, F(1) stream, F(2) event, F(3) library, F(4) kernel
GEN_IMAGE = b"fakecubin\nfill_u32:8,4,4\n\0"
GEN_MINE = {"ptr": F(0), "stream": F(1), "event": F(2), "library": F(3), "function": F(4),
            "kernel": F(4)}
GEN_VICTIM = {"ptr": ref(V_A1), "stream": ref(V_S1), "event": ref(V_E1), "library": ref(V_LIB),
              "function": ref(V_K), "kernel": ref(V_K)}


def gen_prelude():
    return b"".join([rec("cuMemAlloc_v2", 4096), rec("cuStreamCreate", 0, 0),
                     rec("cuEventCreate", 0), stage(GEN_IMAGE),
                     rec("cuLibraryLoadData", len(GEN_IMAGE)),
                     rec("cuLibraryGetKernel", F(3), tail=b"fill_u32")])


def gen_request(types, r, handles, huge):
    """The payload of r's request as its decoder reads it: each parameter's kind writes its
    part (api/kinds.py, Kind.seed), as the generated client stub would."""
    return b"".join(p.seed(handles, huge, types) for p in r["params"])


def gen_seeds():
    types, rows = gen_rows()
    for r in rows:
        posted = bool(r["opts"].get("post"))
        op = IDX[r["sym"]] | (POSTED if posted else 0)

        def one(payload):
            return struct.pack("<HH", op, len(payload)) + payload
        yield "gen-" + r["sym"], gen_prelude() + b"".join([
            one(gen_request(types, r, GEN_MINE, False)),
            one(gen_request(types, r, GEN_VICTIM, False)),
            one(gen_request(types, r, GEN_MINE, True)),
            rec("cuStreamSynchronize", F(1))])


def main():
    write("fuzz_msg", "hello", msg(1, struct.pack("<II", 42, 7) + limits(25000, 1, [1 << 30]) +
                                   b"1,GPU-00".ljust(4096, b"\0") + b"GPU-00=1G".ljust(4096, b"\0") +
                                   b"GPU-00/9e3779b97f4b".ljust(128, b"\0")))
    write("fuzz_msg", "command", msg(2, b"get_server_list"))
    write("fuzz_msg", "answer", msg(3, b"100.0"))
    write("fuzz_msg", "welcome", msg(6, struct.pack("<IIII", 100, 1, 1 << 21, 1)))
    write("fuzz_msg", "ready", msg(20, struct.pack("<II", 2, 0) + device(0) + device(1)))
    adopt = struct.pack("<IIII", 1, 42, 1000, 0) + limits() + limits() + \
        struct.pack("<II", 2, 0) + bytes([1, 0]).ljust(64, b"\0")
    write("fuzz_msg", "adopt", msg(22, adopt + part()))
    write("fuzz_msg", "adopt-partition", msg(22, adopt + part(3, 1, 8, 7, (0xF0, 0))))
    write("fuzz_msg", "adopt-partition-bad", msg(22, adopt + part(1, 5, 0, 7, (0, 0))))
    write("fuzz_msg", "client", msg(23, struct.pack("<IIII", 1, 42, 1, 1)))
    write("fuzz_msg", "client-limits", msg(30, struct.pack("<II", 3, 0) +
                                           limits(25000, 1, [64 << 20, 0, 1 << 30])))
    write("fuzz_msg", "client-limits-bad", msg(30, struct.pack("<II", 3, 0) +
                                               limits(200000, 2, [1] * 64)))
    write("fuzz_msg", "result", msg(26, struct.pack("<Ii", 7, -3)))
    write("fuzz_msg", "bad-major", msg(1, b"", major=9))
    write("fuzz_msg", "bad-length", msg(2, b"ps", length=9999))
    write("fuzz_msg", "short", b"\x4f\x4d\x50")
    for i, line in enumerate([
            "get_server_list", "get_server_status 1", "start_server -uid 1000",
            "get_client_list 5", "get_device_client_list", "get_device_client_list 5",
            "ps", "ps -p 5", "shutdown_server 5 -f", "terminate_client 5 6", "quit -t 3",
            "set_default_active_thread_percentage 33.333",
            "get_default_active_thread_percentage", "set_active_thread_percentage 5 10",
            "get_active_thread_percentage 5", "set_default_device_pinned_mem_limit 0 1.5G",
            "get_default_device_pinned_mem_limit GPU-00010203-0405-0607-0809-0a0b0c0d0e0f",
            "set_device_pinned_mem_limit 5 0 512M", "get_device_pinned_mem_limit 5 0",
            "set_default_client_priority 1", "get_default_client_priority",
            "device_query --csv", "help", "a b c d e f g h i j", "0=1G,1=512M", "",
            "\t \r\n", "sm_partition add GPU-74d43ed3 4",
            "sm_partition rm GPU-74d43ed3/9e3779b97f4b", "lspart"]):
        write("fuzz_command", "%02d" % i, line.encode())
    # protocol 3's commands: the target runs protocol 3 for an input of odd length, as the
    # daemon's own user (who may change state) when its length's second bit is set
    for i, line in enumerate([
            "server list --format=csv,noheader", "server create a --locality-domains=true",
            "server set a --uid=7", "namespace create n --server=a --active-thread-percentage=5",
            "namespace list --server=a", "client list --all",
            "sm-partition create p --server=a --device=0 --chunks=2 --include-remainder=true",
            "sm-partition list --server=a --device=GPU-74d43ed3 --all --format=csv",
            "sm-partition delete p --server=a --device=0", "device list --server=a",
            "feature describe memacct --format=table", "feature disable context-share",
            "memacct set audit_log=true", "memacct describe", "context-share get",
            "partition create --device=GPU-1 --chunks=0 --include-remainder", "sm-partition help"]):
        while len(line) % 4 != 3:  # odd, and the owner's
            line += " "
        write("fuzz_command", "v3-%02d" % i, line.encode())
    rec = struct.pack("<IHHIi", 5, 1, 0, 1, 0) + b"hello\0\0\0"
    write("fuzz_ring", "one-record", struct.pack("<QQ", len(rec), 0) + rec)
    write("fuzz_ring", "bad-tail", struct.pack("<QQ", 1 << 40, 0) + rec)
    write("fuzz_ring", "liar-len", struct.pack("<QQ", 16, 0) +
          struct.pack("<IHHIi", 4000, 1, 0, 1, 0))
    write("fuzz_ring", "bad-head", struct.pack("<QQ", len(rec), 1 << 50) + rec)
    write("fuzz_ring", "two", struct.pack("<QQ", 2 * len(rec), 0) + rec + rec)
    for name, data in exec_seeds():
        write("fuzz_exec", name, data)
    for name, data in gen_seeds():
        write("fuzz_exec", name, data)


if __name__ == "__main__":
    main()
