/* SPDX-License-Identifier: MIT */
/* Fuzz target: the socket message decoder and every payload decoder. */
#include <stdint.h>
#include <string.h>

#include "../../src/common/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct om_msg m;
    struct om_msg_hdr h;
    struct om_hello hello;
    struct om_welcome w;
    struct om_srv_adopt a;
    struct om_srv_client c;
    struct om_srv_ready r;
    static struct om_device_info devs[OM_MAX_DEVICES];
    static struct om_stats_client sc[OM_MSG_MAX_PAYLOAD / sizeof(struct om_stats_client)];
    static struct om_stats_usage su[OM_MSG_MAX_PAYLOAD / sizeof(struct om_stats_usage)];
    struct om_srv_stats st;
    struct om_srv_client_limits cl;
    uint32_t x, y;

    if (size > sizeof(m.hdr) + OM_MSG_MAX_PAYLOAD)
        return 0;
    if (om_msg_decode(data, size, &h) != 0)
        return 0;
    memcpy(&m, data, size);
    m.payload[h.len] = '\0';
    om_msg_text(&m, OM_CMD_MAX);
    om_decode_hello(m.payload, h.len, &hello);
    om_decode_welcome(m.payload, h.len, &w);
    om_decode_adopt(m.payload, h.len, 2, &a);
    om_decode_srv_client(m.payload, h.len, &c);
    om_decode_client_limits(m.payload, h.len, &cl);
    om_decode_srv_ready(m.payload, h.len, &r, devs, OM_MAX_DEVICES);
    om_decode_u32_pair(m.payload, h.len, &x, &y);
    om_decode_srv_stats(m.payload, h.len, &st, sc, sizeof(sc) / sizeof(sc[0]), su,
                        sizeof(su) / sizeof(su[0]));
    return 0;
}
