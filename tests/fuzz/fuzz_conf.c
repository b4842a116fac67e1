/* SPDX-License-Identifier: MIT */
/* Fuzz target: the configuration file's parser (src/control/conffile.c), then what the daemon
 * makes of a file it accepts (v3.c), on a daemon state with no processes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/control/conffile.h"
#include "../../src/control/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct om_conf c;
    struct daemon d = {.euid = 0, .protocol = OM_PROTOCOL_V3, .listen_fd = -1}; /* no sockets */
    char err[512];

    if (om_conf_parse((const char *)data, size, &c, err, sizeof(err)) < 0) {
        /* a refusal names its line */
        if (strncmp(err, "line ", 5) != 0)
            abort();
        return 0;
    }
    om_v3_apply_conf(&d, &c, err, sizeof(err));
    om_v3_cleanup(&d);
    return 0;
}
