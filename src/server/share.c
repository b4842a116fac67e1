/* SPDX-License-Identifier: MIT */
/*
 * A client's SM share (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, set_default_active_thread_percentage,
 * set_active_thread_percentage; issue #12): its kernels run on about that share of the device's
 * SMs, and from its next launch after the operator changes it.
 *
 * Mechanism: green contexts ("lanes") the server makes over SM partitions. For a share of p %
 * the server splits the device's SMs into as many disjoint groups as fit of the nearest count
 * the hardware allows (a multiple of the partition alignment, at least its minimum: 8 and 8 on
 * a Hopper GPU; docs/driver-facts.md) and makes one green context of each. A client is placed on
 * the lane of its count with the fewest clients, so two clients at 50 % run on different halves.
 * Lanes live as long as the server; clients of the same count share them.
 *
 * A client's streams stay what they are (streams of the primary context: their handles are the
 * client's, and every non-launch operation goes to them). Each stream the client launches on
 * gets a shadow stream in its lane, and its kernel launches (cuLaunchKernel, cuLaunchKernelEx,
 * cuGraphLaunch) go to the shadow. Order within the client's stream is kept with one event per
 * direction, only where the kind of operation changes:
 *
 *   side OTHER   the client's stream has work its shadow has not waited for;
 *   side LAUNCH  the shadow has kernels the client's stream has not waited for;
 *   side SETTLED neither.
 *
 * A launch after OTHER makes the shadow wait for the stream; any other use of the stream after
 * LAUNCH (a copy, an event record, a synchronize, a query, the legacy default stream's ordering)
 * makes the stream wait for the shadow first (om_share_settle, called by route.c for every
 * stream a client's call names). Consecutive launches, and consecutive other operations, cost
 * nothing beyond a lookup. A client without a share pays one comparison per launch.
 *
 * Streams the client made in green contexts of its own already run within its share (their SM
 * resource descends from its lane's: api/green.c) and are never shadowed; a stream capturing
 * a graph is not either (its launches are captured; the graph's launch is shadowed).
 *
 * A share changed while the client runs (the main thread stores the new limits) is seen at its
 * next launch: the client moves to a lane of the new count, each shadow is replaced by one in
 * the new lane that first waits for the old one. At 100 % the client leaves its lane: its
 * streams wait for their shadows, which go.
 *
 * Reported SM count: CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT and the SM resource the client
 * sees are its lane's (api/devices.c, api/green.c).
 *
 * Static SM partitions (-S, the daemon's partition.c): a client of a partition runs on that
 * partition's lane whatever its share, priority or context partition. The device's SMs are split
 * once, at the first such client, into every group of the chunk size the daemon named (one split:
 * the groups are disjoint, and a descriptor may combine any of them with the split's remainder);
 * a partition's lane is one green context of its chunks, made at its first client and kept while
 * the server runs (a slot of a removed partition, without clients, is reused). Partitions never
 * share a chunk (the daemon hands them out), so their kernels never share an SM.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/config.h"
#include "exec.h"

#define LANES_MAX 64      /* lanes per device: 16 counts of 4 groups, or fewer counts of more */
#define PART_LANES_MAX 64 /* static partitions' lanes per device (the daemon makes at most 64) */

enum side { SIDE_SETTLED, SIDE_OTHER, SIDE_LAUNCH };

struct lane {
    unsigned sms;  /* the count asked for (the key) */
    unsigned real; /* its green context's SMs */
    CUgreenCtx green;
    struct om_CUdevResource res;
    unsigned clients; /* sessions placed on it now */
};

static struct device_lanes {
    bool probed;
    bool ready; /* probed: the fields below no longer change (__atomic; read without the lock) */
    CUresult probe_rc;
    unsigned total, min, align;
    struct om_CUdevResource whole;
    struct lane lanes[LANES_MAX];
    unsigned nlanes;
    /* Static partitions: the device's chunks (split once: chunk_rc), their remainder, and a lane
     * per partition, by its serial. */
    bool chunked;
    CUresult chunk_rc;
    unsigned chunk_sms, nchunks;
    struct om_CUdevResource chunks[OM_PART_MAX_CHUNKS], rest;
    struct lane parts[PART_LANES_MAX];
    uint64_t part_serial[PART_LANES_MAX];
    unsigned nparts;
} devs[OM_MAX_DEVICES];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

struct shadow {
    CUstream client, green;
    CUevent to_client, to_green; /* recorded on the shadow / on the client's stream */
    enum side side;
    uint32_t gen; /* the placement its green stream belongs to */
};

struct om_share {
    uint32_t pct_milli; /* the share it is placed for (0: none) */
    uint32_t gen;       /* placements so far */
    int dev;
    struct lane *lane; /* NULL: the whole device */
    struct shadow *v;
    size_t n, cap, last;
    bool logged_fail;
    bool reserve_logged;   /* placed for the priority reserve once (logged) */
    bool partition_logged; /* placed for a context's SM partition once (logged) */
    uint64_t part_serial;  /* the static partition its lane is (0: none) */
};

#define R(sym) REAL(sym)

/* The device's SM resource, once (under the lock). */
static struct device_lanes *device(int dev)
{
    struct device_lanes *d;

    if (dev < 0 || dev >= (int)OM_MAX_DEVICES)
        return NULL;
    d = &devs[dev];
    if (!d->probed) {
        static const int need[] = {OM_IDX_cuDeviceGetDevResource,
                                   OM_IDX_cuDevSmResourceSplitByCount,
                                   OM_IDX_cuDevResourceGenerateDesc, OM_IDX_cuGreenCtxCreate,
                                   OM_IDX_cuGreenCtxStreamCreate};
        d->probed = true;
        for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
            if (!om_server_has(need[i])) {
                d->probe_rc = CUDA_ERROR_NOT_SUPPORTED; /* a driver before green contexts */
                __atomic_store_n(&d->ready, true, __ATOMIC_RELEASE);
                return NULL;
            }
        d->probe_rc = ((CUresult(*)(CUdevice, struct om_CUdevResource *, int))R(
            cuDeviceGetDevResource))(dev, &d->whole, CU_DEV_RESOURCE_TYPE_SM);
        if (d->probe_rc == CUDA_SUCCESS) {
            d->total = d->whole.sm.smCount;
            d->min = d->whole.sm.minSmPartitionSize ? d->whole.sm.minSmPartitionSize : 1;
            d->align = d->whole.sm.smCoscheduledAlignment ? d->whole.sm.smCoscheduledAlignment : 1;
        }
        __atomic_store_n(&d->ready, true, __ATOMIC_RELEASE);
    }
    return d->probe_rc == CUDA_SUCCESS && d->total ? d : NULL;
}

/* The device's SM figures, probed once: without the lock after that (a client under a partition
 * asks at each launch). */
static const struct device_lanes *device_figures(int dev)
{
    const struct device_lanes *d;

    if (dev < 0 || dev >= (int)OM_MAX_DEVICES)
        return NULL;
    if (!__atomic_load_n(&devs[dev].ready, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&lock);
        device(dev);
        pthread_mutex_unlock(&lock);
    }
    d = &devs[dev];
    return __atomic_load_n(&d->ready, __ATOMIC_ACQUIRE) && d->probe_rc == CUDA_SUCCESS && d->total
               ? d
               : NULL;
}

/* The SM count of a share: the nearest multiple of the alignment, at least the partition
 * minimum; the device's count when that reaches it (0: no share). */
static unsigned count_for(const struct device_lanes *d, uint32_t pct_milli)
{
    uint64_t exact_milli = (uint64_t)d->total * pct_milli / 100; /* SMs x 1000 */
    uint64_t step = (uint64_t)d->align * 1000;
    unsigned n = (unsigned)((exact_milli + step / 2) / step) * d->align;

    if (n < d->min)
        n = d->min;
    return n >= d->total ? d->total : n;
}

unsigned om_share_sm_count(int dev, uint32_t pct_milli)
{
    const struct device_lanes *d = device_figures(dev);

    if (!d)
        return 0;
    return pct_milli && pct_milli < 100000 ? count_for(d, pct_milli) : d->total;
}

/* Makes the lanes of a count: every disjoint group of it the device has (under the lock). */
static CUresult make_lanes(struct device_lanes *d, int dev, unsigned sms)
{
    struct om_CUdevResource groups[LANES_MAX], rest;
    unsigned n = LANES_MAX - d->nlanes;
    CUresult rc;

    if (n == 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = ((CUresult(*)(struct om_CUdevResource *, unsigned *, const struct om_CUdevResource *,
                       struct om_CUdevResource *, unsigned,
                       unsigned))R(cuDevSmResourceSplitByCount))(groups, &n, &d->whole, &rest, 0,
                                                                 sms);
    if (rc == CUDA_SUCCESS && n == 0)
        rc = CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    for (unsigned i = 0; i < n && rc == CUDA_SUCCESS; i++) {
        struct lane *l = &d->lanes[d->nlanes];
        CUdevResourceDesc desc = NULL;

        rc = ((CUresult(*)(CUdevResourceDesc *, struct om_CUdevResource *, unsigned))R(
            cuDevResourceGenerateDesc))(&desc, &groups[i], 1);
        if (rc == CUDA_SUCCESS)
            rc = ((CUresult(*)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned))R(
                cuGreenCtxCreate))(&l->green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
        if (rc != CUDA_SUCCESS)
            break;
        l->sms = sms;
        l->real = groups[i].sm.smCount;
        l->res = groups[i];
        l->clients = 0;
        d->nlanes++;
    }
    if (rc == CUDA_SUCCESS)
        om_info("SM share: %u green context(s) of %u SMs made (of %u)", n, groups[0].sm.smCount,
                d->total);
    return rc;
}

/* The lane of `sms` SMs with the fewest clients, made at first use; NULL with *rc on failure. */
static struct lane *lane_take(int dev, unsigned sms, CUresult *rc)
{
    struct lane *best = NULL;

    pthread_mutex_lock(&lock);
    struct device_lanes *d = device(dev);
    *rc = d ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED;
    for (int pass = 0; d && pass < 2 && !best && *rc == CUDA_SUCCESS; pass++) {
        for (unsigned i = 0; i < d->nlanes; i++)
            if (d->lanes[i].sms == sms && (!best || d->lanes[i].clients < best->clients))
                best = &d->lanes[i];
        if (!best && pass == 0)
            *rc = make_lanes(d, dev, sms);
    }
    if (best)
        best->clients++;
    else if (*rc == CUDA_SUCCESS)
        *rc = CUDA_ERROR_UNKNOWN;
    pthread_mutex_unlock(&lock);
    return best;
}

static void lane_leave(struct lane *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&lock);
    l->clients--;
    pthread_mutex_unlock(&lock);
}

/* ------------------------------------------------------------------ static partitions */

/* The device's chunks, split once (under the lock). */
static CUresult chunk_device(struct device_lanes *d, unsigned chunk_sms)
{
    unsigned n = OM_PART_MAX_CHUNKS;

    if (d->chunked)
        return d->chunk_sms == chunk_sms ? d->chunk_rc : CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    d->chunked = true;
    d->chunk_sms = chunk_sms;
    d->chunk_rc = ((CUresult(*)(struct om_CUdevResource *, unsigned *,
                                const struct om_CUdevResource *, struct om_CUdevResource *,
                                unsigned, unsigned))R(cuDevSmResourceSplitByCount))(
        d->chunks, &n, &d->whole, &d->rest, 0, chunk_sms);
    if (d->chunk_rc == CUDA_SUCCESS && (n == 0 || d->chunks[0].sm.smCount != chunk_sms))
        d->chunk_rc = CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION; /* not the daemon's chunks */
    if (d->chunk_rc == CUDA_SUCCESS) {
        d->nchunks = n;
        om_info("static SM partitions: %u chunks of %u SMs (SMs per chunk: %u), %u SMs left over",
                n, chunk_sms, chunk_sms, d->rest.sm.smCount);
    } else {
        om_err("static SM partitions: the device's SMs cannot be split into chunks of %u "
               "(CUresult %d)",
               chunk_sms, d->chunk_rc);
    }
    return d->chunk_rc;
}

/* A green context of the partition's chunks (and the remainder where it has it), into l. */
static CUresult make_part_lane(struct device_lanes *d, int dev, const struct om_part_assign *p,
                               struct lane *l)
{
    struct om_CUdevResource res[OM_PART_MAX_CHUNKS + 1];
    CUdevResourceDesc desc = NULL;
    unsigned k = 0, sms = 0;
    CUresult rc;

    for (unsigned i = 0; i < OM_PART_MAX_CHUNKS; i++) {
        if (!((p->mask[i / 64] >> (i % 64)) & 1u))
            continue;
        if (i >= d->nchunks)
            return CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION; /* a chunk the device has not */
        res[k++] = d->chunks[i];
        sms += d->chunks[i].sm.smCount;
    }
    if ((p->flags & OM_PART_REMAINDER) && d->rest.sm.smCount) {
        res[k++] = d->rest;
        sms += d->rest.sm.smCount;
    }
    rc = ((CUresult(*)(CUdevResourceDesc *, struct om_CUdevResource *, unsigned))R(
        cuDevResourceGenerateDesc))(&desc, res, k);
    if (rc == CUDA_SUCCESS)
        rc = ((CUresult(*)(CUgreenCtx *, CUdevResourceDesc, CUdevice, unsigned))R(
            cuGreenCtxCreate))(&l->green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM);
    if (rc != CUDA_SUCCESS)
        return rc;
    l->sms = l->real = sms;
    l->clients = 0;
    /* What the client sees: the green context's own resource, else its first chunk's with the
     * partition's count. */
    if (!om_server_has(OM_IDX_cuGreenCtxGetDevResource) ||
        ((CUresult(*)(CUgreenCtx, struct om_CUdevResource *, int))R(cuGreenCtxGetDevResource))(
            l->green, &l->res, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS) {
        l->res = res[0];
        l->res.sm.smCount = sms;
    }
    return CUDA_SUCCESS;
}

/* The lane of a static partition, made at its first client; NULL with *rc on failure. */
static struct lane *part_take(int dev, const struct om_part_assign *p, CUresult *rc)
{
    struct lane *l = NULL;
    int free_slot = -1;

    pthread_mutex_lock(&lock);
    struct device_lanes *d = device(dev);
    *rc = d ? chunk_device(d, p->chunk_sms) : CUDA_ERROR_NOT_SUPPORTED;
    for (unsigned i = 0; *rc == CUDA_SUCCESS && i < d->nparts && !l; i++) {
        if (d->part_serial[i] == p->serial)
            l = &d->parts[i];
        else if (free_slot < 0 && d->parts[i].clients == 0)
            free_slot = (int)i; /* a partition without clients (maybe removed): reusable */
    }
    if (*rc == CUDA_SUCCESS && !l) {
        unsigned at = d->nparts < PART_LANES_MAX ? d->nparts : (unsigned)free_slot;
        if (d->nparts >= PART_LANES_MAX && free_slot < 0) {
            *rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            struct lane fresh;
            if ((*rc = make_part_lane(d, dev, p, &fresh)) == CUDA_SUCCESS) {
                if (at < d->nparts) /* the old partition's green context goes */
                    ((CUresult(*)(CUgreenCtx))R(cuGreenCtxDestroy))(d->parts[at].green);
                else
                    d->nparts++;
                d->parts[at] = fresh;
                d->part_serial[at] = p->serial;
                l = &d->parts[at];
                om_info("static SM partition %llu: a green context of %u SMs made",
                        (unsigned long long)p->serial, fresh.real);
            }
        }
    }
    if (l)
        l->clients++;
    pthread_mutex_unlock(&lock);
    return l;
}

/* Places a client of a static partition on its lane, once. */
static CUresult current_static(struct session *s)
{
    struct om_share *sh = s->share;
    struct lane *l;
    CUresult rc;

    if (sh && sh->part_serial == s->part.serial && sh->lane)
        return CUDA_SUCCESS;
    if (!sh) {
        if (!(sh = s->share = calloc(1, sizeof(*sh))))
            return CUDA_ERROR_OUT_OF_MEMORY;
        sh->dev = s->dev;
        s->nshares++;
    }
    if (!(l = part_take(sh->dev, &s->part, &rc))) {
        if (!sh->logged_fail)
            om_err("client %d: cannot make the green context of its static SM partition "
                   "(CUresult %d): its kernels are refused",
                   (int)s->pid, rc);
        sh->logged_fail = true;
        return rc;
    }
    lane_leave(sh->lane);
    sh->lane = l;
    sh->gen++;
    sh->part_serial = s->part.serial;
    om_share_sms_changed(s); /* its SM count is its lane's now */
    om_info("client %d: static SM partition: kernels on %u of %u SMs", (int)s->pid, l->real,
            om_share_sm_count(sh->dev, 0));
    return CUDA_SUCCESS;
}

/* The SMs of a client's static partition on dev (0: it has none there). */
static unsigned static_sms(struct session *s, int dev)
{
    const struct device_lanes *d;
    unsigned chunks, n;

    if (!(s->part.flags & OM_PART_VALID) || (int)s->part.device != dev ||
        !(d = device_figures(dev)) || !s->part.chunk_sms)
        return 0;
    if (current_static(s) == CUDA_SUCCESS && s->share && s->share->lane)
        return s->share->lane->real; /* placed: its green context's own count */
    chunks =
        (unsigned)(__builtin_popcountll(s->part.mask[0]) + __builtin_popcountll(s->part.mask[1]));
    n = d->chunked && !d->chunk_rc ? d->nchunks : d->total / s->part.chunk_sms;
    if (n > OM_PART_MAX_CHUNKS)
        n = OM_PART_MAX_CHUNKS;
    return chunks * s->part.chunk_sms +
           ((s->part.flags & OM_PART_REMAINDER) ? d->total - n * s->part.chunk_sms : 0);
}

/* ------------------------------------------------------------------ a session's shadows */

static struct shadow *find(struct om_share *sh, CUstream st)
{
    if (sh->last < sh->n && sh->v[sh->last].client == st)
        return &sh->v[sh->last];
    for (size_t i = 0; i < sh->n; i++)
        if (sh->v[i].client == st) {
            sh->last = i;
            return &sh->v[i];
        }
    return NULL;
}

/* `later` waits for what was enqueued on `first` so far, through `ev`. */
static CUresult join(CUstream later, CUstream first, CUevent ev)
{
    CUresult rc = ((CUresult(*)(CUevent, CUstream))R(cuEventRecord))(ev, first);
    return rc != CUDA_SUCCESS
               ? rc
               : ((CUresult(*)(CUstream, CUevent, unsigned))R(cuStreamWaitEvent))(later, ev, 0);
}

/* Its green stream goes (after everything on it: the destroy does not wait, the GPU finishes
 * the work; route.c's idle tracking forgets it first). */
static void drop_green(struct shadow *x)
{
    if (x->green)
        om_idle_stream_destroy(x->green);
    x->green = NULL;
}

static void drop(struct om_share *sh, size_t i)
{
    struct shadow *x = &sh->v[i];

    drop_green(x);
    if (x->to_client)
        ((CUresult(*)(CUevent))R(cuEventDestroy_v2))(x->to_client);
    if (x->to_green)
        ((CUresult(*)(CUevent))R(cuEventDestroy_v2))(x->to_green);
    sh->v[i] = sh->v[--sh->n];
    sh->last = 0;
}

/* The session's shares: its current device's (i = -1), then the other devices' (s->shares[i],
 * swapped by om_session_set_device as its default streams are). */
static struct om_share *share_at(struct session *s, int i)
{
    return i < 0 ? s->share : s->shares[i];
}

#define EACH_SHARE(s, i, sh)                                                                       \
    for (int i = -1; i < (int)OM_MAX_DEVICES; i++)                                                 \
        if (((sh) = share_at((s), i)))

CUresult om_share_settle(struct session *s, CUstream st, bool enqueue)
{
    struct shadow *x = NULL;
    struct om_share *sh;
    CUresult rc = CUDA_SUCCESS;

    if (s->share && s->share->n) /* the common case: a stream of its current device */
        x = find(s->share, st);
    if (!x && s->nshares > 1) /* a stream of another device it used */
        EACH_SHARE(s, i, sh)
    if (i >= 0 && sh->n && (x = find(sh, st)))
        break;
    if (!x)
        return CUDA_SUCCESS;
    if (x->side == SIDE_LAUNCH)
        rc = join(st, x->green, x->to_client);
    if (rc == CUDA_SUCCESS)
        x->side = enqueue ? SIDE_OTHER : SIDE_SETTLED;
    return rc;
}

/* A new shadow of `st` in the session's lane (or its green stream replaced after a move). */
static CUresult shadow_green(struct session *s, struct shadow *x)
{
    struct om_share *sh = s->share;
    CUstream g = NULL;
    int prio = 0;
    CUresult rc;

    ((CUresult(*)(CUstream, int *))R(cuStreamGetPriority))(x->client, &prio);
    rc = ((CUresult(*)(CUstream *, CUgreenCtx, unsigned, int))R(cuGreenCtxStreamCreate))(
        &g, sh->lane->green, CU_STREAM_NON_BLOCKING, prio);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (om_idle_track(g) < 0) {
        ((CUresult(*)(CUstream))R(cuStreamDestroy_v2))(g);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (x->green) { /* moved: the new one waits for the old one's kernels */
        rc = join(g, x->green, x->to_client);
        drop_green(x);
    }
    x->green = g;
    x->gen = sh->gen;
    return rc;
}

static struct shadow *shadow_new(struct session *s, CUstream st, CUresult *rc)
{
    struct om_share *sh = s->share;
    CUresult (*ev)(CUevent *, unsigned) = R(cuEventCreate);
    struct shadow *x;

    if (sh->n >= om_budget.client_streams + 1u) { /* its streams and its default stream */
        *rc = CUDA_ERROR_OUT_OF_MEMORY;
        return NULL;
    }
    if (sh->n == sh->cap) {
        size_t cap = sh->cap ? sh->cap * 2 : 8;
        struct shadow *v = realloc(sh->v, cap * sizeof(*v));
        if (!v) {
            *rc = CUDA_ERROR_OUT_OF_MEMORY;
            return NULL;
        }
        sh->v = v;
        sh->cap = cap;
    }
    x = &sh->v[sh->n];
    memset(x, 0, sizeof(*x));
    x->client = st;
    x->side = SIDE_OTHER; /* whatever the stream holds comes first */
    if ((*rc = ev(&x->to_client, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS ||
        (*rc = ev(&x->to_green, CU_EVENT_DISABLE_TIMING)) != CUDA_SUCCESS ||
        (*rc = shadow_green(s, x)) != CUDA_SUCCESS) {
        sh->n++;
        drop(sh, sh->n - 1);
        return NULL;
    }
    sh->n++;
    return x;
}

/* Every stream waits for its shadow, and the shadows go (the client left its lane). */
static CUresult leave_lane(struct session *s)
{
    struct om_share *sh = s->share;
    CUresult rc = CUDA_SUCCESS, r;

    while (sh->n) {
        struct shadow *x = &sh->v[sh->n - 1];
        if (x->side == SIDE_LAUNCH &&
            (r = join(x->client, x->green, x->to_client)) != CUDA_SUCCESS && rc == CUDA_SUCCESS)
            rc = r;
        drop(sh, sh->n - 1);
    }
    lane_leave(sh->lane);
    sh->lane = NULL;
    om_share_sms_changed(s);
    return rc;
}

/* Why a session is placed where it is: logged once for the reserve and for partitions, which
 * come and go. */
enum why { WHY_OWN, WHY_RESERVE, WHY_PARTITION };

/* Places the session for a share: its own (which the main thread may have changed), the
 * priority reserve's (priority.c) or its current context's SM partition (session.c). */
static CUresult place(struct session *s, uint32_t pct, enum why why)
{
    struct om_share *sh = s->share;
    unsigned sms = om_share_sm_count(sh->dev, pct), total = om_share_sm_count(sh->dev, 0);
    struct lane *l = NULL;
    CUresult rc = CUDA_SUCCESS;
    char p[16];

    om_format_percentage(pct ? pct : 100000, p, sizeof(p));
    if (pct && sms && sms < total) {
        if (sh->lane && sh->lane->sms == sms) {
            sh->pct_milli = pct;
            om_share_sms_changed(s);
            return CUDA_SUCCESS;
        }
        l = lane_take(sh->dev, sms, &rc);
        if (!l) {
            if (!sh->logged_fail)
                om_err("client %d: cannot make a green context of %u SMs for its share %s "
                       "(CUresult %d): its kernels run on every SM",
                       (int)s->pid, sms, p, rc);
            sh->logged_fail = true;
            sh->pct_milli = pct; /* not retried at every launch */
            return leave_lane(s);
        }
    }
    if (!l) {
        rc = leave_lane(s);
    } else {
        lane_leave(sh->lane);
        sh->lane = l;
        sh->gen++;
    }
    sh->pct_milli = pct;
    om_share_sms_changed(s); /* om_share_client_sms reads the lane and pct_milli */
    if (why == WHY_OWN && (s->share_logged || pct))
        om_info("client %d: active thread percentage %s: kernels on %u of %u SMs", (int)s->pid, p,
                l ? l->real : total, total);
    else if (why == WHY_RESERVE && !sh->reserve_logged)
        om_info("client %d: below normal priority: kernels on %u of %u SMs while a normal-priority "
                "client is connected",
                (int)s->pid, l ? l->real : total, total);
    else if (why == WHY_PARTITION && !sh->partition_logged)
        om_info("client %d: a context of %u SMs (execution affinity): its kernels on %u of %u SMs",
                (int)s->pid, s->ctx_sms, l ? l->real : total, total);
    sh->reserve_logged |= why == WHY_RESERVE;
    sh->partition_logged |= why == WHY_PARTITION;
    s->share_logged |= why == WHY_OWN;
    return rc;
}

/* Places the session for its share as the main thread last set it (at its first use, and after
 * a change). */
static CUresult current(struct session *s)
{
    if (s->part.flags & OM_PART_VALID) /* -S: its partition, whatever else it asked for */
        return current_static(s);
    uint32_t pct = __atomic_load_n(&s->limits.active_thread_pct_milli, __ATOMIC_RELAXED);
    uint32_t cap = om_priority_cap_milli(s); /* below normal beside a busy normal client */
    uint32_t part = __atomic_load_n(&s->ctx_sms, __ATOMIC_RELAXED); /* its context's */
    struct om_share *sh = s->share;
    enum why why = WHY_OWN;

    if (cap && (!pct || cap < pct)) {
        pct = cap;
        why = WHY_RESERVE;
    }
    if (part) { /* as a share: the count's part of the device, rounded as a share is */
        unsigned total = om_share_sm_count(s->dev, 0);
        uint32_t milli = total ? (uint32_t)(((uint64_t)part * 100000 + total - 1) / total) : 0;
        if (milli && (!pct || milli < pct)) {
            pct = milli;
            why = WHY_PARTITION;
        }
    }
    if (pct >= 100000)
        pct = 0;
    if (!pct && !sh)
        return CUDA_SUCCESS; /* the common case: no share, never had one */
    if (!sh) {
        if (!(sh = s->share = calloc(1, sizeof(*sh))))
            return CUDA_ERROR_OUT_OF_MEMORY;
        sh->dev = s->dev; /* its lanes are this device's */
        s->nshares++;
    }
    return pct != sh->pct_milli ? place(s, pct, why) : CUDA_SUCCESS;
}

bool om_share_active(struct session *s)
{
    return (s->part.flags & OM_PART_VALID) ||
           __atomic_load_n(&s->limits.active_thread_pct_milli, __ATOMIC_RELAXED) ||
           om_priority_cap_milli(s) || __atomic_load_n(&s->ctx_sms, __ATOMIC_RELAXED) ||
           (s->share && s->share->lane);
}

CUstream om_share_launch(struct session *s, CUstream st, bool ordered, CUresult *rc)
{
    struct om_share *sh;
    struct shadow *x;

    if ((*rc = current(s)) != CUDA_SUCCESS)
        return NULL;
    sh = s->share;
    if (!sh || !sh->lane || om_stream_capturing(s, st) || om_green_stream_of(s, st))
        return st;
    if (!(x = find(sh, st)) && !(x = shadow_new(s, st, rc)))
        return NULL;
    if (x->gen != sh->gen && (*rc = shadow_green(s, x)) != CUDA_SUCCESS)
        return NULL;
    if ((x->side == SIDE_OTHER || ordered) &&
        (*rc = join(x->green, st, x->to_green)) != CUDA_SUCCESS)
        return NULL;
    x->side = SIDE_LAUNCH;
    return x->green;
}

/* What the client is answered for its SM count (om_share_client_sms) may have changed: its
 * share, partition, lane or device. Its shim asks again at its next query instead of keeping the
 * count it has (om_ring_header.limits_epoch). Any thread, after the change is stored. */
void om_share_sms_changed(struct session *s)
{
    struct om_ring_header *h = s->ring_map;

    if (h)
        __atomic_add_fetch(&h->limits_epoch, 1, __ATOMIC_RELEASE);
}

unsigned om_share_client_sms(struct session *s, int dev)
{
    uint32_t pct = __atomic_load_n(&s->limits.active_thread_pct_milli, __ATOMIC_RELAXED);

    if (s->part.flags & OM_PART_VALID)
        return static_sms(s, dev);

    if (s->share && s->share->lane && s->share->pct_milli == pct && s->share->dev == dev)
        return s->share->lane->real;
    return om_share_sm_count(dev, pct);
}

CUresult om_share_resource(struct session *s, int dev, struct om_CUdevResource *res)
{
    CUresult rc = current(s); /* placed now: the resource is its lane's */
    uint32_t pct = __atomic_load_n(&s->limits.active_thread_pct_milli, __ATOMIC_RELAXED);

    if (s->part.flags & OM_PART_VALID) { /* its static partition's, on its one device */
        if (rc == CUDA_SUCCESS && s->share && s->share->lane && s->share->dev == dev)
            *res = s->share->lane->res;
        return rc;
    }
    if (rc == CUDA_SUCCESS && s->share && s->share->lane && s->share->dev == dev &&
        s->share->pct_milli == pct) { /* its own share's lane, not the priority reserve's */
        *res = s->share->lane->res;
        return CUDA_SUCCESS;
    }
    return ((CUresult(*)(CUdevice, struct om_CUdevResource *, int))R(cuDeviceGetDevResource))(
        dev, res, CU_DEV_RESOURCE_TYPE_SM);
}

void om_share_stream_gone(struct session *s, CUstream st)
{
    struct om_share *sh;

    EACH_SHARE(s, d, sh)
    for (size_t i = 0; i < sh->n; i++)
        if (sh->v[i].client == st) {
            if (sh->v[i].side == SIDE_LAUNCH)
                om_wait_stream(sh->v[i].green);
            drop(sh, i);
            return;
        }
}

CUresult om_share_wait(struct session *s)
{
    CUresult rc = CUDA_SUCCESS, r;
    struct om_share *sh;

    EACH_SHARE(s, d, sh)
    for (size_t i = 0; i < sh->n; i++)
        if ((r = om_wait_stream(sh->v[i].green)) != CUDA_SUCCESS && rc == CUDA_SUCCESS)
            rc = r;
    return rc;
}

void om_share_release(struct session *s)
{
    struct om_share *sh;

    EACH_SHARE(s, d, sh)
    {
        while (sh->n)
            drop(sh, sh->n - 1);
        lane_leave(sh->lane);
        free(sh->v);
        free(sh);
        if (d < 0)
            s->share = NULL;
        else
            s->shares[d] = NULL;
    }
    s->nshares = 0;
}
