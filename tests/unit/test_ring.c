/* SPDX-License-Identifier: MIT */
/* Unit tests of the shared-memory ring, within one process and across two. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../src/common/ring.h"
#include "test.h"

struct pair {
    int fd;
    void *smap, *cmap;
    size_t len;
    struct om_ring_geometry sgeo, cgeo;
    struct om_ring_end s_tx, s_rx, c_tx, c_rx;
};

static void make_pair(struct pair *p, uint32_t bytes)
{
    CHECK_EQ(om_ring_create(bytes, &p->fd, &p->smap, &p->len, &p->sgeo), 0);
    CHECK_EQ(om_ring_attach(p->fd, p->len, &p->cmap, &p->cgeo), 0);
    om_ring_ends(p->smap, &p->sgeo, true, &p->s_tx, &p->s_rx);
    om_ring_ends(p->cmap, &p->cgeo, false, &p->c_tx, &p->c_rx);
}

static void free_pair(struct pair *p)
{
    munmap(p->smap, p->len);
    munmap(p->cmap, p->len);
    close(p->fd);
}

TEST(ring_roundtrip)
{
    struct pair p;
    struct om_rec r = {.len = 5, .op = OM_OP_PING, .seq = 9}, got;
    char buf[16] = "";

    make_pair(&p, 4096);
    CHECK_EQ(om_ring_recv(&p.s_rx, &got, buf, sizeof(buf)), -EAGAIN);
    CHECK_EQ(om_ring_send(&p.c_tx, &r, "hello"), 0);
    CHECK_EQ(om_ring_recv(&p.s_rx, &got, buf, sizeof(buf)), 0);
    CHECK_EQ(got.seq, 9);
    CHECK_EQ(got.len, 5);
    CHECK(memcmp(buf, "hello", 5) == 0);
    r.status = -3;
    CHECK_EQ(om_ring_send(&p.s_tx, &r, "world"), 0);
    CHECK_EQ(om_ring_recv(&p.c_rx, &got, buf, sizeof(buf)), 0);
    CHECK_EQ(got.status, -3);
    CHECK(memcmp(buf, "world", 5) == 0);
    /* A payload larger than the reader's buffer is consumed and reported. */
    r.len = 64;
    char big[64] = {0};
    CHECK_EQ(om_ring_send(&p.c_tx, &r, big), 0);
    CHECK_EQ(om_ring_recv(&p.s_rx, &got, buf, sizeof(buf)), -EMSGSIZE);
    CHECK_EQ(om_ring_recv(&p.s_rx, &got, buf, sizeof(buf)), -EAGAIN);
    free_pair(&p);
}

TEST(ring_wrap)
{
    struct pair p;
    char out[1000], in[1000];

    make_pair(&p, 4096);
    /* Records of odd sizes walk the ring around many times. */
    for (int i = 0; i < 500; i++) {
        struct om_rec r = {.len = (uint32_t)(1 + (i * 37) % 999), .seq = (uint32_t)i}, got;
        for (uint32_t k = 0; k < r.len; k++)
            out[k] = (char)(i + k);
        CHECK_EQ(om_ring_send(&p.c_tx, &r, out), 0);
        CHECK_EQ(om_ring_recv(&p.s_rx, &got, in, sizeof(in)), 0);
        CHECK_EQ(got.seq, i);
        CHECK_EQ(got.len, r.len);
        CHECK(memcmp(in, out, r.len) == 0);
    }
    free_pair(&p);
}

TEST(ring_full)
{
    struct pair p;
    struct om_rec r = {.len = 1000}, got;
    char buf[1000] = {0};
    int sent = 0;

    make_pair(&p, 4096);
    while (om_ring_send(&p.c_tx, &r, buf) == 0)
        sent++;
    CHECK_EQ(sent, 4); /* 4 x 1016 bytes fit in 4096 */
    CHECK_EQ(om_ring_send(&p.c_tx, &r, buf), -EAGAIN);
    CHECK_EQ(om_ring_wait_space(&p.c_tx, r.len, 10, NULL), -ETIMEDOUT);
    CHECK_EQ(om_ring_recv(&p.s_rx, &got, buf, sizeof(buf)), 0);
    CHECK_EQ(om_ring_wait_space(&p.c_tx, r.len, 10, NULL), 0);
    CHECK_EQ(om_ring_send(&p.c_tx, &r, buf), 0);
    r.len = 5000; /* can never fit */
    CHECK_EQ(om_ring_send(&p.c_tx, &r, NULL), -EMSGSIZE);
    free_pair(&p);
}

TEST(ring_corrupt_indices)
{
    struct pair p;
    struct om_rec r = {.len = 8}, got;
    char buf[64] = {0};

    make_pair(&p, 4096);
    /* The client claims more data than the ring holds. */
    p.c_tx.q->tail = 1ull << 40;
    CHECK_EQ(om_ring_recv(&p.s_rx, &got, buf, sizeof(buf)), -EPROTO);
    /* A record whose length runs past the published data. */
    p.c_tx.q->tail = 16;
    struct om_rec liar = {.len = 4000};
    memcpy(p.c_tx.data, &liar, sizeof(liar));
    CHECK_EQ(om_ring_recv(&p.s_rx, &got, buf, sizeof(buf)), -EPROTO);
    /* The client moves the server's completion head somewhere impossible. */
    p.s_tx.q->head = 999999;
    CHECK_EQ(om_ring_send(&p.s_tx, &r, buf), -EPROTO);
    free_pair(&p);
    /* A mapping whose header lies is refused by the client. */
    make_pair(&p, 4096);
    ((struct om_ring_header *)p.smap)->queue_bytes = 3000;
    void *m2;
    struct om_ring_geometry g;
    CHECK_EQ(om_ring_attach(p.fd, p.len, &m2, &g), -EBADMSG);
    CHECK_EQ(om_ring_attach(p.fd, p.len - 4096, &m2, &g), -EBADMSG);
    free_pair(&p);
    /* The header changed after attaching does not move the client's view. */
    make_pair(&p, 4096);
    ((struct om_ring_header *)p.smap)->cq_data_off = 0;
    ((struct om_ring_header *)p.smap)->queue_bytes = 1u << 30;
    struct om_ring_end tx, rx;
    om_ring_ends(p.cmap, &p.cgeo, false, &tx, &rx);
    CHECK_EQ(rx.size, 4096);
    CHECK(rx.data == (uint8_t *)p.cmap + p.cgeo.cq_data_off && p.cgeo.cq_data_off != 0);
    free_pair(&p);
    /* A memfd whose size is not sealed could be shrunk under the mapping. */
    int fd = memfd_create("unsealed", 0);
    CHECK(fd >= 0);
    CHECK_EQ(ftruncate(fd, 4096 * 4), 0);
    CHECK_EQ(om_ring_attach(fd, 4096 * 4, &m2, &g), -EBADMSG);
    close(fd);
}

TEST(ring_cross_process)
{
    struct pair p;
    pid_t pid;
    int status, n = 20000;

    make_pair(&p, 8192);
    pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        /* The server side: echo every record, sleeping on the doorbell. The 30 s waits bound
         * a failing run only (a lost wake-up); a loaded machine stalls a peer far less. */
        char buf[256];
        for (int i = 0; i < n; i++) {
            struct om_rec got;
            int rc;
            while ((rc = om_ring_recv(&p.s_rx, &got, buf, sizeof(buf))) == -EAGAIN)
                om_ring_wait_data(&p.s_rx, 30000, i % 2 ? 0 : 20, NULL);
            if (rc != 0 || got.seq != (uint32_t)i)
                _exit(10);
            while (om_ring_send(&p.s_tx, &got, buf) == -EAGAIN)
                om_ring_wait_space(&p.s_tx, got.len, 30000, NULL);
        }
        _exit(0);
    }
    for (int i = 0; i < n; i++) {
        char out[200], in[256];
        struct om_rec r = {.len = (uint32_t)(i % 200), .seq = (uint32_t)i}, got;
        int rc;
        memset(out, i & 0xff, sizeof(out));
        CHECK_EQ(om_ring_send(&p.c_tx, &r, out), 0);
        while ((rc = om_ring_recv(&p.c_rx, &got, in, sizeof(in))) == -EAGAIN)
            CHECK_EQ(om_ring_wait_data(&p.c_rx, 30000, i % 3 ? 0 : 20, NULL), 0);
        CHECK_EQ(rc, 0);
        CHECK_EQ(got.seq, i);
        CHECK(memcmp(in, out, r.len) == 0);
    }
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    free_pair(&p);
}

TEST(ring_wait_timeout)
{
    struct pair p;
    struct timespec a, b;
    int stop = 0;

    make_pair(&p, 4096);
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK_EQ(om_ring_wait_data(&p.s_rx, 50, 10, NULL), -ETIMEDOUT);
    clock_gettime(CLOCK_MONOTONIC, &b);
    long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
    CHECK(ms >= 45 && ms < 10000); /* never early; late only as much as a loaded machine makes it */
    stop = 1;
    CHECK_EQ(om_ring_wait_data(&p.s_rx, 5000, 0, &stop), 0); /* a stop flag ends the wait */
    free_pair(&p);
}
