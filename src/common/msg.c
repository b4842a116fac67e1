/* SPDX-License-Identifier: MIT */
/* The one place that turns bytes from another process into checked protocol messages. */
#include "msg.h"
#include "visible.h"

#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

const char *om_msg_type_name(uint32_t type)
{
    switch (type) {
#define OM_X_NAME(name, value)                                                                     \
    case value: return #name;
        OM_MSG_TYPES(OM_X_NAME)
#undef OM_X_NAME
    default: return "unknown";
    }
}

static bool type_known(uint32_t type)
{
    return strcmp(om_msg_type_name(type), "unknown") != 0;
}

int om_msg_decode(const void *buf, size_t n, struct om_msg_hdr *ret_hdr)
{
    struct om_msg_hdr h;

    if (n < sizeof(h))
        return -EBADMSG;
    memcpy(&h, buf, sizeof(h));
    if (h.magic != OM_PROTO_MAGIC)
        return -EBADMSG;
    if (h.major != OM_PROTO_MAJOR) {
        *ret_hdr = h;
        return -EPROTONOSUPPORT;
    }
    if (h.len > OM_MSG_MAX_PAYLOAD)
        return -EMSGSIZE;
    if (h.len != n - sizeof(h) || !type_known(h.type))
        return -EBADMSG;
    *ret_hdr = h;
    return 0;
}

int om_decode_limits(const struct om_limits *in, struct om_limits *ret)
{
    struct om_limits l;

    memcpy(&l, in, sizeof(l));
    if (l.active_thread_pct_milli != 0 &&
        (l.active_thread_pct_milli < 1000 || l.active_thread_pct_milli > 100000))
        return -EBADMSG;
    if (l.priority > 1 || l.ndevices > OM_MAX_DEVICES || l.reserved != 0)
        return -EBADMSG;
    *ret = l;
    return 0;
}

struct om_limits om_limits_merge(const struct om_limits *srv, const struct om_limits *want)
{
    struct om_limits l = *srv;

    if (want->active_thread_pct_milli &&
        (!l.active_thread_pct_milli || want->active_thread_pct_milli < l.active_thread_pct_milli))
        l.active_thread_pct_milli = want->active_thread_pct_milli;
    if (want->priority > l.priority)
        l.priority = want->priority;
    for (uint32_t i = 0; i < want->ndevices && i < OM_MAX_DEVICES; i++) {
        if (want->mem_limit[i] && (!l.mem_limit[i] || want->mem_limit[i] < l.mem_limit[i]))
            l.mem_limit[i] = want->mem_limit[i];
        if (i + 1 > l.ndevices)
            l.ndevices = i + 1;
    }
    return l;
}

int om_decode_hello(const void *p, size_t len, struct om_hello *ret)
{
    struct om_hello h;

    /* A client of minor 3 or older sends no sm_partition (the field came last, with minor 4):
     * served as one that names no partition. */
    if (len != sizeof(h) && len != offsetof(struct om_hello, sm_partition))
        return -EBADMSG;
    memset(&h, 0, sizeof(h));
    memcpy(&h, p, len < sizeof(h) ? len : sizeof(h));
    if (len < sizeof(h) && (h.flags & OM_HELLO_SM_PARTITION))
        return -EBADMSG;
    if ((h.flags & ~(OM_HELLO_VISIBLE | OM_HELLO_MEM_LIMIT | OM_HELLO_SM_PARTITION)) ||
        om_decode_limits(&h.want, &h.want) < 0 || !memchr(h.visible, '\0', sizeof(h.visible)) ||
        !memchr(h.mem_limit, '\0', sizeof(h.mem_limit)) ||
        !memchr(h.sm_partition, '\0', sizeof(h.sm_partition)))
        return -EBADMSG;
    *ret = h;
    return 0;
}

int om_decode_welcome(const void *p, size_t len, struct om_welcome *ret)
{
    struct om_welcome w;

    if (len < sizeof(w))
        return -EBADMSG;
    memcpy(&w, p, sizeof(w));
    if (w.server_pid == 0 || w.ring_bytes < 4096 || w.ring_bytes > (64u << 20) ||
        w.ndevices > OM_MAX_DEVICES)
        return -EBADMSG;
    *ret = w;
    return 0;
}

int om_decode_adopt(const void *p, size_t len, uint32_t ndevs, struct om_srv_adopt *ret)
{
    struct om_srv_adopt a;

    if (len < sizeof(a))
        return -EBADMSG;
    memcpy(&a, p, sizeof(a));
    if (a.pid == 0 || om_decode_limits(&a.limits, &a.limits) < 0 ||
        om_decode_limits(&a.want, &a.want) < 0 || om_decode_devmap(&a.devmap, ndevs, &a.devmap) < 0)
        return -EBADMSG;
    if (a.part.flags & ~(OM_PART_VALID | OM_PART_REMAINDER))
        return -EBADMSG;
    if (a.part.flags & OM_PART_VALID) { /* chunks of a device it has, of a size a split makes */
        unsigned bits =
            (unsigned)(__builtin_popcountll(a.part.mask[0]) + __builtin_popcountll(a.part.mask[1]));
        if (a.part.device >= ndevs || a.part.chunk_sms < 1 || a.part.chunk_sms > 1024 || bits == 0)
            return -EBADMSG;
    } else if (a.part.flags || a.part.mask[0] || a.part.mask[1]) {
        return -EBADMSG;
    }
    *ret = a;
    return 0;
}

int om_decode_srv_client(const void *p, size_t len, struct om_srv_client *ret)
{
    struct om_srv_client c;

    if (len < sizeof(c))
        return -EBADMSG;
    memcpy(&c, p, sizeof(c));
    if (c.event != OM_CLIENT_UP && c.event != OM_CLIENT_DOWN && c.event != OM_CLIENT_MEMORY)
        return -EBADMSG;
    *ret = c;
    return 0;
}

int om_decode_client_limits(const void *p, size_t len, struct om_srv_client_limits *ret)
{
    struct om_srv_client_limits c;

    if (len < sizeof(c))
        return -EBADMSG;
    memcpy(&c, p, sizeof(c));
    if (c.client_id == 0 || c.reserved != 0 || om_decode_limits(&c.want, &c.want) < 0)
        return -EBADMSG;
    *ret = c;
    return 0;
}

static bool nul_terminated(const char *s, size_t cap)
{
    return memchr(s, '\0', cap) != NULL;
}

/* Replaces every byte of a NUL-terminated text outside printable ASCII with '?'. */
static void printable(char *text)
{
    for (; *text; text++)
        if ((unsigned char)*text < 0x20 || (unsigned char)*text > 0x7e)
            *text = '?';
}

int om_decode_srv_ready(const void *p, size_t len, struct om_srv_ready *ret_head,
                        struct om_device_info *ret_devs, uint32_t max_devs)
{
    struct om_srv_ready r;
    const uint8_t *at = (const uint8_t *)p + sizeof(r);

    if (len < sizeof(r))
        return -EBADMSG;
    memcpy(&r, p, sizeof(r));
    if (r.ndevices > max_devs || r.ndevices > OM_MAX_DEVICES ||
        len - sizeof(r) < (size_t)r.ndevices * sizeof(struct om_device_info))
        return -EBADMSG;
    for (uint32_t i = 0; i < r.ndevices; i++) {
        struct om_device_info d;
        memcpy(&d, at + i * sizeof(d), sizeof(d));
        if (!nul_terminated(d.name, sizeof(d.name)) ||
            !nul_terminated(d.pci_bus_id, sizeof(d.pci_bus_id)))
            return -EBADMSG;
        /* Its ordinal indexes the daemon's per-device tables (the limits' mem_limit[]); its SM
         * figures size the static partitions' chunk masks. */
        if (d.ordinal != i || d.chunks > OM_PART_MAX_CHUNKS ||
            (d.chunks && (uint64_t)d.chunks * d.chunk_sms > d.sm_count))
            return -EBADMSG;
    }
    *ret_head = r;
    memcpy(ret_devs, at, (size_t)r.ndevices * sizeof(struct om_device_info));
    /* The server runs as its user, who can take it over; these texts reach root's
     * device_query and get_device_client_list: nothing but printable ASCII is kept. */
    for (uint32_t i = 0; i < r.ndevices; i++) {
        printable(ret_devs[i].name);
        printable(ret_devs[i].pci_bus_id);
    }
    return 0;
}

int om_decode_srv_stats(const void *p, size_t len, struct om_srv_stats *ret_head,
                        struct om_stats_client *ret_clients, uint32_t max_clients,
                        struct om_stats_usage *ret_usage, uint32_t max_usage)
{
    const uint8_t *at = (const uint8_t *)p + sizeof(struct om_srv_stats);
    struct om_srv_stats h;
    size_t need;

    if (len < sizeof(h))
        return -EBADMSG;
    memcpy(&h, p, sizeof(h));
    if ((h.flags & ~OM_STATS_MORE) || h.nclients > max_clients || h.nusage > max_usage)
        return -EBADMSG;
    need = sizeof(h) + (size_t)h.nclients * sizeof(struct om_stats_client) +
           (size_t)h.nusage * sizeof(struct om_stats_usage);
    if (len < need)
        return -EBADMSG;
    for (uint32_t i = 0; i < h.nclients; i++) {
        struct om_stats_client c;
        memcpy(&c, at + i * sizeof(c), sizeof(c));
        if (c.state >= OM_STATE_COUNT || c.reserved != 0 || c.pid == 0)
            return -EBADMSG;
        for (uint32_t j = 0; j < i; j++) /* one record per client */
            if (!memcmp(at + j * sizeof(c), &c.client_id, sizeof(c.client_id)))
                return -EBADMSG;
    }
    at += (size_t)h.nclients * sizeof(struct om_stats_client);
    for (uint32_t i = 0; i < h.nusage; i++) {
        struct om_stats_usage u;
        bool known = false;
        memcpy(&u, at + i * sizeof(u), sizeof(u));
        for (uint32_t j = 0; j < h.nclients && !known; j++)
            known = !memcmp((const uint8_t *)p + sizeof(h) + j * sizeof(struct om_stats_client),
                            &u.client_id, sizeof(u.client_id));
        if (!known || u.device >= OM_MAX_DEVICES)
            return -EBADMSG;
        for (uint32_t j = 0; j < i; j++) { /* one row per client and device: a second would be
                                            * summed twice, and a duplicate series makes
                                            * Prometheus refuse the whole scrape */
            struct om_stats_usage v;
            memcpy(&v, at + j * sizeof(v), sizeof(v));
            if (v.client_id == u.client_id && v.device == u.device)
                return -EBADMSG;
        }
    }
    *ret_head = h;
    memcpy(ret_clients, (const uint8_t *)p + sizeof(h),
           (size_t)h.nclients * sizeof(struct om_stats_client));
    memcpy(ret_usage, at, (size_t)h.nusage * sizeof(struct om_stats_usage));
    return 0;
}

int om_decode_u32_pair(const void *p, size_t len, uint32_t *ret_a, uint32_t *ret_b)
{
    uint32_t v[2];

    if (len < sizeof(v))
        return -EBADMSG;
    memcpy(v, p, sizeof(v));
    *ret_a = v[0];
    *ret_b = v[1];
    return 0;
}

int om_msg_text(const struct om_msg *m, size_t max_len)
{
    if (m->hdr.len > max_len || memchr(m->payload, '\0', m->hdr.len))
        return -EBADMSG;
    return 0;
}

int om_msg_send(int fd, uint16_t type, uint16_t flags, const void *payload, size_t len, int send_fd)
{
    struct om_msg_hdr h = {.magic = OM_PROTO_MAGIC,
                           .major = OM_PROTO_MAJOR,
                           .minor = OM_PROTO_MINOR,
                           .type = type,
                           .flags = flags,
                           .len = (uint32_t)len};
    struct iovec iov[2] = {{.iov_base = &h, .iov_len = sizeof(h)},
                           {.iov_base = (void *)payload, .iov_len = len}};
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } ctl;
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
    ssize_t n;

    if (len > OM_MSG_MAX_PAYLOAD)
        return -EMSGSIZE;
    if (send_fd >= 0) {
        struct cmsghdr *c;
        memset(&ctl, 0, sizeof(ctl));
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof(ctl.buf);
        c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &send_fd, sizeof(int));
    }
    do
        n = sendmsg(fd, &mh, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EPIPE ? -ECONNRESET : -errno;
    return (size_t)n == sizeof(h) + len ? 0 : -EIO;
}

int om_msg_send_text(int fd, uint16_t type, uint16_t flags, const char *text)
{
    return om_msg_send(fd, type, flags, text, strlen(text), -1);
}

/* Closes every descriptor carried by the control data of mh except the one kept. */
static int take_fds(struct msghdr *mh, int *ret_fd)
{
    int kept = -1;

    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < nfd; i++) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (ret_fd && kept < 0)
                kept = fd;
            else
                close(fd);
        }
    }
    if (ret_fd)
        *ret_fd = kept;
    return kept;
}

int om_msg_recv(int fd, struct om_msg *ret, int *ret_fd, int timeout_ms)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(4 * sizeof(int))];
    } ctl;
    struct iovec iov = {.iov_base = ret, .iov_len = sizeof(ret->hdr) + OM_MSG_MAX_PAYLOAD};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = ctl.buf,
                        .msg_controllen = sizeof(ctl.buf)};
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    ssize_t n;
    int rc;

    if (ret_fd)
        *ret_fd = -1;
    if (timeout_ms >= 0) {
        do
            rc = poll(&pfd, 1, timeout_ms);
        while (rc < 0 && errno == EINTR);
        if (rc < 0)
            return -errno;
        if (rc == 0)
            return -ETIMEDOUT;
    }
    do
        n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EAGAIN ? -EAGAIN : -ECONNRESET;
    if (n == 0)
        return -ECONNRESET;
    if (mh.msg_flags & MSG_TRUNC) {
        take_fds(&mh, NULL);
        return -EMSGSIZE;
    }
    rc = om_msg_decode(ret, (size_t)n, &ret->hdr);
    if (rc < 0) {
        take_fds(&mh, NULL);
        return rc;
    }
    ret->payload[ret->hdr.len] = '\0';
    /* MSG_CTRUNC: the descriptors did not fit (our table is full, or the
     * peer sent too many). The message itself is good: hand it over without
     * a descriptor, and the caller that needed one refuses just that request. */
    if (mh.msg_flags & MSG_CTRUNC)
        take_fds(&mh, NULL);
    else
        take_fds(&mh, ret_fd);
    return 0;
}
