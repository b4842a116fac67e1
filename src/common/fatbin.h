/* SPDX-License-Identifier: MIT */
/* The entries of a fatbin container, and their bytes decompressed (docs/driver-facts.md). */
#ifndef OM_FATBIN_H
#define OM_FATBIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum om_fatbin_codec {
    OM_FATBIN_PLAIN, /* stored as is */
    OM_FATBIN_LZ4,   /* an LZ4 block (entry flag 0x2000: nvcc's --compress-mode=speed) */
    OM_FATBIN_ZSTD,  /* a Zstandard frame (flag 0x8000: balance, size, CUDA 13's default) */
};

struct om_fatbin_entry {
    unsigned kind;      /* 1: PTX text, 2: an ELF cubin */
    unsigned arch;      /* the SM version it is for: 90 for sm_90 */
    bool arch_specific; /* sm_90a, compute_100a: runs on that version alone (flag 0x100000) */
    bool family;        /* sm_100f, compute_100f: that major version (flag 0x200000) */
    enum om_fatbin_codec codec;
    const uint8_t *data; /* the stored bytes, inside the image */
    uint64_t stored;     /* their length */
    uint64_t size;       /* the length once decompressed (stored, when plain) */
};

/*
 * The entries of the fatbin container(s) at p (several may follow each other in `len` bytes),
 * at most `max` written to out. Returns how many there are, or -1 when p is no fatbin or a
 * header reaches past `len` or past its container (nothing of the image is trusted).
 */
int om_fatbin_entries(const uint8_t *p, size_t len, struct om_fatbin_entry *out, int max);

/*
 * The entry's bytes decompressed into buf, which holds e->size bytes at most (`cap`). Returns 0,
 * or -1: corrupt, sizes that disagree, or the codec missing (Zstandard is read with the system's
 * libzstd.so.1, opened on first use; LZ4 blocks are decoded here).
 */
int om_fatbin_inflate(const struct om_fatbin_entry *e, uint8_t *buf, size_t cap);

/*
 * Whether the entry's decompressed bytes hold `needle` (at most 64 bytes): 1, 0, or -1 when they
 * cannot be read (as om_fatbin_inflate) or would be more than 1 GiB. A Zstandard frame is read
 * in pieces of 256 KiB, so nothing of its size is allocated; an LZ4 block is decoded whole (its
 * matches reach back into all of it). How much an image may make the caller decompress in all
 * is the caller's to bound (om_image_print_scan).
 */
int om_fatbin_find(const struct om_fatbin_entry *e, const void *needle, size_t nlen);

/* The LZ4 block format's decoder (exported for the unit tests): the length written, or -1. */
long om_lz4_block_decode(const uint8_t *src, size_t n, uint8_t *dst, size_t cap);

#endif
