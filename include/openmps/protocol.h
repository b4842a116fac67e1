/* SPDX-License-Identifier: MIT */
/* The wire protocol between openmps processes: framing, message types and payloads. */
#ifndef OPENMPS_PROTOCOL_H
#define OPENMPS_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

/*
 * Every message on every openmps socket is one SOCK_SEQPACKET datagram:
 * a fixed header followed by `len` payload bytes. Payloads are fixed-layout
 * structs of explicitly sized little-endian integers, or text; none carries a
 * pointer. File descriptors travel beside a message with SCM_RIGHTS and are
 * named by the message type that carries them.
 *
 * Compatibility: a peer whose major version differs is refused with a message
 * naming both versions. Minor versions only add message types or append
 * fields at the end of a payload; a decoder accepts a payload longer than it
 * knows and ignores the tail.
 */

#define OM_PROTO_MAGIC 0x53504d4fu /* "OMPS" read as little-endian bytes */
#define OM_PROTO_MAJOR 3 /* 3: private operations of their own (api/ops.tsv); generated rows */
/* minor 1: OUTPUT; 2: SRV_STATS_ASK, SRV_STATS; 3: SRV_CLIENT_LIMITS; 4: static SM partitions */
#define OM_PROTO_MINOR 4

/* Largest payload of any socket message; larger ones are malformed. */
#define OM_MSG_MAX_PAYLOAD 65536u
/* Longest command line the front-end may send. */
#define OM_CMD_MAX 4096u
/* Device-memory limits carried per server or client. */
#define OM_MAX_DEVICES 64u

struct om_msg_hdr {
    uint32_t magic;
    uint16_t major;
    uint16_t minor;
    uint16_t type; /* enum om_msg_type */
    uint16_t flags;
    uint32_t len; /* payload bytes after this header */
};

/* The message types. Who sends each is in its comment: client (the shim or the
 * test client), ui (the openmps-control front-end), daemon, server. */
#define OM_MSG_TYPES(X)                                                                            \
    X(HELLO, 1)          /* client -> daemon: struct om_hello */                                   \
    X(COMMAND, 2)        /* ui -> daemon: one command line, text */                                \
    X(ANSWER, 3)         /* daemon -> ui: answer text; flags OM_ANSWER_ERROR */                    \
    X(REFUSE, 4)         /* daemon or server -> client: reason text, then close */                 \
    X(QUEUED, 5)         /* daemon -> client: text; the client waits for its server */             \
    X(WELCOME, 6)        /* server -> client: struct om_welcome + ring memfd */                    \
    X(TERMINATED, 7)     /* server -> client: reason text; flags: CUresult of a fault or 0 */      \
    X(HOST_MEM, 8)       /* memfd of pinned memory, either way; an external memory or semaphore */ \
    X(OUTPUT, 9)         /* server -> client, before TERMINATED: kernel output text; flags     */  \
                         /* OM_OUTPUT_STDERR: the driver wrote it on stderr (assert messages)  */  \
    X(SRV_READY, 20)     /* server -> daemon: struct om_srv_ready + devices */                     \
    X(SRV_FAULT, 21)     /* server -> daemon: reason text */                                       \
    X(SRV_ADOPT, 22)     /* daemon -> server: struct om_srv_adopt + client socket fd */            \
    X(SRV_CLIENT, 23)    /* server -> daemon: struct om_srv_client (up or down) */                 \
    X(SRV_SHUTDOWN, 24)  /* daemon -> server: struct om_srv_shutdown */                            \
    X(SRV_TERMINATE, 25) /* daemon -> server: struct om_srv_terminate */                           \
    X(SRV_RESULT, 26)    /* server -> daemon: struct om_srv_result */                              \
    X(SRV_LIMITS, 27)    /* daemon -> server: struct om_limits, its clients' (running ones too) */ \
    X(SRV_STATS_ASK, 28) /* daemon -> server: u32 request id: send the clients' accounting */      \
    X(SRV_STATS, 29)     /* server -> daemon: struct om_srv_stats + its records (account.c) */     \
    X(SRV_CLIENT_LIMITS, 30) /* daemon -> server: struct om_srv_client_limits (one client) */

enum om_msg_type {
#define OM_X_ENUM(name, value) OM_MSG_##name = value,
    OM_MSG_TYPES(OM_X_ENUM)
#undef OM_X_ENUM
};

/* REFUSE's flags: the client sees no device; its cuInit returns CUDA_ERROR_NO_DEVICE, or with
 * OM_REFUSE_INVALID_DEVICE (its CUDA_VISIBLE_DEVICES names a device twice) INVALID_DEVICE. */
#define OM_REFUSE_NO_DEVICE 0x1u
#define OM_REFUSE_INVALID_DEVICE 0x2u
/* The daemon runs with static SM partitions (-S) and the client named none, or one it does not
 * have: its cuInit returns CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, as NVIDIA's client does. */
#define OM_REFUSE_PARTITION 0x4u

#define OM_OUTPUT_STDERR 0x1u

#define OM_ANSWER_ERROR 0x1u
#define OM_ANSWER_MORE 0x2u /* the answer continues in the next ANSWER message */

/* Limits handed from the daemon to a server, and asked for by a client. */
struct om_limits {
    uint32_t active_thread_pct_milli; /* 1000..100000, 0 = none */
    uint32_t priority;                /* 0 normal, 1 below normal */
    uint32_t ndevices;                /* entries of mem_limit used */
    uint32_t reserved;
    uint64_t mem_limit[OM_MAX_DEVICES]; /* bytes per device ordinal, 0 = none */
};

/* The client's CUDA_VISIBLE_DEVICES, as text: 64 full UUIDs fit. */
#define OM_VISIBLE_MAX 4096u
#define OM_HELLO_VISIBLE 0x1u /* the client set CUDA_VISIBLE_DEVICES (maybe empty): `visible` */
#define OM_HELLO_MEM_LIMIT                                                                         \
    0x2u /* its CUDA_MPS_PINNED_DEVICE_MEM_LIMIT names GPU UUIDs: `mem_limit` */
#define OM_HELLO_SM_PARTITION 0x4u /* it set CUDA_MPS_SM_PARTITION: `sm_partition` */
/* A static SM partition's name as a client gives it: "GPU-<uuid>/<id>" (or the id alone). */
#define OM_PART_NAME_MAX 128u
struct om_hello {
    uint32_t pid; /* informational; the daemon trusts SO_PEERCRED only */
    uint32_t flags;
    struct om_limits want; /* from the client's environment; can only tighten; the client's own
                            * device ordinals (the daemon maps them to the server's) */
    char visible[OM_VISIBLE_MAX];        /* NUL-terminated */
    char mem_limit[OM_VISIBLE_MAX];      /* NUL-terminated; the daemon applies its UUID entries */
    char sm_partition[OM_PART_NAME_MAX]; /* NUL-terminated */
};

/* The devices a client sees, in its order: its ordinal i is the server's server[i]. */
struct om_devmap {
    uint32_t count;
    uint32_t reserved;
    uint8_t server[OM_MAX_DEVICES];
};

struct om_welcome {
    uint32_t server_pid;
    uint32_t client_id;
    uint32_t ring_bytes; /* size of the memfd mapping that comes with it */
    uint32_t ndevices;
};

#define OM_DEVICE_NAME_MAX 96
#define OM_PCI_ID_MAX 32
struct om_device_info {
    uint32_t ordinal;
    uint32_t reserved;
    uint8_t uuid[16];
    char pci_bus_id[OM_PCI_ID_MAX]; /* NUL-terminated */
    char name[OM_DEVICE_NAME_MAX];  /* NUL-terminated */
    uint32_t sm_count;              /* its SMs (0: unknown) */
    uint32_t chunk_sms; /* SMs of a static partition's chunk: the SM resource's partition size
                         * and alignment, the larger (0: the driver has no green contexts) */
    uint32_t chunks;    /* how many of them one split of its SMs gives (fewer than sm_count /
                         * chunk_sms on an H100: 15 of 8, 12 SMs left; 0: unknown) */
};

/* Static SM partitions (-S): chunks per device, at most (a chunk is at least 2 SMs). */
#define OM_PART_MAX_CHUNKS 128u
#define OM_PART_VALID 0x1u     /* the client runs in a static partition */
#define OM_PART_REMAINDER 0x2u /* with the SMs left over after the last whole chunk */
/* A client's static partition, as the daemon hands it to the server. */
struct om_part_assign {
    uint32_t flags;     /* OM_PART_* */
    uint32_t device;    /* the server's ordinal */
    uint32_t chunk_sms; /* the daemon's chunk size: the server checks it is its own */
    uint32_t reserved;
    uint64_t serial;  /* the partition's number: the same partition, the same green context */
    uint64_t mask[2]; /* its chunks: bit i is chunk i, in the order the device's SMs split */
};

struct om_srv_ready {
    uint32_t ndevices;
    uint32_t reserved;
    /* followed by ndevices x struct om_device_info */
};

struct om_srv_adopt {
    uint32_t client_id;
    uint32_t pid;
    uint32_t uid;
    uint32_t reserved;
    struct om_limits limits;    /* the client's effective limits */
    struct om_limits want;      /* what the client asked for itself: limits changed later for the
                                 * server's running clients are merged with it again */
    struct om_devmap devmap;    /* the client's devices (its CUDA_VISIBLE_DEVICES, resolved) */
    struct om_part_assign part; /* its static SM partition (flags 0: none) */
};

/* One running client's own limits changed (protocol 3: its namespace's were set, or the namespace
 * was deleted and the client moved to the server's default one): `want` replaces the adoption's
 * om_srv_adopt.want, and the client's limits are the server's merged with it again. */
struct om_srv_client_limits {
    uint32_t client_id; /* the adoption's; one the server does not have is ignored */
    uint32_t reserved;
    struct om_limits want;
};

#define OM_CLIENT_UP 1u
#define OM_CLIENT_DOWN 2u
#define OM_CLIENT_MEMORY 3u /* the device memory it holds or the devices it used changed */
struct om_srv_client {
    uint32_t client_id;
    uint32_t pid;
    uint32_t event;        /* OM_CLIENT_UP, OM_CLIENT_DOWN or OM_CLIENT_MEMORY */
    uint32_t device_mask;  /* devices the client uses (bit per ordinal < 32) */
    uint64_t device_bytes; /* OM_CLIENT_MEMORY: what its caps count, on every device */
};

struct om_srv_shutdown {
    uint32_t force; /* 0: when the last client leaves; 1: now */
};

struct om_srv_terminate {
    uint32_t request_id;
    uint32_t client_pid;
};

struct om_srv_result {
    uint32_t request_id;
    int32_t status; /* 0 or -errno */
};

/*
 * The server's accounting of its clients (src/server/account.c), sent for a SRV_STATS_ASK in one
 * or more SRV_STATS messages: each a struct om_srv_stats, then nclients struct om_stats_client,
 * then nusage struct om_stats_usage (one per client and device it used; its client is one of the
 * same message's). OM_STATS_MORE: another message of the same answer follows. Times are
 * nanoseconds, rates thousandths per second.
 */
#define OM_STATS_MORE 0x1u
struct om_srv_stats {
    uint32_t request_id;
    uint32_t flags; /* OM_STATS_MORE */
    uint32_t nclients;
    uint32_t nusage;
};

enum om_client_state { OM_STATE_IDLE, OM_STATE_RUNNING, OM_STATE_WAITING, OM_STATE_COUNT };
struct om_stats_client {
    uint32_t client_id;
    uint32_t pid;
    uint32_t state; /* enum om_client_state */
    uint32_t reserved;
    uint64_t calls;             /* records served */
    uint64_t calls_per_s_milli; /* over the last second or more */
    uint64_t kernels_per_s_milli;
    uint64_t serve_ns;    /* server time answering its calls (not posted ones), GPU waits in it */
    uint64_t gpu_wait_ns; /* of which waiting for the GPU for its synchronising calls */
    uint64_t pinned_bytes;
    uint64_t connected_ns; /* since its session began */
};

struct om_stats_usage {
    uint32_t client_id;
    uint32_t device; /* the server's ordinal */
    uint64_t kernels;
    uint64_t graphs; /* executable graphs it launched */
    uint64_t gpu_ns; /* time with work of its kernels outstanding (account.c: how exact) */
    uint64_t htod_bytes;
    uint64_t dtoh_bytes;
    uint64_t dtod_bytes;
    uint64_t device_bytes; /* device memory it holds there, as its cap counts it */
};

#endif /* OPENMPS_PROTOCOL_H */
