/* SPDX-License-Identifier: MIT */
/* Unit tests of a client's CUDA_VISIBLE_DEVICES, read against its server's devices. */
#include "../../src/common/visible.h"
#include "test.h"

/* Three devices; 0 and 1 share their first UUID byte (a one-byte prefix names neither). */
static void devices(struct om_device_info d[3])
{
    memset(d, 0, 3 * sizeof(*d));
    for (int i = 0; i < 3; i++)
        for (int b = 0; b < 16; b++)
            d[i].uuid[b] = (uint8_t)(0x10 * i + b);
    d[1].uuid[0] = 0x00;
    d[1].uuid[1] = 0xab;
}

static int resolve(const char *spec, const struct om_device_info *d, int want0, int want1)
{
    struct om_devmap m;
    int n = om_visible_resolve(spec, d, 3, &m);

    if (n > 0)
        CHECK_EQ(m.server[0], want0);
    if (n > 1)
        CHECK_EQ(m.server[1], want1);
    return n;
}

TEST(visible_resolve)
{
    struct om_device_info d[3];

    devices(d);
    CHECK_EQ(resolve("2,0", d, 2, 0), 2);
    CHECK_EQ(resolve("1", d, 1, -1), 1);
    CHECK_EQ(resolve("0,1,2", d, 0, 1), 3);
    CHECK_EQ(resolve("", d, -1, -1), 0);
    CHECK_EQ(resolve("3", d, -1, -1), 0);        /* past the server's devices */
    CHECK_EQ(resolve("0,2,-1,1", d, 0, 2), 2);   /* the list ends at an invalid entry */
    CHECK_EQ(resolve("1,1,2", d, -1, -1), -1);   /* a device named twice: none (the driver) */
    CHECK_EQ(resolve("1,5,1", d, 1, -1), 1);     /* ... unless the list ended before */
    CHECK_EQ(resolve("1,0,2,1", d, -1, -1), -1); /* ... even past every device */
    CHECK_EQ(resolve(" 1 , 0", d, 1, 0), 2);     /* spaces around entries */
    CHECK_EQ(resolve("2,", d, 2, -1), 1);        /* an empty entry ends it too */
    CHECK_EQ(resolve("x,0", d, -1, -1), 0);
    CHECK_EQ(resolve("GPU-20212223", d, 2, -1), 1);      /* a UUID prefix */
    CHECK_EQ(resolve("gpu-20212223-2425", d, 2, -1), 1); /* any case */
    CHECK_EQ(resolve("GPU-00ab,GPU-0001", d, 1, 0), 2);
    CHECK_EQ(resolve("GPU-00", d, -1, -1), 0); /* two devices start so: ambiguous */
    CHECK_EQ(resolve("GPU-", d, -1, -1), 0);
    CHECK_EQ(resolve("GPU-20212223-2425-2627-2829-2a2b2c2d2e2f", d, 2, -1), 1);
    CHECK_EQ(resolve("GPU-20212223-2425-2627-2829-2a2b2c2d2e2f0", d, -1, -1), 0);
    CHECK_EQ(resolve("GPU-20212223,0", d, 2, -1), 1); /* an ordinal after a UUID ends it */
    CHECK_EQ(resolve("1,GPU-20212223", d, 1, 2), 2);  /* (the other way round: unmeasured) */
    CHECK_EQ(resolve("MIG-20212223", d, -1, -1), 0);
    CHECK_EQ(resolve("18446744073709551617", d, -1, -1), 0); /* 2^64 + 1: no overflow into 1 */
}

TEST(visible_limits_and_map)
{
    struct om_devmap m = {.count = 2, .server = {2, 0}}, got;
    struct om_limits want = {.ndevices = 2, .mem_limit = {64u << 20, 0}}, l;

    /* the client's device 0 is the server's 2 */
    l = om_visible_limits(&want, &m);
    CHECK_EQ(l.ndevices, 3);
    CHECK_EQ(l.mem_limit[2], 64u << 20);
    CHECK_EQ(l.mem_limit[0], 0);
    want.ndevices = 3; /* a limit for a device it does not see is dropped */
    want.mem_limit[2] = 1u << 20;
    l = om_visible_limits(&want, &m);
    CHECK_EQ(l.mem_limit[1], 0);
    CHECK_EQ(om_decode_devmap(&m, 3, &got), 0);
    CHECK_EQ(got.server[0], 2);
    CHECK_EQ(om_decode_devmap(&m, 2, &got), -1); /* names a device the server lacks */
    m.server[1] = 2;
    CHECK_EQ(om_decode_devmap(&m, 3, &got), -1); /* twice */
    m.server[1] = 0;
    m.count = OM_MAX_DEVICES + 1;
    CHECK_EQ(om_decode_devmap(&m, 3, &got), -1);
    om_visible_all(3, &m);
    CHECK_EQ(m.count, 3);
    CHECK_EQ(m.server[2], 2);
}

TEST(visible_mem_limits)
{
    struct om_device_info d[3];
    struct om_limits l = {.ndevices = 1, .mem_limit = {1u << 20}};
    char bad[64] = "";

    devices(d);
    /* ordinal entries are the client's (parsed by it); a UUID names the server's device */
    CHECK_EQ(om_visible_mem_limits("0=1G,GPU-2021=64M,GPU-00=2G,GPU-0001=2M,GPU-ff=1G", d, 3, &l,
                                   bad, sizeof(bad)),
             2); /* GPU-00: two devices; GPU-ff: none */
    CHECK_STR(bad, "GPU-00");
    CHECK_EQ(l.mem_limit[2], 64u << 20);
    CHECK_EQ(l.mem_limit[0], 1u << 20); /* the tighter of 1M and 2M */
    CHECK_EQ(l.mem_limit[1], 0);
    CHECK_EQ(l.ndevices, 3);
}
