/* SPDX-License-Identifier: MIT */
/* The daemon's side of openmps stats (src/control/stats.c) against a server's answers, the
 * server played here: what it may not make the daemon believe. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/common/msg.h"
#include "../../src/control/internal.h"
#include "test.h"

/* One SRV_STATS message of one client on device 0 with `kernels` kernels. */
struct one_client {
    struct om_srv_stats h;
    struct om_stats_client c;
    struct om_stats_usage u;
};

static struct one_client record(uint32_t request_id, uint32_t flags, uint64_t kernels)
{
    struct one_client m;

    memset(&m, 0, sizeof(m));
    m.h =
        (struct om_srv_stats){.request_id = request_id, .flags = flags, .nclients = 1, .nusage = 1};
    m.c = (struct om_stats_client){.client_id = 1, .pid = 4242, .calls = 1};
    m.u = (struct om_stats_usage){.client_id = 1, .device = 0, .kernels = kernels};
    return m;
}

/* A server that sends its one client in two messages of one answer: the second record is not
 * added to the first (its kernels would count twice, its metrics series twice, which makes
 * Prometheus refuse the whole scrape); the answer says the server misbehaved. */
TEST(stats_client_sent_twice)
{
    static struct daemon d;
    static struct server s;
    static struct client_rec cr;
    static struct conn ui;
    static struct om_msg m;
    char arg0[] = "stats", arg1[] = "--json", *argv[] = {arg0, arg1};
    struct strbuf out = {0};
    bool error = false;
    int chan[2], front[2];

    CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, chan), 0);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, front), 0);
    cr = (struct client_rec){.id = 1, .pid = 4242, .up = true};
    snprintf(cr.command, sizeof(cr.command), "python3");
    s.id = 1;
    s.pid = 99;
    s.chan = chan[0];
    s.ready = true;
    s.ndevs = 1;
    s.clients = &cr;
    s.nclients = 1;
    d.servers = &s;
    ui = (struct conn){.id = 1, .fd = front[0], .kind = CONN_UI};
    d.conns = &ui;

    CHECK_EQ(om_stats_command(&d, &ui, 2, argv, &out, &error), OM_CMD_LATER);
    CHECK(!error && ui.awaiting != 0);
    struct one_client a = record(ui.awaiting, OM_STATS_MORE, 3), b = record(ui.awaiting, 0, 3);
    CHECK_EQ(om_stats_reply(&d, &s, &a, sizeof(a)), 0);
    CHECK_EQ(om_stats_reply(&d, &s, &b, sizeof(b)), 0);
    CHECK_EQ(ui.awaiting, 0); /* answered */
    CHECK_EQ(om_msg_recv(front[1], &m, NULL, 1000), 0);
    CHECK_EQ(m.hdr.type, OM_MSG_ANSWER);
    m.payload[m.hdr.len < sizeof(m.payload) ? m.hdr.len : sizeof(m.payload) - 1] = '\0';
    if (!strstr((char *)m.payload, "\"error\": \"it sent a client twice\"") ||
        !strstr((char *)m.payload, "\"kernels\": 3,") ||
        strstr((char *)m.payload, "\"kernels\": 6")) {
        fprintf(stderr, "answer: %s\n", (char *)m.payload);
        exit(1);
    }
    CHECK(d.stats_reqs == NULL);
    sb_free(&out);
    close(chan[0]);
    close(chan[1]);
    close(front[0]);
    close(front[1]);
}
