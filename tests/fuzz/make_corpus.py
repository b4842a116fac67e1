#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed inputs of the fuzz corpora (tests/fuzz/corpus/<target>/seed-*).

Run it after a protocol change; libFuzzer adds what it finds beside the seeds
(`make fuzz`), and CTest replays every file of each corpus.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC = 0x53504D4F


def msg(mtype, payload=b"", major=1, length=None):
    return struct.pack("<IHHHHI", MAGIC, major, 0, mtype, 0,
                       len(payload) if length is None else length) + payload


def limits(atp=0, prio=0, mem=()):
    mem = list(mem) + [0] * (64 - len(mem))
    return struct.pack("<IIII", atp, prio, len([m for m in mem if m]), 0) + \
        struct.pack("<64Q", *mem)


def device(i):
    return struct.pack("<II", i, 0) + bytes(range(16)) + b"0000:10:00.0".ljust(32, b"\0") + \
        b"fake GPU".ljust(96, b"\0")


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def main():
    write("fuzz_msg", "hello", msg(1, struct.pack("<II", 42, 0) + limits(25000, 1, [1 << 30])))
    write("fuzz_msg", "command", msg(2, b"get_server_list"))
    write("fuzz_msg", "answer", msg(3, b"100.0"))
    write("fuzz_msg", "welcome", msg(6, struct.pack("<IIII", 100, 1, 1 << 21, 1)))
    write("fuzz_msg", "ready", msg(20, struct.pack("<II", 2, 0) + device(0) + device(1)))
    write("fuzz_msg", "adopt", msg(22, struct.pack("<IIII", 1, 42, 1000, 0) + limits()))
    write("fuzz_msg", "client", msg(23, struct.pack("<IIII", 1, 42, 1, 1)))
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
            "\t \r\n"]):
        write("fuzz_command", "%02d" % i, line.encode())
    rec = struct.pack("<IHHIi", 5, 1, 0, 1, 0) + b"hello\0\0\0"
    write("fuzz_ring", "one-record", struct.pack("<QQ", len(rec), 0) + rec)
    write("fuzz_ring", "bad-tail", struct.pack("<QQ", 1 << 40, 0) + rec)
    write("fuzz_ring", "liar-len", struct.pack("<QQ", 16, 0) +
          struct.pack("<IHHIi", 4000, 1, 0, 1, 0))
    write("fuzz_ring", "bad-head", struct.pack("<QQ", len(rec), 1 << 50) + rec)
    write("fuzz_ring", "two", struct.pack("<QQ", 2 * len(rec), 0) + rec + rec)


if __name__ == "__main__":
    main()
