/* SPDX-License-Identifier: MIT */
/* Fuzz target: the daemon's command language, run against a daemon state with no processes. */
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
    /* Commands that would start processes or quit are refused for this uid
     * (not root, not the daemon's user): the state-changing ones stay pure. */
    d.euid = 54321;
    d.listen_fd = -1; /* no daemon: the namespaces' sockets are not made */
    d.start_uid = -1;
    d.probed = true; /* never load a driver from the fuzzer */
    d.ndevs = 0;
    d.protocol = (size & 1) ? OM_PROTOCOL_V3 : OM_PROTOCOL_LEGACY; /* both command sets */
    om_command_run(&d, &ui, line, &out, &error);
    sb_free(&out);
    return 0;
}
