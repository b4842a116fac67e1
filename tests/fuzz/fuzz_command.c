/* SPDX-License-Identifier: MIT */
/* Fuzz target: the daemon's command language, run against a daemon state with no processes. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../../src/common/config.h"
#include "../../src/control/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct daemon d;
    struct conn ui = {.fd = -1, .kind = CONN_UI, .uid = 12345};
    char line[OM_CMD_MAX + 1];
    struct strbuf out = {0};
    bool error;
    uint64_t v;
    uint32_t m;
    struct om_limits l = {0};

    if (size > OM_CMD_MAX || memchr(data, '\0', size))
        return 0;
    memcpy(line, data, size);
    line[size] = '\0';
    /* Value parsers on the raw input too. */
    om_parse_size(line, &v);
    om_parse_percentage(line, &m);
    om_parse_mem_limit_list(line, &l);
    /* Half the inputs come from another user, who may change nothing; the other half from
     * the daemon's own user, who may: for them the daemon counts as quitting, so that nothing
     * starts a process (start_server refuses, server create only defines its server), and
     * there is no process to signal. The state (named servers, namespaces, partitions) lives
     * on from input to input, within its budgets. */
    bool owner = (size & 2) != 0;
    ui.uid = owner ? 54321 : 12345;
    d.euid = 54321;
    d.quitting = owner;
    d.listen_fd = -1; /* no daemon: the namespaces' sockets are not made */
    d.start_uid = -1;
    d.probed = true; /* never load a driver from the fuzzer: one device of the double's shape */
    d.ndevs = 1;
    d.devs[0] = (struct om_device_info){.ordinal = 0,
                                        .uuid = {0xf0, 0xf1, 0xf2, 0xf3},
                                        .sm_count = 132,
                                        .chunk_sms = 8,
                                        .chunks = 16};
    d.protocol = (size & 1) ? OM_PROTOCOL_V3 : OM_PROTOCOL_LEGACY; /* both command sets */
    om_command_run(&d, &ui, line, &out, &error);
    sb_free(&out);
    return 0;
}
