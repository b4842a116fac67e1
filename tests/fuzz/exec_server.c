/* SPDX-License-Identifier: MIT */
/*
 * The parts of openmps-server that fuzz_exec needs but that are static in their files: session.c's
 * staging buffer and end-of-session release. The file is compiled here as it is, so the target
 * runs the server's own code rather than a copy of it; the driver is loaded as the server's main()
 * loads it (driver.c fills om_server_real[] from $OPENMPS_DRIVER).
 */
#include "../../src/server/session.c"

int om_fuzz_server_init(char *err, size_t errlen);
void om_fuzz_session_release(struct session *s);
int om_fuzz_stage(struct session *s, uint32_t op, const uint8_t *payload, uint32_t len);

/* Loads the driver and retains the contexts as the server's main() does. */
int om_fuzz_server_init(char *err, size_t errlen)
{
    static struct server srv;

    srv.chan = -1;
    om_sched_init();
    om_budget_init();
    return om_server_driver_init(&srv, om_wait_context_flags(), err, errlen);
}

/* Everything the session holds, freed as at the end of a real session: its GPU resources, then
 * what session_destroy frees besides the ring and the socket (the fuzzed session has neither of
 * its own), the memory cap's table. */
void om_fuzz_session_release(struct session *s)
{
    release_gpu_resources(s);
    om_memcap_free(s);
}

/* OM_OP_STAGE_RESET or OM_OP_STAGE_APPEND with its payload, as the worker serves them. */
int om_fuzz_stage(struct session *s, uint32_t op, const uint8_t *payload, uint32_t len)
{
    struct om_rec rec = {.op = op, .len = len};

    stage(s, &rec, payload);
    return 0;
}
