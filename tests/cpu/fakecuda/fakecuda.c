/* SPDX-License-Identifier: MIT */
/* The driver test double for the CPU tier: the entry points the control plane uses, no GPU. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "../../../src/common/fatbin.h"

/* Values from the driver API documentation. */
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_INVALID_DEVICE 101
#define CUDA_ERROR_NOT_FOUND_FAKE 500
#define CUDA_ERROR_OUT_OF_MEMORY_FAKE 2
/* Each device's memory: 16 GiB, or FAKECUDA_TOTAL_MEM bytes (a test that fills a device). Plain
 * allocations (cuMemAlloc) past it fail with OUT_OF_MEMORY, as the driver's do. */
static size_t fake_total_mem(void)
{
    static size_t total;
    const char *v;

    if (!total) {
        v = getenv("FAKECUDA_TOTAL_MEM");
        total = v && strtoull(v, NULL, 10) ? (size_t)strtoull(v, NULL, 10) : (16ull << 30);
    }
    return total;
}
#define FAKE_TOTAL_MEM fake_total_mem()

#define EXPORT __attribute__((visibility("default")))

static int initialized;

/* FAKECUDA_DEVICES: the machine's device count (default 1, at most 8). FAKECUDA_FAIL_INIT=1:
 * cuInit fails with CUDA_ERROR_NO_DEVICE. FAKECUDA_INIT_DELAY_MS: cuInit sleeps.
 * FAKECUDA_INIT_GATE: cuInit waits until that file exists (a test opens the gate when it has
 * seen what it wanted during the start, however slow the machine). */
static int machine_devices(void)
{
    const char *v = getenv("FAKECUDA_DEVICES");
    int n = v ? atoi(v) : 1;

    return n < 0 ? 0 : n > 8 ? 8 : n;
}

/* The machine's device p: its UUID (16 bytes, f0 f1 … ff for device 0, 00 01 … for 1, …). */
void fake_machine_uuid(int p, unsigned char uuid[16])
{
    for (int i = 0; i < 16; i++)
        uuid[i] = (unsigned char)(0xf0 + i + p * 0x10);
}

/* CUDA_VISIBLE_DEVICES, read as the driver reads it (docs/driver-facts.md): comma-separated
 * entries, each a device's ordinal on the machine or "GPU-" and leading hex digits of its UUID
 * (dashes as printed, any case) naming one device; spaces around an entry ignored; the first
 * entry that names no device ends the list; a device named twice makes cuInit fail with
 * CUDA_ERROR_INVALID_DEVICE. Unset: every device. The process's device d is the machine's
 * visible[d]: the double's answers that tell devices apart (name, UUID, bus id, compute
 * capability, LUID) are the machine device's, so a test sees which one a client got. */
static int visible[8], nvisible = -1, visible_twice;
static pthread_once_t visible_once = PTHREAD_ONCE_INIT;

static int uuid_entry(const char *e, size_t len)
{
    int found = -1;

    if (len <= 4 || strncasecmp(e, "GPU-", 4) != 0)
        return -1;
    for (int p = 0; p < machine_devices(); p++) {
        unsigned char u[16];
        char hex[40];
        size_t k = 0, i;
        fake_machine_uuid(p, u);
        snprintf(hex, sizeof(hex),
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
                 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
                 u[15]);
        for (i = 4; i < len && k < strlen(hex); i++, k++)
            if (tolower((unsigned char)e[i]) != hex[k])
                break;
        if (i < len)
            continue;
        if (found >= 0)
            return -1; /* a prefix of two devices' UUIDs names neither */
        found = p;
    }
    return found;
}

static void read_visible(void)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    int by_uuid = 0;

    nvisible = 0;
    if (!v) {
        for (int p = 0; p < machine_devices(); p++)
            visible[nvisible++] = p;
        return;
    }
    while (*v && nvisible < 8) {
        size_t len = strcspn(v, ",");
        const char *e = v, *end;
        int p = -1;
        while (len && isspace((unsigned char)*e))
            e++, len--;
        while (len && isspace((unsigned char)e[len - 1]))
            len--;
        if (len && isdigit((unsigned char)e[0])) {
            long n = strtol(e, (char **)&end, 10);
            if (end == e + len && n < machine_devices())
                p = (int)n;
        } else {
            p = uuid_entry(e, len);
        }
        if (p < 0 || (by_uuid && isdigit((unsigned char)e[0])))
            break; /* an ordinal after a UUID ends the list, as the driver's (580) */
        by_uuid |= !isdigit((unsigned char)e[0]);
        for (int i = 0; i < nvisible; i++)
            visible_twice |= visible[i] == p;
        visible[nvisible++] = p;
        v += strcspn(v, ",");
        v += *v == ',';
    }
}

/* How many devices the process sees. */
int fake_device_count(void)
{
    pthread_once(&visible_once, read_visible);
    return nvisible;
}

/* The machine's device behind the process's device dev, or -1 for no device. */
int fake_machine_device(int dev)
{
    return dev < 0 || dev >= fake_device_count() ? -1 : visible[dev];
}

static int device_count(void)
{
    return fake_device_count();
}

/* FAKECUDA_INIT_THREAD=1: the first cuInit starts a thread of the driver's own that never
 * touches the program's memory, as the real driver does in every process that calls it (one
 * named cuda<N> on driver 580, also in an openmps client, whose shim initialises the local
 * driver for the runtime's export tables). */
static void *driver_thread(void *arg)
{
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

static void start_driver_thread(void)
{
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;

    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, driver_thread, NULL) == 0)
        pthread_setname_np(t, "cuda-fake");
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

EXPORT int cuInit(unsigned flags)
{
    static pthread_once_t thread_once = PTHREAD_ONCE_INIT;

    const char *delay = getenv("FAKECUDA_INIT_DELAY_MS"), *gate = getenv("FAKECUDA_INIT_GATE");

    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (delay)
        usleep((useconds_t)atoi(delay) * 1000);
    while (gate && access(gate, F_OK) != 0)
        usleep(10000);
    if (getenv("FAKECUDA_FAIL_INIT"))
        return CUDA_ERROR_NO_DEVICE;
    if (fake_device_count() == 0 && getenv("CUDA_VISIBLE_DEVICES"))
        return CUDA_ERROR_NO_DEVICE;
    if (visible_twice)
        return CUDA_ERROR_INVALID_DEVICE;
    if (getenv("FAKECUDA_INIT_THREAD"))
        pthread_once(&thread_once, start_driver_thread);
    if (getenv("FAKECUDA_REPORT_INIT")) { /* which machine devices this process's driver sees */
        fprintf(stderr, "fakecuda cuInit: machine devices");
        for (int i = 0; i < fake_device_count(); i++)
            fprintf(stderr, "%s%d", i ? "," : " ", fake_machine_device(i));
        fprintf(stderr, "\n");
    }
    initialized = 1;
    return CUDA_SUCCESS;
}

EXPORT int cuDriverGetVersion(int *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetCount(int *n)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    *n = device_count();
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGet(int *dev, int ordinal)
{
    if (!initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = ordinal;
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetName(char *name, int len, int dev)
{
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "openmps fake GPU %d", fake_machine_device(dev));
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetUuid(unsigned char *uuid, int dev)
{
    if (!uuid)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    fake_machine_uuid(fake_machine_device(dev), uuid);
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetPCIBusId(char *bus, int len, int dev)
{
    if (!bus || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(bus, (size_t)len, "0000:%02x:00.0", 0x10 + fake_machine_device(dev));
    return CUDA_SUCCESS;
}

/* Each device's primary context, and the device of the calling thread's current one (streams
 * are made there: FAKECUDA_STREAM_LOG says which). */
static char contexts[8];
__thread int fake_current_device;

EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{

    if (!ctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *ctx = &contexts[dev];
    return CUDA_SUCCESS;
}

EXPORT int cuDevicePrimaryCtxRelease(int dev)
{
    return dev < 0 || dev >= device_count() ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}

/* Enough of cuGetProcAddress for the shim's passthrough tests: every name
 * this double exports, at any version. */
EXPORT int cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                               unsigned long long flags, int *status)
{
    Dl_info me;
    void *h = NULL, *p = NULL;

    (void)version;
    (void)flags;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    if (dladdr((void *)cuInit, &me) && me.dli_fname)
        h = dlopen(me.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (h) {
        Dl_info where;
        p = dlsym(h, symbol);
        /* Only this library's own functions, not the shim's same-named ones. */
        if (p && (!dladdr(p, &where) || where.dli_fbase != me.dli_fbase))
            p = NULL;
        dlclose(h);
    }
    *pfn = p;
    if (status)
        *status = p ? 0 : 1;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ the data plane's part
 * Device memory is host memory (a CUdeviceptr is the host address), streams and events are
 * tokens, and work is done at once. Module images are text: "fakecubin\n" then one line per
 * kernel, "name:size,size,...", the parameter sizes (a line that begins with '.' is a directive
 * and declares nothing: ".extern .func vprintf" marks an image that prints). Launches are appended
 * to the file named by FAKECUDA_LAUNCH_LOG (kernel, grid, block, argument bytes in hex); the kernel
 * fill_u32 (pointer, value, count) really fills, so tests can read the effect back.
 */
#include <stdint.h>

typedef unsigned long long dptr_t;

static size_t allocated;

/* Whether this process ever made a context current (the server does; a client in remote mode
 * never does): calls the real driver answers only in a context check it (fake_legacy.c). */
int fake_context_made;

EXPORT int cuCtxSetCurrent(void *ctx)
{
    char *c = ctx;

    if (ctx)
        fake_context_made = 1;
    if (c >= contexts && c < contexts + sizeof(contexts))
        fake_current_device = (int)(c - contexts);
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceTotalMem_v2(size_t *bytes, int dev)
{
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = FAKE_TOTAL_MEM;
    return CUDA_SUCCESS;
}

EXPORT int cuDeviceGetUuid_v2(unsigned char *uuid, int dev)
{
    return cuDeviceGetUuid(uuid, dev);
}

EXPORT int cuDeviceGetAttribute(int *v, int attrib, int dev)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    /* An H100's launch limits and SM count; other attributes echo their number. */
    switch (attrib) {
    case 1:
    case 2:
    case 3: *v = 1024; break;
    case 4: *v = 64; break;
    case 5: *v = 2147483647; break;
    case 6:
    case 7: *v = 65535; break;
    case 16: *v = 132; break;
    case 75: *v = 9; break; /* compute capability 9.0 */
    case 76: *v = 0; break;
    case 97: *v = 232448; break;
    default: *v = attrib; break;
    }
    return CUDA_SUCCESS;
}

/* "Device" addresses come from a region of their own, aligned like a GPU's, so a
 * client can map a managed-memory shadow at the same address. */
#define FAKE_VA_BASE 0x300000000000ull
#define FAKE_ALIGN 65536ull
static dptr_t next_va = FAKE_VA_BASE;
struct fake_alloc {
    dptr_t base;
    size_t size;
};
static struct fake_alloc fake_allocs[4096];
static int nfake_allocs;

/* The server calls from one thread per client, as it calls the real driver: allocations are
 * serialised like the driver's. */
static pthread_mutex_t alloc_lock = PTHREAD_MUTEX_INITIALIZER;

EXPORT int cuMemAlloc_v2(dptr_t *p, size_t bytes)
{
    size_t size = (bytes + FAKE_ALIGN - 1) / FAKE_ALIGN * FAKE_ALIGN;
    void *m;
    int rc = CUDA_SUCCESS;

    if (!p || !bytes)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes > FAKE_TOTAL_MEM) /* more than the device holds */
        return CUDA_ERROR_OUT_OF_MEMORY_FAKE;
    pthread_mutex_lock(&alloc_lock);
    if (next_va == FAKE_VA_BASE && getenv("FAKECUDA_LOW_VA")) /* below 4 GiB: v1 entry points */
        next_va = 0x40000000ull;
    m = nfake_allocs == 4096 ? MAP_FAILED
                             : mmap((void *)(uintptr_t)next_va, size, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (m == MAP_FAILED) {
        rc = 2;                                     /* CUDA_ERROR_OUT_OF_MEMORY */
    } else if (allocated + size > FAKE_TOTAL_MEM) { /* the device is full */
        munmap(m, size);
        rc = 2;
    } else {
        next_va += size + FAKE_ALIGN;
        allocated += size;
        fake_allocs[nfake_allocs++] = (struct fake_alloc){(dptr_t)(uintptr_t)m, size};
        *p = (dptr_t)(uintptr_t)m;
    }
    pthread_mutex_unlock(&alloc_lock);
    return rc;
}

int fake_external_free(unsigned long long p);  /* fake_external.c: a mapped buffer */
int fake_shareable_free(unsigned long long p); /* fake_shareable.c: an imported pointer */

/* For fake_shareable.c: the allocation that holds p (0), or -1. */
int fake_alloc_find(dptr_t p, dptr_t *base, size_t *size)
{
    int rc = -1;

    pthread_mutex_lock(&alloc_lock);
    for (int i = 0; i < nfake_allocs && rc < 0; i++) {
        if (p >= fake_allocs[i].base && p - fake_allocs[i].base < fake_allocs[i].size) {
            *base = fake_allocs[i].base;
            *size = fake_allocs[i].size;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&alloc_lock);
    return rc;
}

void fake_dma_flush(void *s); /* below: FAKECUDA_DMA_LATER's and KERNEL_LATER's work */
void fake_flush_all(void);

EXPORT int cuMemFree_v2(dptr_t p)
{
    fake_flush_all(); /* a synchronising free */
    int rc = CUDA_ERROR_INVALID_VALUE;

    if (fake_external_free(p) == 0 || fake_shareable_free(p) == 0)
        return CUDA_SUCCESS;

    pthread_mutex_lock(&alloc_lock);
    for (int i = 0; i < nfake_allocs; i++) {
        if (fake_allocs[i].base == p) {
            munmap((void *)(uintptr_t)p, fake_allocs[i].size);
            allocated -= fake_allocs[i].size;
            fake_allocs[i] = fake_allocs[--nfake_allocs];
            rc = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&alloc_lock);
    return rc;
}

EXPORT int cuMemGetInfo_v2(size_t *free_bytes, size_t *total)
{
    pthread_mutex_lock(&alloc_lock);
    *free_bytes = FAKE_TOTAL_MEM - allocated;
    pthread_mutex_unlock(&alloc_lock);
    *total = FAKE_TOTAL_MEM;
    return CUDA_SUCCESS;
}

/* Pinned host memory: what cuMemHostAlloc returned and cuMemHostRegister registered. With
 * FAKECUDA_PAGEABLE_LOG set, a copy to or from other host memory (which the real driver stages
 * through buffers of its own, holding a lock of the context meanwhile: the server's replybuf.c)
 * appends "pageable ENTRY BYTES" to that file. */
static struct {
    uintptr_t base;
    size_t len;
} pinned[4096];
static int npinned;
static pthread_mutex_t pinned_lock = PTHREAD_MUTEX_INITIALIZER;

/* Never fails: past the table's end a region is pinned but not remembered (its copies would
 * count as pageable; no test comes near). */
static int pin(void *p, size_t n)
{
    int i;

    pthread_mutex_lock(&pinned_lock);
    for (i = 0; i < npinned && pinned[i].base != (uintptr_t)p; i++)
        ;
    if (i < (int)(sizeof(pinned) / sizeof(pinned[0]))) {
        pinned[i].base = (uintptr_t)p;
        pinned[i].len = n;
        if (i == npinned)
            npinned++;
    }
    pthread_mutex_unlock(&pinned_lock);
    return CUDA_SUCCESS;
}

static int unpin(void *p)
{
    int rc = CUDA_ERROR_INVALID_VALUE;

    pthread_mutex_lock(&pinned_lock);
    for (int i = 0; i < npinned; i++)
        if (pinned[i].base == (uintptr_t)p) {
            pinned[i] = pinned[--npinned];
            rc = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&pinned_lock);
    return rc;
}

static void note_host_side(const char *entry, const void *p, size_t n)
{
    const char *log = getenv("FAKECUDA_PAGEABLE_LOG");
    int found = 0;
    FILE *f;

    if (!log || !n)
        return;
    pthread_mutex_lock(&pinned_lock);
    for (int i = 0; i < npinned && !found; i++)
        found =
            (uintptr_t)p >= pinned[i].base && (uintptr_t)p - pinned[i].base + n <= pinned[i].len;
    pthread_mutex_unlock(&pinned_lock);
    if (!found && (f = fopen(log, "a")) != NULL) {
        fprintf(f, "pageable %s %zu\n", entry, n);
        fclose(f);
    }
}

/* FAKECUDA_FAIL_HOST_ALLOC=1: no pinned memory to be had. */
EXPORT int cuMemHostAlloc(void **pp, size_t n, unsigned flags)
{
    (void)flags;
    if (!pp || !n)
        return CUDA_ERROR_INVALID_VALUE;
    if (getenv("FAKECUDA_FAIL_HOST_ALLOC"))
        return CUDA_ERROR_OUT_OF_MEMORY_FAKE;
    if (!(*pp = malloc(n)))
        return CUDA_ERROR_OUT_OF_MEMORY_FAKE;
    return pin(*pp, n);
}

EXPORT int cuMemFreeHost(void *p)
{
    fake_flush_all(); /* a synchronising free */
    int rc = unpin(p);

    if (rc == CUDA_SUCCESS)
        free(p);
    return rc;
}

int fake_capture_copy(void *s, void *dst, const void *src, size_t bytes); /* fake_graphs.c */

/*
 * FAKECUDA_DMA_LATER: a host-to-device copy on a stream reads its source later, as a DMA does;
 * FAKECUDA_KERNEL_LATER: a kernel that writes memory (fill_u32) writes it later, as a kernel on
 * a busy GPU does. Either is done when its stream is asked about or waited for, an event
 * recorded on it after the work is waited for, asked about or synchronised with, work is
 * enqueued on it (copies, sets, launches, host functions, memory operations, a free; but a
 * late host-to-device copy, which waits behind it, so that many can be pending), the
 * context is synchronised, or memory is freed (earlier than the driver would is allowed; later is
 * not); a graph's kernels too (its other nodes do their stream's late work first). Streams
 * are ordered as the driver orders them: the legacy stream (NULL, CU_STREAM_LEGACY) with the
 * blocking streams and the per-thread stream (its work is done before theirs and theirs before
 * its), a non-blocking stream with none. So a caller that reuses a copy's source before it knows
 * the copy done sends the device the reused bytes, and one that reads a kernel's result through
 * another stream without ordering the two (an event, a synchronize) reads what was there before the
 * kernel.
 */
struct later {
    dptr_t dst;
    const void *src; /* a copy's source; NULL: a fill of n 32-bit words with v */
    size_t n;
    uint32_t v;
    void *s;
};
static pthread_mutex_t dma_lock = PTHREAD_MUTEX_INITIALIZER;
static struct later dma_pending[64];
static int dma_count;

static bool is_blocking(void *s); /* below: a stream made without CU_STREAM_NON_BLOCKING */

/* FAKECUDA_DMA_LATER, FAKECUDA_KERNEL_LATER: on when set to anything but "" or "0" (a test
 * turns one off that `make test-loaded` sets for the whole IPC tier). */
static bool later_on(const char *name)
{
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0");
}

static void *legacy(void *s)
{
    return s == (void *)1 ? NULL : s; /* CU_STREAM_LEGACY is the NULL stream */
}

/* Whether work pending on stream p must be done before work on s begins. */
static bool ordered_before(void *p, void *s)
{
    if (p == s)
        return true;
    if (!s) /* the legacy stream waits for the blocking streams and the per-thread one */
        return p == (void *)2 || is_blocking(p);
    return !p && (s == (void *)2 || is_blocking(s)); /* and they wait for it */
}

static void flush(void *s, bool all)
{
    if (!__atomic_load_n(&dma_count, __ATOMIC_ACQUIRE))
        return;
    s = legacy(s);
    pthread_mutex_lock(&dma_lock);
    for (int i = 0; i < dma_count;) {
        struct later *l = &dma_pending[i];
        if (!all && !ordered_before(l->s, s)) {
            i++;
            continue;
        }
        if (l->src)
            memcpy((void *)(uintptr_t)l->dst, l->src, l->n);
        else
            for (size_t k = 0; k < l->n; k++)
                ((uint32_t *)(uintptr_t)l->dst)[k] = l->v;
        memmove(l, l + 1, (size_t)(dma_count - i - 1) * sizeof(*l));
        __atomic_store_n(&dma_count, dma_count - 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&dma_lock);
}

/* The pending work that stream s's next work comes after is done now: before anything else on
 * s reads or writes device memory or is asked about (fake_arrays.c, fake_graphs.c,
 * fake_memory.c and fake_modules.c call it too). */
void fake_dma_flush(void *s)
{
    flush(s, false);
}

/* Every stream's pending work is done now: the synchronising calls (a context synchronize, a
 * free). */
void fake_flush_all(void)
{
    flush(NULL, true);
}

/* Work done later on stream s (its stream's earlier pending work is done first). */
static void pend(struct later l)
{
    pthread_mutex_lock(&dma_lock);
    while (dma_count == (int)(sizeof(dma_pending) / sizeof(dma_pending[0]))) {
        pthread_mutex_unlock(&dma_lock); /* full: the oldest are done now */
        fake_flush_all();
        pthread_mutex_lock(&dma_lock);
    }
    l.s = legacy(l.s);
    dma_pending[dma_count] = l;
    __atomic_store_n(&dma_count, dma_count + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&dma_lock);
}

static void stream_runs(void *s, uint64_t us);

EXPORT int cuMemcpyHtoDAsync_v2(dptr_t dst, const void *src, size_t n, void *s)
{
    const char *dma_ms = getenv("FAKECUDA_DMA_MS");

    if (!n) /* nothing to copy: the driver looks at no address */
        return CUDA_SUCCESS;
    note_host_side("cuMemcpyHtoDAsync_v2", src, n);
    if (fake_capture_copy(s, (void *)(uintptr_t)dst, src, n))
        return CUDA_SUCCESS;
    if (dma_ms && s) /* FAKECUDA_DMA_MS: the copy keeps its stream busy that long, as a kernel */
        stream_runs(s, (uint64_t)atoi(dma_ms) * 1000);
    if (later_on("FAKECUDA_DMA_LATER") && s) {
        /* Behind its stream's pending work, which stays pending (done in order later): so
         * several copies of a stream can read their sources late, and a caller that reuses any
         * of their buffers too early is seen, not only the last one's. */
        pend((struct later){.dst = dst, .src = src, .n = n, .s = s});
        return CUDA_SUCCESS;
    }
    fake_dma_flush(s); /* in its stream's order */
    memcpy((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

EXPORT int cuMemcpyDtoHAsync_v2(void *dst, dptr_t src, size_t n, void *s)
{
    if (!n)
        return CUDA_SUCCESS;
    fake_dma_flush(s);
    note_host_side("cuMemcpyDtoHAsync_v2", dst, n);
    if (fake_capture_copy(s, dst, (const void *)(uintptr_t)src, n))
        return CUDA_SUCCESS;
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

EXPORT int cuMemcpyDtoDAsync_v2(dptr_t dst, dptr_t src, size_t n, void *s)
{
    fake_dma_flush(s);
    if (n)
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

EXPORT int cuMemsetD8Async(dptr_t d, unsigned char v, size_t n, void *s)
{
    fake_dma_flush(s);
    if (n)
        memset((void *)(uintptr_t)d, v, n);
    return CUDA_SUCCESS;
}

EXPORT int cuMemsetD16Async(dptr_t d, unsigned short v, size_t n, void *s)
{
    fake_dma_flush(s);
    if (d % 2) /* the driver's rule: aligned to the element */
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++)
        ((unsigned short *)(uintptr_t)d)[i] = v;
    return CUDA_SUCCESS;
}

EXPORT int cuMemsetD32Async(dptr_t d, unsigned v, size_t n, void *s)
{
    fake_dma_flush(s);
    if (d % 4)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++)
        ((unsigned *)(uintptr_t)d)[i] = v;
    return CUDA_SUCCESS;
}

static char tokens[16384]; /* streams and events, never reused */
static int next_token;

static void *new_token(void)
{
    int t = __atomic_fetch_add(&next_token, 1, __ATOMIC_RELAXED); /* one thread per client */
    return t < (int)sizeof(tokens) ? &tokens[t] : NULL;
}

/* Each stream's priority, as created (the driver's range: 0 least, -5 greatest), and
 * FAKECUDA_STREAM_LOG: a line per stream made, "stream TOKEN priority P device D" (the device of
 * the calling thread's current context). */
static signed char token_prio[sizeof(tokens)];
/* The device of each stream and event token (the calling thread's at creation): an event is
 * recorded on a stream of its own device only, as the driver requires. */
static unsigned char token_dev[sizeof(tokens)];
extern __thread int fake_current_device;
/* Each stream's flags as created: 1 for CU_STREAM_NON_BLOCKING (FAKECUDA_KERNEL_LATER's order). */
static unsigned char token_nonblocking[sizeof(tokens)];

static bool is_blocking(void *s)
{
    char *c = s;
    return c >= tokens && c < tokens + sizeof(tokens) && !token_nonblocking[c - tokens];
}

static int token_device(void *t)
{
    char *c = t;
    return c >= tokens && c < tokens + sizeof(tokens) ? token_dev[c - tokens] : -1;
}

EXPORT int cuStreamCreateWithPriority(void **s, unsigned flags, int prio)
{
    const char *log = getenv("FAKECUDA_STREAM_LOG");

    *s = new_token();
    if (!*s)
        return 2;
    token_prio[(char *)*s - tokens] = (signed char)(prio > 0 ? 0 : prio < -5 ? -5 : prio);
    token_dev[(char *)*s - tokens] = (unsigned char)fake_current_device;
    token_nonblocking[(char *)*s - tokens] = (unsigned char)(flags & 1);
    if (log) {
        FILE *f = fopen(log, "a");
        if (f) {
            fprintf(f, "stream %llu priority %d device %d\n", (unsigned long long)(uintptr_t)*s,
                    prio, fake_current_device);
            fclose(f);
        }
    }
    return CUDA_SUCCESS;
}

EXPORT int cuCtxGetStreamPriorityRange(int *least, int *greatest)
{
    if (least)
        *least = 0;
    if (greatest)
        *greatest = -5;
    return CUDA_SUCCESS;
}

EXPORT int cuStreamCreate(void **s, unsigned flags)
{
    return cuStreamCreateWithPriority(s, flags, 0);
}

#define TRIVIAL(name, ...)                                                                         \
    EXPORT int name(__VA_ARGS__)                                                                   \
    {                                                                                              \
        return CUDA_SUCCESS;                                                                       \
    }
TRIVIAL(cuStreamDestroy_v2, void *s)
TRIVIAL(cuDevicePrimaryCtxSetFlags_v2, int dev, unsigned flags)

/* FAKECUDA_KERNEL_MS: each launch keeps its stream busy that long after the stream's earlier
 * work (cuStreamQuery answers CUDA_ERROR_NOT_READY meanwhile, cuStreamSynchronize sleeps), so
 * the server's scheduler has running kernels to wait for. A kernel named "sleep" runs as long as
 * its first argument (u32) says, in microseconds, whatever FAKECUDA_KERNEL_MS says: kernels of
 * known duration (openmps stats' tests). FAKECUDA_TIME_LOG: a file that gets "<kernel name or
 * record> <milliseconds, monotonic>" for every launch and event record. Times are kept in
 * microseconds. */
static uint64_t busy_until_us[sizeof(tokens)]; /* per stream token (__atomic) */

static uint64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint64_t mono_ms(void)
{
    return mono_us() / 1000;
}

static uint64_t *busy_slot(void *s)
{
    char *c = s;
    return c >= tokens && c < tokens + sizeof(tokens) ? &busy_until_us[c - tokens] : NULL;
}

void fake_late_writes_due(void *s); /* fake_modules.c: memory writes behind kernels */

/* When stream s's work ends, in mono_us() time (0: a stream that runs nothing; fake_modules.c's
 * memory writes come after it, as the GPU's do). */
uint64_t fake_stream_busy_until(void *s)
{
    uint64_t *b = busy_slot(s);
    return b ? __atomic_load_n(b, __ATOMIC_RELAXED) : 0;
}

static void time_line(const char *what)
{
    const char *log = getenv("FAKECUDA_TIME_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;

    if (f) {
        fprintf(f, "%s %llu\n", what, (unsigned long long)mono_ms());
        fclose(f);
    }
}

/* The stream runs a kernel of `us` microseconds after its earlier work (0: FAKECUDA_KERNEL_MS's).
 */
static void stream_runs(void *s, uint64_t us)
{
    const char *ms = getenv("FAKECUDA_KERNEL_MS");
    uint64_t *b = busy_slot(s), now = mono_us(), until;

    if (!us && ms)
        us = (uint64_t)atoi(ms) * 1000;
    if (!us || !b)
        return;
    until = __atomic_load_n(b, __ATOMIC_RELAXED);
    __atomic_store_n(b, (until > now ? until : now) + us, __ATOMIC_RELAXED);
}

/* Device-side printf, as the driver prints it (tests/gpu/probe): the kernel `printf` leaves a
 * line in the context's buffer; the next synchronising call prints it with vfprintf(stdout)
 * and fflush(stdout), in the thread that made that call. */
static char printf_pending[4096];
static size_t printf_len;
static pthread_mutex_t printf_lock = PTHREAD_MUTEX_INITIALIZER;
/* A kernel named "assert" fails a device-side assert: its message waits in the same buffer, and
 * the next synchronising call prints it on stderr (the driver's stream for it, with its format)
 * and answers CUDA_ERROR_ASSERT, as every synchronising call after it does (the context is
 * unusable). */
static char assert_pending[512];
static int asserted; /* under printf_lock */
#define CUDA_ERROR_ASSERT 710

static void device_printf(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
}

static void device_assert_message(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* Prints what the kernels left (their printf lines only where `lines`: a query does not print
 * them, as the driver's documented flush points are synchronizing calls, launches, blocking
 * copies and module loads; an assert's message it does, which the double has always done and
 * no measurement has said otherwise); CUDA_ERROR_ASSERT once one of them asserted. */
static int flush_printf_lines(bool lines)
{
    int rc;

    pthread_mutex_lock(&printf_lock);
    if (printf_len && lines) {
        device_printf("%.*s", (int)printf_len, printf_pending);
        fflush(stdout);
        printf_len = 0;
    }
    if (assert_pending[0]) {
        device_assert_message("%s", assert_pending);
        fflush(stderr);
        assert_pending[0] = 0;
    }
    rc = asserted ? CUDA_ERROR_ASSERT : CUDA_SUCCESS;
    pthread_mutex_unlock(&printf_lock);
    return rc;
}

static int flush_printf(void)
{
    return flush_printf_lines(true);
}

int fake_flush_printf(void) /* fake_graphs.c's graph launches too */
{
    return flush_printf();
}
/* fake_graphs.c: stream capture's hooks. */
int fake_capture_kernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, void *s, const void *args, size_t len);
int fake_capture_query(void *s);
void fake_capture_record(void *e, void *s);
int fake_capture_wait(void *s, void *e);

EXPORT int cuStreamQuery(void *s)
{
    fake_dma_flush(s); /* NULL, the legacy stream: the blocking streams' too */
    if (flush_printf_lines(false) != CUDA_SUCCESS)
        return CUDA_ERROR_ASSERT;
    uint64_t *b = busy_slot(s);
    int captured = fake_capture_query(s);

    if (captured)
        return captured;
    if (b && __atomic_load_n(b, __ATOMIC_RELAXED) > mono_us())
        return 600;
    fake_late_writes_due(s); /* done: its memory writes too */
    return CUDA_SUCCESS;
}

EXPORT int cuStreamSynchronize(void *s)
{
    uint64_t *b = busy_slot(s), now;

    fake_dma_flush(s);
    if (flush_printf() != CUDA_SUCCESS)
        return CUDA_ERROR_ASSERT;
    while (b && __atomic_load_n(b, __ATOMIC_RELAXED) > (now = mono_us()))
        usleep((useconds_t)(__atomic_load_n(b, __ATOMIC_RELAXED) - now));
    fake_late_writes_due(s);
    return CUDA_SUCCESS;
}
static void log_line(const char *what)
{
    const char *log = getenv("FAKECUDA_LAUNCH_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;

    if (f) {
        fprintf(f, "%s\n", what);
        fclose(f);
    }
}

/* An event is done when the work its stream had at the record is (FAKECUDA_KERNEL_MS, "sleep"
 * kernels): then, in microseconds of the monotonic clock, its timestamp (cuEventElapsedTime). */
static uint64_t event_ready_us[sizeof(tokens)];      /* per event token (__atomic) */
static unsigned char event_recorded[sizeof(tokens)]; /* (__atomic) */

/* The stream each event was last recorded on (CU_STREAM_LEGACY for NULL; NULL: never). The late
 * work (FAKECUDA_KERNEL_LATER, _DMA_LATER) behind a record is done when the event is waited for,
 * asked about or synchronised with, not at the record: a stream that reads another's result
 * after a record without the wait reads what was there before. */
static void *event_stream[sizeof(tokens)];

static void event_flush(void *e)
{
    char *c = e;

    if (c >= tokens && c < tokens + sizeof(tokens) && event_stream[c - tokens])
        fake_dma_flush(event_stream[c - tokens]);
}

/* FAKECUDA_WAITS_PROPAGATE=1: a stream that waits for an event stays busy until the event is
 * done (what the device does; off by default, the scheduler's tests time streams alone). */
EXPORT int cuStreamWaitEvent(void *s, void *e, unsigned f)
{
    uint64_t *busy = busy_slot(s), *ready = busy_slot(e), until;

    event_flush(e);

    (void)f;
    log_line("wait");
    if (getenv("FAKECUDA_WAITS_PROPAGATE") && busy && ready) {
        ready = &event_ready_us[ready - busy_until_us];
        until = __atomic_load_n(ready, __ATOMIC_RELAXED);
        if (until > __atomic_load_n(busy, __ATOMIC_RELAXED))
            __atomic_store_n(busy, until, __ATOMIC_RELAXED);
    }
    return fake_capture_wait(s, e);
}
EXPORT int cuCtxSynchronize(void)
{
    fake_flush_all();
    fake_late_writes_due(NULL); /* due ones: the context's kernels have no busy time here */
    return flush_printf();
}

/* Destroyed events stay destroyed: a later record of one fails (tokens are never reused). */
static unsigned char event_gone[sizeof(tokens)];

static int gone(void *e)
{
    char *c = e;
    return c >= tokens && c < tokens + sizeof(tokens) &&
           __atomic_load_n(&event_gone[c - tokens], __ATOMIC_RELAXED);
}

EXPORT int cuEventDestroy_v2(void *e)
{
    char *c = e;

    if (gone(e))
        return 400; /* CUDA_ERROR_INVALID_HANDLE */
    if (c >= tokens && c < tokens + sizeof(tokens))
        __atomic_store_n(&event_gone[c - tokens], 1, __ATOMIC_RELAXED);
    return CUDA_SUCCESS;
}

EXPORT int cuEventRecord(void *e, void *s)
{
    uint64_t *ready = busy_slot(e), *busy = busy_slot(s);

    if (gone(e))
        return 400;
    if (s && token_device(e) >= 0 && token_device(s) >= 0 && token_device(e) != token_device(s))
        return 400; /* CUDA_ERROR_INVALID_HANDLE: an event of another device's context */
    log_line("record");
    time_line("record");
    fake_capture_record(e, s);
    if ((char *)e >= tokens && (char *)e < tokens + sizeof(tokens))
        event_stream[(char *)e - tokens] = s ? s : (void *)1; /* its late work: event_flush */
    if (ready) {
        uint64_t now = mono_us(), until = busy ? __atomic_load_n(busy, __ATOMIC_RELAXED) : 0;
        __atomic_store_n(&event_recorded[ready - busy_until_us], 1, __ATOMIC_RELAXED);
        ready = &event_ready_us[ready - busy_until_us];
        __atomic_store_n(ready, until > now ? until : now, __ATOMIC_RELAXED);
    }
    return CUDA_SUCCESS;
}

EXPORT int cuEventRecordWithFlags(void *e, void *s, unsigned flags)
{
    char line[64];

    snprintf(line, sizeof(line), "record flags %u", flags);
    log_line(line);
    return cuEventRecord(e, s);
}

EXPORT int cuEventQuery(void *e)
{
    uint64_t *b = busy_slot(e);

    event_flush(e);
    b = b ? &event_ready_us[b - busy_until_us] : NULL;
    return b && __atomic_load_n(b, __ATOMIC_RELAXED) > mono_us() ? 600 : CUDA_SUCCESS;
}

EXPORT int cuEventSynchronize(void *e)
{
    while (cuEventQuery(e) == 600)
        usleep(1000);
    return flush_printf(); /* a synchronizing call: the driver prints kernel output */
}

EXPORT int cuEventCreate(void **e, unsigned flags)
{
    (void)flags;
    *e = new_token();
    if (*e)
        token_dev[(char *)*e - tokens] = (unsigned char)fake_current_device;
    return *e ? CUDA_SUCCESS : 2;
}

/* The time between the two events' timestamps (when the work before each was done), as the
 * driver answers: CUDA_ERROR_NOT_READY (600) while either is pending, INVALID_HANDLE (400) for
 * an event never recorded. Events of another double's making (graph nodes) answer 1.5 ms. */
EXPORT int cuEventElapsedTime_v2(float *ms, void *a, void *b)
{
    uint64_t *ra = busy_slot(a), *rb = busy_slot(b);

    if (!ra || !rb) {
        *ms = a == b ? 0.0f : 1.5f;
        return CUDA_SUCCESS;
    }
    if (!__atomic_load_n(&event_recorded[ra - busy_until_us], __ATOMIC_RELAXED) ||
        !__atomic_load_n(&event_recorded[rb - busy_until_us], __ATOMIC_RELAXED))
        return 400;
    if (cuEventQuery(a) == 600 || cuEventQuery(b) == 600)
        return 600;
    ra = &event_ready_us[ra - busy_until_us];
    rb = &event_ready_us[rb - busy_until_us];
    *ms = (float)((double)__atomic_load_n(rb, __ATOMIC_RELAXED) -
                  (double)__atomic_load_n(ra, __ATOMIC_RELAXED)) /
          1000.0f;
    return CUDA_SUCCESS;
}

/* Libraries: a copy of the image; kernels: (library, line) pairs. */
struct fake_kernel {
    char name[64];
    int nparams;
    size_t sizes[16];
    void *lib; /* the library it came with (fake_modules.c's queries) */
};
static struct fake_kernel kernels[256];
static int nkernels;
static int libraries_loaded;

/* The JIT options of a load, as the driver answers them: the info log (within its size) says
 * what was loaded, the error log is empty, each log's size slot gets the bytes it holds with
 * the NUL, the wall time 1.5 ms. */
static void jit_logs(unsigned n, const int *o, void **v, int failed, const char *fmt, size_t bytes)
{
    for (unsigned i = 0; o && v && i < n; i++) {
        size_t cap = 0;
        if ((o[i] != 3 && o[i] != 5) || !v[i])
            continue;
        for (unsigned j = 0; j < n; j++)
            if (o[j] == o[i] + 1)
                cap = (size_t)(uintptr_t)v[j];
        if (!cap)
            continue;
        if (o[i] == (failed ? 5 : 3)) /* a failure's says so in the error log */
            snprintf(v[i], cap, fmt, bytes), strncat(v[i], "\n", cap - strlen(v[i]) - 1);
        else
            ((char *)v[i])[0] = '\0';
        for (unsigned j = 0; j < n; j++)
            if (o[j] == o[i] + 1)
                v[j] = (void *)(uintptr_t)(strlen(v[i]) + 1);
    }
    for (unsigned i = 0; o && v && i < n; i++)
        if (o[i] == 2) {
            float ms = 1.5f;
            v[i] = NULL;
            memcpy(&v[i], &ms, sizeof(ms));
        }
}

static int load_text(void **lib, const void *code, const int *jo, void **jv, unsigned nj);

/* A fatbin (src/common/fatbin.c reads it, as the server does): the text of its first PTX entry,
 * decompressed where it is stored compressed (malloc'd), or NULL. */
static char *unpack_fatbin(const void *code)
{
    uint32_t magic;
    uint16_t head;
    uint64_t body;
    struct om_fatbin_entry e[8];
    int n;

    memcpy(&magic, code, 4);
    if (magic != 0xBA55ED50u) /* a fatbin container's */
        return NULL;
    memcpy(&head, (const char *)code + 6, 2);
    memcpy(&body, (const char *)code + 8, 8);
    if (body > (64u << 20)) /* the server let no such image through (om_image_extent) */
        return NULL;
    n = om_fatbin_entries(code, (size_t)head + body, e, 8);
    for (int i = 0; i < n && i < 8; i++) {
        char *text = e[i].kind == 1 && e[i].size < (1u << 20) ? calloc(1, e[i].size + 1) : NULL;
        if (text && om_fatbin_inflate(&e[i], (uint8_t *)text, e[i].size) == 0)
            return text;
        free(text);
    }
    return NULL;
}

EXPORT int cuLibraryLoadData(void **lib, const void *code, const int *jo, void **jv, unsigned nj,
                             void *lo, void **lv, unsigned nl)
{
    char *text = code ? unpack_fatbin(code) : NULL;
    int rc;

    (void)lo, (void)lv, (void)nl;
    rc = load_text(lib, text ? text : code, jo, jv, nj);
    free(text);
    return rc;
}

static int load_text(void **lib, const void *code, const int *jo, void **jv, unsigned nj)
{
    const char *p = code;
    int first = nkernels;

    /* "fakebadptx\n...": a PTX that does not compile. As driver 580's (measured on two H200s),
     * the library load succeeds with the compiler's error log written (its wording a little off
     * the module load's), and the library has no kernel; cuModuleLoadDataEx answers 218. */
    if (strncmp(p, "fakebadptx\n", 11) == 0) {
        jit_logs(nj, jo, jv, 1, "fake ptxas: aborted due to error (%zu bytes)", strlen(code) + 1);
        *lib = new_token();
        libraries_loaded++;
        return CUDA_SUCCESS;
    }
    if (strncmp(p, "fakecubin\n", 10) != 0) {
        jit_logs(nj, jo, jv, 1, "fake jit: not an image (%zu bytes)", strnlen(code, 64));
        return 200; /* CUDA_ERROR_INVALID_IMAGE */
    }
    jit_logs(nj, jo, jv, 0, "fake jit: loaded an image of %zu bytes", strlen(code) + 1);
    for (p += 10; *p && nkernels < 256;) {
        struct fake_kernel *k = &kernels[nkernels];
        const char *colon = strchr(p, ':'), *end = strchr(p, '\n');
        if (*p == '.' && end) { /* a directive, as PTX's ".extern .func vprintf": no kernel */
            p = end + 1;
            continue;
        }
        if (!colon || !end || colon > end || colon - p >= 63)
            return 200;
        memcpy(k->name, p, (size_t)(colon - p));
        k->name[colon - p] = '\0';
        k->nparams = 0;
        for (const char *q = colon + 1; q < end && k->nparams < 16;) {
            k->sizes[k->nparams] = strtoul(q, (char **)&q, 10);
            /* A parameter has a size (cuKernelGetParamInfo aligns by it). */
            if (k->sizes[k->nparams] == 0 || k->sizes[k->nparams++] > 4096)
                return 200;
            if (*q == ',')
                q++;
        }
        nkernels++;
        p = end + 1;
    }
    libraries_loaded++;
    *lib = new_token();
    for (int i = first; i < nkernels; i++)
        kernels[i].lib = *lib;
    return CUDA_SUCCESS;
}

/* A module load: a library load (the module its token), but a PTX that does not compile fails
 * with 218 (CUDA_ERROR_INVALID_PTX) and its error log. FAKECUDA_MODULE_LOADS=PATH: a line per
 * call ("module load RC", "module unload", "library unload"), to see what the server did. */
static void note_module_call(const char *what, int rc)
{
    const char *path = getenv("FAKECUDA_MODULE_LOADS");
    FILE *f = path ? fopen(path, "a") : NULL;

    if (f) {
        fprintf(f, "%s %d\n", what, rc);
        fclose(f);
    }
}

EXPORT int cuModuleLoadDataEx(void **mod, const void *code, unsigned nj, const int *jo, void **jv)
{
    int rc;

    if (strncmp(code, "fakebadptx\n", 11) == 0) {
        jit_logs(nj, jo, jv, 1, "fake ptxas: aborted due to errors (%zu bytes)", strlen(code) + 1);
        rc = 218;
    } else {
        rc = cuLibraryLoadData(mod, code, jo, jv, nj, NULL, NULL, 0);
    }
    note_module_call("module load", rc);
    return rc;
}

EXPORT int cuModuleUnload(void *mod)
{
    (void)mod;
    note_module_call("module unload", 0);
    return CUDA_SUCCESS;
}

EXPORT int cuLibraryUnload(void *lib)
{
    (void)lib;
    note_module_call("library unload", 0);
    return CUDA_SUCCESS;
}

/* For fake_modules.c: the kernels of a library (up to max of them into out; how many it has),
 * and a kernel's name and library (NULL: not a kernel of this double). */
int fake_library_kernels(void *lib, void **out, int max)
{
    int n = 0;

    for (int i = 0; i < nkernels; i++)
        if (kernels[i].lib == lib) {
            if (out && n < max)
                out[n] = &kernels[i];
            n++;
        }
    return n;
}

const char *fake_kernel_name(void *k, void **lib)
{
    struct fake_kernel *f = k;

    if (f < kernels || f >= kernels + nkernels)
        return NULL;
    if (lib)
        *lib = f->lib;
    return f->name;
}

EXPORT int cuLibraryGetKernel(void **k, void *lib, const char *name)
{
    (void)lib;
    for (int i = nkernels - 1; i >= 0; i--) {
        if (strcmp(kernels[i].name, name) == 0) {
            *k = &kernels[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND_FAKE;
}

EXPORT int cuKernelGetParamInfo(void *kernel, size_t index, size_t *offset, size_t *size)
{
    struct fake_kernel *k = kernel;
    size_t off = 0;

    if ((int)index >= k->nparams)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0;; i++) {
        off = (off + k->sizes[i] - 1) / k->sizes[i] * k->sizes[i]; /* natural alignment */
        if (i == index)
            break;
        off += k->sizes[i];
    }
    *offset = off;
    *size = k->sizes[index];
    return CUDA_SUCCESS;
}

/* Attributes set by cuKernelSetAttribute (a few kernels' worth); the others read attrib + 1000. */
/* A kernel's attributes are per device, as the driver keeps them. */
static struct {
    void *k;
    int attrib, v, dev;
} kernel_attrs[64];
static int nkernel_attrs;
static pthread_mutex_t kernel_attrs_lock = PTHREAD_MUTEX_INITIALIZER;

EXPORT int cuKernelGetAttribute(int *v, int attrib, void *k, int dev)
{
    const char *log = getenv("FAKECUDA_LEGACY_LOG"); /* each question, for the tests to count */
    FILE *f = log ? fopen(log, "a") : NULL;

    if (f) {
        fprintf(f, "cuKernelGetAttribute %d %x %llx %d\n", (int)getpid(), (unsigned)attrib,
                (unsigned long long)(uintptr_t)k, dev);
        fclose(f);
    }
    *v = attrib + 1000;
    pthread_mutex_lock(&kernel_attrs_lock);
    for (int i = 0; i < nkernel_attrs; i++)
        if (kernel_attrs[i].k == k && kernel_attrs[i].attrib == attrib &&
            kernel_attrs[i].dev == dev)
            *v = kernel_attrs[i].v;
    pthread_mutex_unlock(&kernel_attrs_lock);
    return CUDA_SUCCESS;
}

EXPORT int cuKernelSetAttribute(int attrib, int v, void *k, int dev)
{
    const char *log = getenv("FAKECUDA_LEGACY_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;
    int i;

    if (f) {
        fprintf(f, "cuKernelSetAttribute %d %x %llx %d %d\n", (int)getpid(), (unsigned)attrib,
                (unsigned long long)(uintptr_t)k, v, dev);
        fclose(f);
    }
    if (v < 0 || attrib < 8 || attrib > 15)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&kernel_attrs_lock);
    for (i = 0; i < nkernel_attrs; i++)
        if (kernel_attrs[i].k == k && kernel_attrs[i].attrib == attrib &&
            kernel_attrs[i].dev == dev)
            break;
    if (i < 64) {
        kernel_attrs[i].k = k;
        kernel_attrs[i].attrib = attrib;
        kernel_attrs[i].v = v;
        kernel_attrs[i].dev = dev;
        if (i == nkernel_attrs)
            nkernel_attrs++;
    }
    pthread_mutex_unlock(&kernel_attrs_lock);
    return CUDA_SUCCESS;
}

/* Set while a graph's kernel node runs (fake_launch_kernel_bytes): not a driver launch. */
static __thread int in_graph;

/* FAKECUDA_DRIVER_LOG: one line per launch the driver was asked for, "kernel NAME" for a
 * cuLaunchKernel, "graph N" for a cuGraphLaunch of N nodes (fake_graphs.c): what the server's
 * replay of repeated launches (src/server/replay.c) saves is counted there. */
void fake_driver_log(const char *what, const char *name, int n)
{
    const char *log = getenv("FAKECUDA_DRIVER_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;

    if (f) {
        if (name)
            fprintf(f, "%s %s\n", what, name);
        else
            fprintf(f, "%s %d\n", what, n);
        fclose(f);
    }
}

EXPORT int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned smem, void *s, void **params, void **extra)
{
    struct fake_kernel *k = f;
    const unsigned char *args = NULL;
    size_t len = 0;
    const char *log = getenv("FAKECUDA_LAUNCH_LOG");

    (void)smem, (void)params;
    fake_dma_flush(s); /* a kernel after a pending copy on its stream sees the copy */
    /* A launch prints what earlier kernels left, at its start (a documented flush point), in
     * the launching thread; after a device-side assert it fails as every later call does. */
    if (!in_graph && fake_flush_printf() != CUDA_SUCCESS)
        return CUDA_ERROR_ASSERT;
    if (strcmp(k->name, "fail") == 0)
        return 701; /* CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: an error, the context lives on */
    if (strcmp(k->name, "fault") == 0)
        return 700; /* CUDA_ERROR_ILLEGAL_ADDRESS: the context is lost */
    if (gx == 0 || bx == 0 || bx * by * bz > 1024)
        return 9; /* CUDA_ERROR_INVALID_VALUE for a launch configuration: invalid config */
    for (int i = 0; extra && extra[i]; i += 2) {
        if (extra[i] == (void *)1)
            args = extra[i + 1];
        else if (extra[i] == (void *)2)
            len = *(size_t *)extra[i + 1];
    }
    if (fake_capture_kernel(f, gx, gy, gz, bx, by, bz, s, args, len))
        return CUDA_SUCCESS; /* a node of the capture's graph, not run */
    if (!in_graph)
        fake_driver_log("kernel", k->name, 0);
    /* fill_u32 with the value 0xdeadbeef faults, as an illegal address (the context is lost):
     * a fault in a kernel the server replays in a graph, whose earlier runs were fine. */
    if (strcmp(k->name, "fill_u32") == 0 && len >= 16) {
        uint32_t v;
        memcpy(&v, args + 8, 4);
        if (v == 0xdeadbeefu)
            return 700;
    }
    if (log) {
        FILE *f2 = fopen(log, "a");
        if (f2) {
            fprintf(f2, "%s %u,%u,%u %u,%u,%u ", k->name, gx, gy, gz, bx, by, bz);
            for (size_t i = 0; i < len; i++)
                fprintf(f2, "%02x", args[i]);
            fprintf(f2, "\n");
            fclose(f2);
        }
    }
    if ((log = getenv("FAKECUDA_LAUNCH_STREAM_LOG"))) { /* which stream each launch went to */
        FILE *f3 = fopen(log, "a");
        if (f3) {
            fprintf(f3, "launch %s stream %llu\n", k->name, (unsigned long long)(uintptr_t)s);
            fclose(f3);
        }
    }
    time_line(k->name);
    if (strcmp(k->name, "sleep") == 0 && len >= 4) { /* a kernel of known duration */
        uint32_t us;
        memcpy(&us, args, 4);
        stream_runs(s, us ? us : 1);
    } else {
        stream_runs(s, 0);
    }
    if (strcmp(k->name, "printf") == 0 && len >= 4) {
        uint32_t v;
        memcpy(&v, args, 4);
        pthread_mutex_lock(&printf_lock);
        int n = snprintf(printf_pending + printf_len, sizeof(printf_pending) - printf_len,
                         "kernel printf %u\n", v);
        if (n > 0 && (size_t)n < sizeof(printf_pending) - printf_len)
            printf_len += (size_t)n;
        pthread_mutex_unlock(&printf_lock);
    }
    if (strcmp(k->name, "assert") == 0 && len >= 4) { /* one thread's assert(v != ARG) fails */
        uint32_t v;
        memcpy(&v, args, 4);
        pthread_mutex_lock(&printf_lock);
        snprintf(assert_pending, sizeof(assert_pending),
                 "fake.cu:12: void asserting(const int *, int): block: [%u,0,0], thread: "
                 "[%u,0,0] Assertion `v[i] != %u` failed.\n",
                 gx - 1, bx - 1, v);
        asserted = 1;
        pthread_mutex_unlock(&printf_lock);
    }
    if (strcmp(k->name, "fill_u32") == 0 && len >= 16) {
        uint64_t p;
        uint32_t v, n;
        memcpy(&p, args, 8);
        memcpy(&v, args + 8, 4);
        memcpy(&n, args + 12, 4);
        if (later_on("FAKECUDA_KERNEL_LATER")) { /* its writes land later (a graph's too) */
            pend((struct later){.dst = p, .n = n, .v = v, .s = s});
            return CUDA_SUCCESS;
        }
        for (uint32_t i = 0; i < n; i++)
            ((uint32_t *)(uintptr_t)p)[i] = v;
    }
    return CUDA_SUCCESS;
}

/* For fake_graphs.c: a kernel node's launch, from its argument bytes. */
int fake_launch_kernel_bytes(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, void *s, const void *args, size_t len)
{
    void *extra[5] = {(void *)1, (void *)args, (void *)2, &len, NULL};
    int rc;

    in_graph = 1;
    rc = cuLaunchKernel(f, gx, gy, gz, bx, by, bz, 0, s, NULL, extra);
    in_graph = 0;
    return rc;
}

EXPORT int cuMemsetD2D8Async(dptr_t d, size_t pitch, unsigned char v, size_t w, size_t h, void *s)
{
    fake_dma_flush(s);
    for (size_t r = 0; w && r < h; r++)
        memset((char *)(uintptr_t)d + r * pitch, v, w);
    return CUDA_SUCCESS;
}

EXPORT int cuMemsetD2D16Async(dptr_t d, size_t pitch, unsigned short v, size_t w, size_t h, void *s)
{
    fake_dma_flush(s);
    if (d % 2 || pitch % 2)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t r = 0; r < h; r++)
        cuMemsetD16Async(d + r * pitch, v, w, s);
    return CUDA_SUCCESS;
}

EXPORT int cuMemsetD2D32Async(dptr_t d, size_t pitch, unsigned v, size_t w, size_t h, void *s)
{
    fake_dma_flush(s);
    if (d % 4 || pitch % 4)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t r = 0; r < h; r++)
        cuMemsetD32Async(d + r * pitch, v, w, s);
    return CUDA_SUCCESS;
}

/* CUDA_MEMCPY2D, host (1) and device (2) sides: both are host memory here. */
struct fake_memcpy2d {
    size_t sx, sy;
    int stype;
    const void *shost;
    dptr_t sdev;
    void *sarr;
    size_t spitch;
    size_t dx, dy;
    int dtype;
    void *dhost;
    dptr_t ddev;
    void *darr;
    size_t dpitch;
    size_t w, h;
};

EXPORT int cuMemcpy2DAsync_v2(const struct fake_memcpy2d *c, void *s)
{
    fake_dma_flush(s);
    const char *src = c->stype == 1 ? c->shost : (const char *)(uintptr_t)c->sdev;
    char *dst = c->dtype == 1 ? c->dhost : (char *)(uintptr_t)c->ddev;

    (void)s;
    if (c->stype > 2 || c->dtype > 2)
        return CUDA_ERROR_INVALID_VALUE;
    if (c->h) { /* the host side's bytes: from the first row's start to the last row's end */
        if (c->stype == 1)
            note_host_side("cuMemcpy2DAsync_v2", src + c->sy * c->spitch + c->sx,
                           (c->h - 1) * c->spitch + c->w);
        if (c->dtype == 1)
            note_host_side("cuMemcpy2DAsync_v2", dst + c->dy * c->dpitch + c->dx,
                           (c->h - 1) * c->dpitch + c->w);
    }
    for (size_t r = 0; c->w && r < c->h; r++)
        memmove(dst + (c->dy + r) * c->dpitch + c->dx, src + (c->sy + r) * c->spitch + c->sx, c->w);
    return CUDA_SUCCESS;
}

struct fake_launch_config {
    unsigned gx, gy, gz, bx, by, bz, smem;
    void *stream;
    unsigned char *attrs;
    unsigned nattrs;
};

void fake_attr_log(int id, int v)
{
    char line[64];

    snprintf(line, sizeof(line), "attr %d %d", id, v);
    log_line(line);
}

EXPORT int cuLaunchKernelEx(const struct fake_launch_config *c, void *f, void **params,
                            void **extra)
{
    for (unsigned i = 0; i < c->nattrs; i++) {
        int id, v;
        memcpy(&id, c->attrs + 72 * i, 4);
        memcpy(&v, c->attrs + 72 * i + 8, 4);
        fake_attr_log(id, v);
    }
    return cuLaunchKernel(f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, c->stream, params,
                          extra);
}

EXPORT int cuStreamGetFlags(void *s, unsigned *flags)
{
    (void)s;
    *flags = 1; /* the server makes every stream non-blocking */
    return CUDA_SUCCESS;
}

EXPORT int cuStreamGetPriority(void *s, int *prio)
{
    char *t = s;
    *prio = t >= tokens && t < tokens + sizeof(tokens) ? token_prio[t - tokens] : 0;
    return CUDA_SUCCESS;
}

EXPORT int cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
    (void)flags;
    return pin(p, n);
}

/* Releases of pinned regions are counted in FAKECUDA_UNREGISTER_LOG (one line each). */
EXPORT int cuMemHostUnregister(void *p)
{
    fake_flush_all(); /* a synchronising free */
    const char *log = getenv("FAKECUDA_UNREGISTER_LOG");
    FILE *f = log ? fopen(log, "a") : NULL;

    if (f) {
        fprintf(f, "unregister %p\n", p);
        fclose(f);
    }
    return unpin(p);
}

EXPORT int cuMemHostGetDevicePointer_v2(dptr_t *d, void *p, unsigned flags)
{
    (void)flags;
    *d = (dptr_t)(uintptr_t)p; /* unified addressing: the same pointer */
    return CUDA_SUCCESS;
}
