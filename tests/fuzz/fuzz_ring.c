/* SPDX-License-Identifier: MIT */
/* Fuzz target: the ring consumer facing a peer that wrote arbitrary indices and bytes. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../src/common/ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static void *map;
    static size_t len;
    static int fd = -1;
    struct om_ring_end tx, rx;
    static uint8_t buf[OM_REC_MAX_PAYLOAD];
    uint64_t tail, head;

    static struct om_ring_geometry geo;

    if (fd < 0 && om_ring_create(4096, &fd, &map, &len, &geo) != 0)
        return 0;
    if (size < 16)
        return 0;
    om_ring_ends(map, &geo, true, &tx, &rx);
    memcpy(&tail, data, 8);
    memcpy(&head, data + 8, 8);
    data += 16;
    size -= 16;
    memset(rx.data, 0, rx.size);
    memcpy(rx.data, data, size < rx.size ? size : rx.size);
    rx.q->tail = tail;
    tx.q->head = head;
    for (int i = 0; i < 64; i++) {
        struct om_rec r;
        int rc = om_ring_recv(&rx, &r, buf, sizeof(buf));
        if (rc == -EAGAIN || rc == -EPROTO)
            break;
        if (rc == 0)
            om_ring_send(&tx, &r, buf);
    }
    return 0;
}
