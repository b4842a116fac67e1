/* SPDX-License-Identifier: MIT */
/* A test client: the handshake step by step, pings over the ring, and ways to misbehave. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/client/client.h"
#include "../../src/common/config.h"
#include "../../src/common/gen/entries.h"
#include "openmps/ops.h"

/*
 * Exit status: 0 session served, 2 usage, 3 refused, 4 session ended by the
 * server (terminated or gone), 5 no daemon, 6 other failure.
 */
static void usage(void)
{
    fprintf(stderr, "usage: om-test-client [--pings N] [--size BYTES] [--hold-ms MS|eof]\n"
                    "       [--die-after connect|hello|welcome] [--garbage tail|len|op|sleepers]\n"
                    "       [--timeout-ms MS] [--bad-requests N] [--unsupported-notes N]\n");
    exit(2);
}

static void die_now(void)
{
    kill(getpid(), SIGKILL);
    pause();
}

int main(int argc, char **argv)
{
    struct om_client c;
    struct om_limits want;
    const char *die_after = "", *garbage = NULL;
    long pings = 1, size = 64, hold_ms = 0, timeout_ms = -1, bad_requests = 0;
    long unsupported_notes = 0;
    bool hold_eof = false;
    char err[512];
    int rc;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--pings"))
            pings = atol(v);
        else if (!strcmp(a, "--size"))
            size = atol(v);
        else if (!strcmp(a, "--hold-ms") && !strcmp(v, "eof"))
            hold_eof = true; /* until the test closes our stdin: no guess of how long it needs */
        else if (!strcmp(a, "--hold-ms"))
            hold_ms = atol(v);
        else if (!strcmp(a, "--timeout-ms"))
            timeout_ms = atol(v);
        else if (!strcmp(a, "--die-after"))
            die_after = v;
        else if (!strcmp(a, "--garbage"))
            garbage = v;
        else if (!strcmp(a, "--bad-requests"))
            bad_requests = atol(v);
        else if (!strcmp(a, "--unsupported-notes"))
            unsupported_notes = atol(v);
        else
            usage();
    }
    if (size < 0 || size > (long)OM_REC_MAX_PAYLOAD)
        usage();
    if (om_client_limits_from_env(&want, err, sizeof(err)) < 0) {
        fprintf(stderr, "om-test-client: %s\n", err);
        return 6;
    }
    const char *dirs[OM_PIPE_DIRS_MAX];
    om_pipe_dirs(dirs); /* the tests name their directory: the first is it */
    rc = om_client_connect(&c, dirs[0], err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "om-test-client: %s\n", err);
        return rc == -EACCES ? 3 : 5;
    }
    if (!strcmp(die_after, "connect"))
        die_now();
    if (om_client_hello(&c, &want, err, sizeof(err)) < 0) {
        fprintf(stderr, "om-test-client: %s\n", err);
        return 6;
    }
    if (!strcmp(die_after, "hello"))
        die_now();
    rc = om_client_welcome(&c, (int)timeout_ms, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "om-test-client: %s\n", err);
        return rc == -EPERM ? 3 : 6;
    }
    printf("session server=%d id=%u queued=%d\n", (int)c.server_pid, c.client_id, c.queued);
    fflush(stdout);
    if (!strcmp(die_after, "welcome"))
        die_now();

    if (garbage) {
        /* Write an impossible record or index straight into the ring. */
        struct om_rec bad = {.len = 0, .op = 0xffff, .seq = 1};
        if (!strcmp(garbage, "sleepers")) {
            /* Let the server's worker fall asleep on the doorbell, then hide
             * the sleeper and vanish: the server must still free the session. */
            usleep(300000);
            __atomic_store_n(&c.tx.q->sleepers, 0, __ATOMIC_SEQ_CST);
            __atomic_store_n(&c.tx.q->space_sleepers, 0, __ATOMIC_SEQ_CST);
            _exit(0);
        }
        if (!strcmp(garbage, "tail"))
            __atomic_store_n(&c.tx.q->tail, c.tx.pos + (1ull << 40), __ATOMIC_RELEASE);
        else if (!strcmp(garbage, "len")) {
            bad.len = 0x7fffffff;
            memcpy(c.tx.data, &bad, sizeof(bad));
            __atomic_store_n(&c.tx.q->tail, sizeof(bad), __ATOMIC_RELEASE);
        } else
            om_ring_send(&c.tx, &bad, NULL);
        om_ring_kick(c.tx.q);
        /* Send nothing more (a valid record would overwrite the bad one):
         * the server must end the session on its own (30 s: a bound for a failing run only). */
        for (int i = 0; i < 3000 && om_client_alive(&c); i++)
            usleep(10000);
        if (!om_client_alive(&c)) {
            printf("session ended: %s\n", c.why);
            return 4;
        }
        fprintf(stderr, "om-test-client: the server kept a session with a corrupt ring\n");
        return 6;
    }

    static char out[OM_REC_MAX_PAYLOAD], in[OM_REC_MAX_PAYLOAD];
    if (bad_requests > 0) {
        /* Well-formed records whose requests are not (an allocation with no size): each must
         * be refused (CUDA_ERROR_INVALID_VALUE, 1) and the session must go on. */
        for (long n = 0; n < bad_requests; n++) {
            rc = om_client_call(&c, (uint16_t)(OM_OP_ENTRY_BASE + OM_IDX_cuMemAlloc_v2), out, 0, in,
                                sizeof(in), NULL);
            if (rc != 1) {
                fprintf(stderr, "om-test-client: bad request %ld: status %d\n", n, rc);
                return 6;
            }
        }
        printf("bad requests refused %ld\n", bad_requests);
    }
    if (unsupported_notes > 0) {
        /* The note the shim sends once per unsupported entry point, sent again and again, over
         * every entry in turn (a program that does not use the shim can): server.log must
         * not grow with each record. */
        for (long n = 0; n < unsupported_notes; n++) {
            uint64_t index = (uint64_t)(n % OM_ENTRY_COUNT);
            rc = om_client_call(&c, OM_OP_NOTE_UNSUPPORTED, &index, sizeof(index), NULL, 0, NULL);
            if (rc != 0) {
                fprintf(stderr, "om-test-client: note %ld: status %d\n", n, rc);
                return 6;
            }
        }
        printf("unsupported notes sent %ld\n", unsupported_notes);
    }
    for (long i = 0; i < size; i++)
        out[i] = (char)('a' + (i * 7 + getpid()) % 26);
    for (long n = 0; n < pings; n++) {
        uint32_t got = 0;
        rc = om_client_call(&c, OM_OP_PING, out, (uint32_t)size, in, (size_t)size, &got);
        if (rc == -ECONNRESET) {
            printf("session ended: %s\n", c.why);
            return 4;
        }
        if (rc != 0 || got != (uint32_t)size || memcmp(in, out, (size_t)size)) {
            fprintf(stderr, "om-test-client: ping %ld: status %d, %u bytes back of %ld\n", n, rc,
                    got, size);
            return 6;
        }
    }
    printf("pings ok %ld\n", pings);
    fflush(stdout);
    if (hold_ms > 0 || hold_eof) {
        /* Stay connected, pinging now and then so a termination is noticed. */
        for (long t = 0; hold_eof || t < hold_ms; t += 50) {
            if (hold_eof) {
                struct pollfd pfd = {.fd = 0, .events = POLLIN};
                char junk[64];
                if (poll(&pfd, 1, 50) > 0 && read(0, junk, sizeof(junk)) <= 0)
                    break; /* end of file (or an error): the test lets us go */
            } else
                usleep(50000);
            rc = om_client_call(&c, OM_OP_PING, out, 8, in, sizeof(in), NULL);
            if (rc == -ECONNRESET) {
                printf("session ended: %s\n", c.why);
                return 4;
            }
        }
    }
    om_client_close(&c);
    return 0;
}
