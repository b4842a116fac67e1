/* SPDX-License-Identifier: MIT */
/* Unit tests of message framing, payload decoders and descriptor passing. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/common/msg.h"
#include "../../src/control/internal.h"
#include "test.h"

static size_t frame(uint8_t *buf, uint16_t type, const void *payload, uint32_t len)
{
    struct om_msg_hdr h = {OM_PROTO_MAGIC, OM_PROTO_MAJOR, OM_PROTO_MINOR, type, 0, len};

    memcpy(buf, &h, sizeof(h));
    memcpy(buf + sizeof(h), payload, len);
    return sizeof(h) + len;
}

TEST(msg_decode_header)
{
    uint8_t buf[256];
    struct om_msg_hdr h, *raw = (struct om_msg_hdr *)buf;
    size_t n = frame(buf, OM_MSG_COMMAND, "ps", 2);

    CHECK_EQ(om_msg_decode(buf, n, &h), 0);
    CHECK_EQ(h.type, OM_MSG_COMMAND);
    CHECK_EQ(h.len, 2);
    CHECK_EQ(om_msg_decode(buf, sizeof(h) - 1, &h), -EBADMSG); /* truncated header */
    CHECK_EQ(om_msg_decode(buf, n - 1, &h), -EBADMSG);         /* truncated payload */
    CHECK_EQ(om_msg_decode(buf, n + 1, &h), -EBADMSG);         /* trailing bytes */
    raw->magic ^= 1;
    CHECK_EQ(om_msg_decode(buf, n, &h), -EBADMSG);
    raw->magic ^= 1;
    raw->major = OM_PROTO_MAJOR + 1;
    CHECK_EQ(om_msg_decode(buf, n, &h), -EPROTONOSUPPORT);
    CHECK_EQ(h.major, OM_PROTO_MAJOR + 1); /* filled so the caller can name it */
    raw->major = OM_PROTO_MAJOR;
    raw->type = 999;
    CHECK_EQ(om_msg_decode(buf, n, &h), -EBADMSG);
    raw->type = OM_MSG_COMMAND;
    raw->len = OM_MSG_MAX_PAYLOAD + 1;
    CHECK_EQ(om_msg_decode(buf, n, &h), -EMSGSIZE);
    CHECK_STR(om_msg_type_name(OM_MSG_WELCOME), "WELCOME");
    CHECK_STR(om_msg_type_name(4242), "unknown");
}

/* A static SM partition in an adoption: chunks of a device the server has, a chunk size, flags
 * it knows; none at all when not valid. */
TEST(msg_decode_adopt_partition)
{
    struct om_srv_adopt a, out;

    memset(&a, 0, sizeof(a));
    a.pid = 42;
    a.devmap.count = 1;
    CHECK_EQ(om_decode_adopt(&a, sizeof(a), 2, &out), 0);
    a.part = (struct om_part_assign){.flags = OM_PART_VALID | OM_PART_REMAINDER,
                                     .device = 1,
                                     .chunk_sms = 8,
                                     .serial = 3,
                                     .mask = {0xF0, 1}};
    CHECK_EQ(om_decode_adopt(&a, sizeof(a), 2, &out), 0);
    CHECK_EQ(out.part.mask[1], 1);
    a.part.device = 2; /* the server has two */
    CHECK_EQ(om_decode_adopt(&a, sizeof(a), 2, &out), -EBADMSG);
    a.part.device = 1;
    a.part.chunk_sms = 0;
    CHECK_EQ(om_decode_adopt(&a, sizeof(a), 2, &out), -EBADMSG);
    a.part.chunk_sms = 8;
    a.part.mask[0] = a.part.mask[1] = 0; /* no chunk */
    CHECK_EQ(om_decode_adopt(&a, sizeof(a), 2, &out), -EBADMSG);
    a.part.mask[0] = 1;
    a.part.flags |= 0x8;
    CHECK_EQ(om_decode_adopt(&a, sizeof(a), 2, &out), -EBADMSG);
    a.part.flags = 0; /* not valid: nothing else set */
    CHECK_EQ(om_decode_adopt(&a, sizeof(a), 2, &out), -EBADMSG);
    memset(&a.part, 0, sizeof(a.part));
    CHECK_EQ(om_decode_adopt(&a, sizeof(a), 2, &out), 0);
}

TEST(msg_decode_payloads)
{
    struct om_hello h = {.pid = 42}, out;
    struct om_srv_ready r = {.ndevices = 1};
    struct om_device_info d[2];
    uint8_t buf[sizeof(r) + sizeof(d)];

    CHECK_EQ(om_decode_hello(&h, sizeof(h), &out), 0);
    CHECK_EQ(out.pid, 42);
    CHECK_EQ(om_decode_hello(&h, sizeof(h) - 1, &out), -EBADMSG);
    /* a client of minor 3 or older: no sm_partition, served as naming none */
    memset(&out, 0x55, sizeof(out));
    CHECK_EQ(om_decode_hello(&h, offsetof(struct om_hello, sm_partition), &out), 0);
    CHECK_EQ(out.pid, 42);
    CHECK_EQ(out.sm_partition[0], 0);
    h.flags = OM_HELLO_SM_PARTITION; /* ... which cannot say it names one */
    CHECK_EQ(om_decode_hello(&h, offsetof(struct om_hello, sm_partition), &out), -EBADMSG);
    h.flags = 0;
    h.want.active_thread_pct_milli = 500; /* 0.5 %: below the smallest share */
    CHECK_EQ(om_decode_hello(&h, sizeof(h), &out), -EBADMSG);
    h.want.active_thread_pct_milli = 0;
    h.want.ndevices = OM_MAX_DEVICES + 1;
    CHECK_EQ(om_decode_hello(&h, sizeof(h), &out), -EBADMSG);
    h.want.ndevices = 0;
    h.want.priority = 2;
    CHECK_EQ(om_decode_hello(&h, sizeof(h), &out), -EBADMSG);
    h.want.priority = 0;
    h.flags = OM_HELLO_SM_PARTITION;
    strcpy(h.sm_partition, "GPU-00/abc");
    CHECK_EQ(om_decode_hello(&h, sizeof(h), &out), 0);
    CHECK_STR(out.sm_partition, "GPU-00/abc");
    memset(h.sm_partition, 'x', sizeof(h.sm_partition)); /* no NUL */
    CHECK_EQ(om_decode_hello(&h, sizeof(h), &out), -EBADMSG);
    h.flags = 0x80; /* a flag it does not know */
    memset(h.sm_partition, 0, sizeof(h.sm_partition));
    CHECK_EQ(om_decode_hello(&h, sizeof(h), &out), -EBADMSG);

    memset(d, 'x', sizeof(d)); /* names without a NUL */
    memcpy(buf, &r, sizeof(r));
    memcpy(buf + sizeof(r), d, sizeof(d[0]));
    CHECK_EQ(om_decode_srv_ready(buf, sizeof(r) + sizeof(d[0]), &r, d, 2), -EBADMSG);
    memset(d, 0, sizeof(d));
    strcpy(d[0].name, "gpu");
    memcpy(buf + sizeof(r), d, sizeof(d[0]));
    CHECK_EQ(om_decode_srv_ready(buf, sizeof(r) + sizeof(d[0]), &r, d, 2), 0);
    CHECK_STR(d[0].name, "gpu");
    r.ndevices = 2; /* claims two, carries one */
    memcpy(buf, &r, sizeof(r));
    CHECK_EQ(om_decode_srv_ready(buf, sizeof(r) + sizeof(d[0]), &r, d, 2), -EBADMSG);
    /* a device's ordinal is its index (it indexes the daemon's per-device limits) */
    r.ndevices = 1;
    memcpy(buf, &r, sizeof(r));
    d[0].ordinal = 50000000;
    memcpy(buf + sizeof(r), d, sizeof(d[0]));
    CHECK_EQ(om_decode_srv_ready(buf, sizeof(r) + sizeof(d[0]), &r, d, 2), -EBADMSG);
    /* chunk figures within its SMs and the partition masks */
    d[0].ordinal = 0;
    d[0].sm_count = 132, d[0].chunk_sms = 8, d[0].chunks = 16;
    memcpy(buf + sizeof(r), d, sizeof(d[0]));
    CHECK_EQ(om_decode_srv_ready(buf, sizeof(r) + sizeof(d[0]), &r, d, 2), 0);
    d[0].chunks = 17; /* 136 SMs of 132 */
    memcpy(buf + sizeof(r), d, sizeof(d[0]));
    CHECK_EQ(om_decode_srv_ready(buf, sizeof(r) + sizeof(d[0]), &r, d, 2), -EBADMSG);
    d[0].sm_count = 1u << 20, d[0].chunk_sms = 1, d[0].chunks = OM_PART_MAX_CHUNKS + 1;
    memcpy(buf + sizeof(r), d, sizeof(d[0]));
    CHECK_EQ(om_decode_srv_ready(buf, sizeof(r) + sizeof(d[0]), &r, d, 2), -EBADMSG);
}

/* One client's changed limits (SRV_CLIENT_LIMITS): a client id, the reserved word 0, limits in
 * their ranges; a longer payload (a later minor's) is taken, a shorter one is not. */
TEST(msg_decode_client_limits)
{
    struct om_srv_client_limits c = {.client_id = 3}, out = {0};
    uint8_t longer[sizeof(c) + 8] = {0};

    c.want.active_thread_pct_milli = 25000;
    c.want.priority = 1;
    c.want.ndevices = 1;
    c.want.mem_limit[0] = 1 << 30;
    CHECK_EQ(om_decode_client_limits(&c, sizeof(c), &out), 0);
    CHECK_EQ(out.client_id, 3);
    CHECK_EQ(out.want.mem_limit[0], 1 << 30);
    CHECK_EQ(om_decode_client_limits(&c, sizeof(c) - 1, &out), -EBADMSG);
    memcpy(longer, &c, sizeof(c));
    CHECK_EQ(om_decode_client_limits(longer, sizeof(longer), &out), 0);
    c.client_id = 0;
    CHECK_EQ(om_decode_client_limits(&c, sizeof(c), &out), -EBADMSG);
    c.client_id = 3;
    c.reserved = 1;
    CHECK_EQ(om_decode_client_limits(&c, sizeof(c), &out), -EBADMSG);
    c.reserved = 0;
    c.want.active_thread_pct_milli = 100001;
    CHECK_EQ(om_decode_client_limits(&c, sizeof(c), &out), -EBADMSG);
    c.want.active_thread_pct_milli = 25000;
    c.want.priority = 2;
    CHECK_EQ(om_decode_client_limits(&c, sizeof(c), &out), -EBADMSG);
    c.want.priority = 1;
    c.want.ndevices = OM_MAX_DEVICES + 1;
    CHECK_EQ(om_decode_client_limits(&c, sizeof(c), &out), -EBADMSG);
    CHECK_EQ(out.client_id, 3); /* untouched on failure */
}

/* A server's accounting (SRV_STATS): counts, states, each client once, usage of the message's own
 * clients on devices that exist. */
TEST(msg_decode_srv_stats)
{
    struct {
        struct om_srv_stats h;
        struct om_stats_client c[2];
        struct om_stats_usage u[2];
    } m;
    struct om_srv_stats h;
    struct om_stats_client c[2];
    struct om_stats_usage u[2];

    memset(&m, 0, sizeof(m));
    m.h =
        (struct om_srv_stats){.request_id = 7, .flags = OM_STATS_MORE, .nclients = 2, .nusage = 2};
    m.c[0] = (struct om_stats_client){.client_id = 1, .pid = 100, .state = OM_STATE_RUNNING};
    m.c[1] = (struct om_stats_client){.client_id = 2, .pid = 200, .calls = 5};
    m.u[0] = (struct om_stats_usage){.client_id = 2, .device = 1, .kernels = 3};
    m.u[1] = (struct om_stats_usage){.client_id = 1, .device = 0, .gpu_ns = 9};
    CHECK_EQ(om_decode_srv_stats(&m, sizeof(m), &h, c, 2, u, 2), 0);
    CHECK_EQ(h.request_id, 7);
    CHECK_EQ(c[1].calls, 5);
    CHECK_EQ(u[0].kernels, 3);
    CHECK_EQ(u[1].gpu_ns, 9);
    CHECK_EQ(om_decode_srv_stats(&m, sizeof(m) - 1, &h, c, 2, u, 2), -EBADMSG); /* short */
    CHECK_EQ(om_decode_srv_stats(&m, sizeof(m), &h, c, 1, u, 2), -EBADMSG);     /* too many */
    m.h.flags = 4;                                                              /* unknown flag */
    CHECK_EQ(om_decode_srv_stats(&m, sizeof(m), &h, c, 2, u, 2), -EBADMSG);
    m.h.flags = 0;
    m.c[0].state = OM_STATE_COUNT;
    CHECK_EQ(om_decode_srv_stats(&m, sizeof(m), &h, c, 2, u, 2), -EBADMSG);
    m.c[0].state = OM_STATE_IDLE;
    m.c[1].client_id = 1; /* the same client twice */
    CHECK_EQ(om_decode_srv_stats(&m, sizeof(m), &h, c, 2, u, 2), -EBADMSG);
    m.c[1].client_id = 2;
    m.u[0].client_id = 3; /* usage of a client the message does not carry */
    CHECK_EQ(om_decode_srv_stats(&m, sizeof(m), &h, c, 2, u, 2), -EBADMSG);
    m.u[0].client_id = 2;
    m.u[1].device = OM_MAX_DEVICES;
    CHECK_EQ(om_decode_srv_stats(&m, sizeof(m), &h, c, 2, u, 2), -EBADMSG);
    m.u[1].device = 0;
    CHECK_EQ(om_decode_srv_stats(&m, sizeof(m), &h, c, 2, u, 2), 0);
    m.u[0] = m.u[1]; /* the same client and device twice: its figures would be summed twice */
    CHECK_EQ(om_decode_srv_stats(&m, sizeof(m), &h, c, 2, u, 2), -EBADMSG);
    m.u[0].device = 1; /* the same client on two devices is right */
    CHECK_EQ(om_decode_srv_stats(&m, sizeof(m), &h, c, 2, u, 2), 0);
}

TEST(msg_socket_roundtrip)
{
    static struct om_msg m;
    int sv[2];

    CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    CHECK_EQ(om_msg_send_text(sv[0], OM_MSG_COMMAND, 0, "get_server_list"), 0);
    CHECK_EQ(om_msg_recv(sv[1], &m, NULL, 1000), 0);
    CHECK_EQ(m.hdr.type, OM_MSG_COMMAND);
    CHECK_STR((const char *)m.payload, "get_server_list");
    CHECK_EQ(om_msg_text(&m, 100), 0);
    CHECK_EQ(om_msg_text(&m, 3), -EBADMSG);
    CHECK_EQ(om_msg_recv(sv[1], &m, NULL, 10), -ETIMEDOUT);
    /* Raw garbage on the socket is refused, not trusted. */
    CHECK_EQ(write(sv[0], "garbage-bytes-here!!", 20), 20);
    CHECK_EQ(om_msg_recv(sv[1], &m, NULL, 1000), -EBADMSG);
    close(sv[0]);
    CHECK_EQ(om_msg_recv(sv[1], &m, NULL, 1000), -ECONNRESET);
    close(sv[1]);
}

TEST(msg_answer_chunks)
{
    static struct om_msg m;
    size_t len = 3 * OM_ANSWER_CHUNK + 123, got = 0;
    char *text = malloc(len), *back = malloc(len);
    int sv[2], pieces = 0;

    CHECK(text && back);
    for (size_t i = 0; i < len; i++)
        text[i] = (char)('a' + i % 26);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    int one = 4 << 20; /* room for the whole answer before anyone reads */
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
    static struct conn c;
    c = (struct conn){.fd = sv[0], .kind = CONN_UI};
    CHECK_EQ(om_send_answer(NULL, &c, false, text, len), 0);
    CHECK(c.out.buf == NULL); /* all of it went */
    do {
        CHECK_EQ(om_msg_recv(sv[1], &m, NULL, 1000), 0);
        CHECK(got + m.hdr.len <= len);
        memcpy(back + got, m.payload, m.hdr.len);
        got += m.hdr.len;
        pieces++;
    } while (m.hdr.flags & OM_ANSWER_MORE);
    CHECK_EQ(got, len);
    CHECK_EQ(pieces, 4);
    CHECK(memcmp(text, back, len) == 0);
    free(text);
    free(back);
    close(sv[0]);
    close(sv[1]);
}

/* An answer longer than the front-end's socket takes before it reads (a stats --json of
 * hundreds of clients): what does not fit waits in the connection and goes as the socket drains,
 * every byte once, in order, the last piece without OM_ANSWER_MORE; the next answer waits for
 * it (-EBUSY). It was dropped, and the front-end waited its 60 s for the rest. */
TEST(msg_answer_waits_for_room)
{
    static struct om_msg m;
    static struct conn c;
    size_t len = 40 * OM_ANSWER_CHUNK + 7, got = 0;
    char *text = malloc(len), *back = malloc(len);
    int sv[2], pieces = 0, small = 128 << 10; /* a few pieces, not 40 */

    CHECK(text && back);
    for (size_t i = 0; i < len; i++)
        text[i] = (char)('A' + i % 23);
    CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK, 0, sv), 0);
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    c = (struct conn){.fd = sv[0], .kind = CONN_UI};
    CHECK_EQ(om_send_answer(NULL, &c, true, text, len), 0);
    CHECK(c.out.buf != NULL && c.out.off < len); /* the socket took part of it */
    CHECK_EQ(om_send_answer(NULL, &c, false, "x", 1), -EBUSY);
    for (;;) {
        int rc = om_msg_recv(sv[1], &m, NULL, 0);
        if (rc == -EAGAIN || rc == -ETIMEDOUT) { /* drained: the event loop's POLLOUT */
            CHECK_EQ(om_conn_flush(&c), 0);
            continue;
        }
        CHECK_EQ(rc, 0);
        CHECK(m.hdr.type == OM_MSG_ANSWER && (m.hdr.flags & OM_ANSWER_ERROR));
        CHECK(got + m.hdr.len <= len);
        memcpy(back + got, m.payload, m.hdr.len);
        got += m.hdr.len;
        pieces++;
        if (!(m.hdr.flags & OM_ANSWER_MORE))
            break;
    }
    CHECK_EQ(got, len);
    CHECK_EQ(pieces, 41);
    CHECK(memcmp(text, back, len) == 0);
    CHECK(c.out.buf == NULL);
    free(text);
    free(back);
    close(sv[0]);
    close(sv[1]);
}

TEST(msg_fd_passing)
{
    static struct om_msg m;
    int sv[2], pfd[2], got = -1;
    char c = 0;

    CHECK_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    CHECK_EQ(pipe(pfd), 0);
    CHECK_EQ(om_msg_send(sv[0], OM_MSG_WELCOME, 0, "x", 1, pfd[1]), 0);
    CHECK_EQ(om_msg_recv(sv[1], &m, &got, 1000), 0);
    CHECK(got >= 0 && got != pfd[1]);
    CHECK_EQ(write(got, "z", 1), 1);
    CHECK_EQ(read(pfd[0], &c, 1), 1);
    CHECK_EQ(c, 'z');
    CHECK(fcntl(got, F_GETFD) & FD_CLOEXEC);
    close(got);
    /* A descriptor nobody asked for is closed, not leaked: after the receive
     * the pipe's only write ends are ours, so closing ours gives EOF. */
    CHECK_EQ(om_msg_send(sv[0], OM_MSG_COMMAND, 0, "y", 1, pfd[1]), 0);
    CHECK_EQ(om_msg_recv(sv[1], &m, NULL, 1000), 0);
    close(pfd[1]);
    CHECK_EQ(read(pfd[0], &c, 1), 0);
    close(pfd[0]);
    close(sv[0]);
    close(sv[1]);
}
