/* SPDX-License-Identifier: MIT */
/* The part of the CUDA driver ABI that openmps marshals, declared from its documentation. */
#ifndef OPENMPS_CUDA_ABI_H
#define OPENMPS_CUDA_ABI_H

#include <stddef.h>
#include <stdint.h>

/*
 * The shim and the server are built without the CUDA toolkit (CI has none), so
 * the types, constants and layouts they need are declared here, with the
 * values the driver API documents. Only what is marshalled appears.
 */
typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUlibrary;
typedef void *CUkernel;
typedef void *CUfunction;
typedef void *CUmodule;
typedef uint64_t CUmemGenericAllocationHandle;

typedef struct {
    char bytes[16];
} CUuuid;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_MPS_CONNECTION_FAILED = 805,
    CUDA_ERROR_MPS_SERVER_NOT_READY = 807,
    CUDA_ERROR_MPS_CLIENT_TERMINATED = 810,
    CUDA_ERROR_UNKNOWN = 999,
};

#define CU_STREAM_NON_BLOCKING 0x1u
#define CU_CTX_SCHED_SPIN 0x1u
#define CU_CTX_SCHED_YIELD 0x2u
#define CU_CTX_SCHED_BLOCKING_SYNC 0x4u
#define CU_EVENT_BLOCKING_SYNC 0x1u
#define CU_EVENT_DISABLE_TIMING 0x2u
#define CU_MEMHOSTALLOC_PORTABLE 0x1u
#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)
#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)
#define CU_MODULE_EAGER_LOADING 0x1
#define CU_MODULE_LAZY_LOADING 0x2
#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS 89

/* Virtual memory management (cuMemCreate and friends). */
#define CU_MEM_ALLOCATION_TYPE_PINNED 0x1
#define CU_MEM_LOCATION_TYPE_DEVICE 0x1
#define CU_MEM_LOCATION_TYPE_HOST 0x2
#define CU_MEM_LOCATION_TYPE_HOST_NUMA 0x3
#define CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT 0x4
#define CU_MEM_ACCESS_FLAGS_PROT_READWRITE 0x3
#define CU_MEM_ALLOC_GRANULARITY_MINIMUM 0x0

typedef struct {
    int type;
    int id;
} CUmemLocation;

typedef struct {
    int type;
    int requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

typedef struct {
    CUmemLocation location;
    int flags;
} CUmemAccessDesc;

/* CUDA_MEMCPY2D; CUmemorytype: 1 host, 2 device, 3 array, 4 unified. */
typedef struct {
    size_t srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray;
    size_t srcPitch;
    size_t dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray;
    size_t dstPitch;
    size_t WidthInBytes, Height;
} CUDA_MEMCPY2D;
/* CUDA_MEMCPY3D */
typedef struct {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray;
    void *reserved0;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray;
    void *reserved1;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D;
#define CU_MEMORYTYPE_HOST 1
#define CU_MEMORYTYPE_DEVICE 2
#define CU_MEMORYTYPE_ARRAY 3
#define CU_MEMORYTYPE_UNIFIED 4

/* CUlaunchAttribute: an id, padding, a 64-byte value union; CUlaunchConfig. */
typedef struct {
    int id;
    char pad[8 - sizeof(int)];
    union {
        char bytes[64];
    } value;
} CUlaunchAttribute;
typedef struct {
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

/* Arrays, textures and surfaces (family arrays): handles and the descriptors their calls copy.
 * Sizes from the documented layouts (checked below against the toolkit's on x86-64). */
typedef void *CUarray;
typedef void *CUmipmappedArray;
typedef unsigned long long CUtexObject;
typedef unsigned long long CUsurfObject;
typedef int CUarray_format;
typedef int CUresourcetype;
typedef int CUaddress_mode;
typedef int CUfilter_mode;
typedef int CUresourceViewFormat;
typedef struct {
    size_t Width, Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct {
    size_t Width, Height, Depth;
    CUarray_format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;
#define CU_RESOURCE_TYPE_ARRAY 0
#define CU_RESOURCE_TYPE_MIPMAPPED_ARRAY 1
#define CU_RESOURCE_TYPE_LINEAR 2
#define CU_RESOURCE_TYPE_PITCH2D 3
typedef struct {
    CUresourcetype resType;
    union {
        struct {
            CUarray hArray;
        } array;
        struct {
            CUmipmappedArray hMipmappedArray;
        } mipmap;
        struct {
            CUdeviceptr devPtr;
            CUarray_format format;
            unsigned int numChannels;
            size_t sizeInBytes;
        } linear;
        struct {
            CUdeviceptr devPtr;
            CUarray_format format;
            unsigned int numChannels;
            size_t width, height, pitchInBytes;
        } pitch2D;
        struct {
            int reserved[32];
        } reserved;
    } res;
    unsigned int flags;
} CUDA_RESOURCE_DESC;
typedef struct {
    CUaddress_mode addressMode[3];
    CUfilter_mode filterMode;
    unsigned int flags;
    unsigned int maxAnisotropy;
    CUfilter_mode mipmapFilterMode;
    float mipmapLevelBias, minMipmapLevelClamp, maxMipmapLevelClamp;
    float borderColor[4];
    int reserved[12];
} CUDA_TEXTURE_DESC;
typedef struct {
    CUresourceViewFormat format;
    size_t width, height, depth;
    unsigned int firstMipmapLevel, lastMipmapLevel;
    unsigned int firstLayer, lastLayer;
    unsigned int reserved[16];
} CUDA_RESOURCE_VIEW_DESC;
typedef struct {
    size_t size, alignment;
    unsigned int reserved[4];
} CUDA_ARRAY_MEMORY_REQUIREMENTS;
typedef struct {
    struct {
        unsigned int width, height, depth;
    } tileExtent;
    unsigned int miptailFirstLevel;
    unsigned long long miptailSize;
    unsigned int flags;
    unsigned int reserved[4];
} CUDA_ARRAY_SPARSE_PROPERTIES;
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(CUDA_ARRAY_DESCRIPTOR) == 24, "CUDA_ARRAY_DESCRIPTOR");
_Static_assert(sizeof(CUDA_ARRAY3D_DESCRIPTOR) == 40, "CUDA_ARRAY3D_DESCRIPTOR");
_Static_assert(sizeof(CUDA_RESOURCE_DESC) == 144, "CUDA_RESOURCE_DESC");
_Static_assert(offsetof(CUDA_RESOURCE_DESC, flags) == 136, "CUDA_RESOURCE_DESC.flags");
_Static_assert(offsetof(CUDA_RESOURCE_DESC, res.pitch2D.pitchInBytes) == 40, "pitchInBytes");
_Static_assert(sizeof(CUDA_TEXTURE_DESC) == 104, "CUDA_TEXTURE_DESC");
_Static_assert(sizeof(CUDA_RESOURCE_VIEW_DESC) == 112, "CUDA_RESOURCE_VIEW_DESC");
_Static_assert(sizeof(CUDA_ARRAY_MEMORY_REQUIREMENTS) == 32, "CUDA_ARRAY_MEMORY_REQUIREMENTS");
_Static_assert(sizeof(CUDA_ARRAY_SPARSE_PROPERTIES) == 48, "CUDA_ARRAY_SPARSE_PROPERTIES");
_Static_assert(offsetof(CUDA_ARRAY_SPARSE_PROPERTIES, miptailSize) == 16, "miptailSize");
#endif
/* Contexts and devices (api/remote/contexts.tsv, devices.tsv). */
#define CUDA_ERROR_CONTEXT_IS_DESTROYED 709
#define CU_CTX_FLAGS_MASK 0xffu
#define CU_CTX_SCHED_MASK 0x7u
typedef struct {
    int type; /* CUexecAffinityType: 0 = CU_EXEC_AFFINITY_TYPE_SM_COUNT */
    union {
        struct {
            unsigned int val;
        } smCount;
    } param;
} CUexecAffinityParam;
typedef struct {
    CUexecAffinityParam *execAffinityParams;
    int numExecAffinityParams;
    void *cigParams; /* CUctxCigParam *: graphics interop, refused */
} CUctxCreateParams;
typedef struct {
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int sharedMemPerBlock;
    int totalConstantMemory;
    int SIMDWidth;
    int memPitch;
    int regsPerBlock;
    int clockRate;
    int textureAlign;
} CUdevprop;
_Static_assert(sizeof(CUexecAffinityParam) == 8, "CUexecAffinityParam");
_Static_assert(sizeof(CUctxCreateParams) == 24, "CUctxCreateParams");
_Static_assert(sizeof(CUdevprop) == 56, "CUdevprop");
/* Memory family: stream-ordered pools and IPC handles (api/remote/mempool.tsv, ipc.tsv). */
typedef struct {
    int allocType;
    int handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;
_Static_assert(sizeof(CUmemPoolProps) == 88, "CUmemPoolProps as in cuda.h");
#define CU_IPC_HANDLE_SIZE 64
typedef struct {
    char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;
typedef struct {
    char reserved[CU_IPC_HANDLE_SIZE];
} CUipcEventHandle;
#define CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES 3
#define CU_MEMPOOL_ATTR_RELEASE_THRESHOLD 4
#define CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH 6
#define CU_MEMPOOL_ATTR_USED_MEM_HIGH 8
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1
/* Graphs and stream capture (api/remote/graphs.tsv, nodes.tsv, capture.tsv, graphmem.tsv). */
typedef uint64_t cuuint64_t;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgraphExec_st *CUgraphExec;
/* CUDA_KERNEL_NODE_PARAMS_v1 (56 bytes) and _v2 (= CUDA_KERNEL_NODE_PARAMS, 72 bytes). */
typedef struct {
    CUfunction func;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
} CUDA_KERNEL_NODE_PARAMS_v1;
typedef struct {
    CUfunction func;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    CUkernel kern;
    CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS;
/* CUDA_MEMSET_NODE_PARAMS (40 bytes). */
typedef struct {
    CUdeviceptr dst;
    size_t pitch;
    unsigned int value, elementSize;
    size_t width, height;
} CUDA_MEMSET_NODE_PARAMS;
/* CUgraphEdgeData (8 bytes): ports, type, reserved. */
typedef struct {
    unsigned char from_port, to_port, type, reserved[5];
} CUgraphEdgeData;
/* CUgraphExecUpdateResultInfo (24 bytes). */
typedef struct {
    int result;
    CUgraphNode errorNode;
    CUgraphNode errorFromNode;
} CUgraphExecUpdateResultInfo;
/* CUDA_GRAPH_INSTANTIATE_PARAMS (32 bytes). */
typedef struct {
    cuuint64_t flags;
    CUstream hUploadStream;
    CUgraphNode hErrNode_out;
    int result_out;
} CUDA_GRAPH_INSTANTIATE_PARAMS;
_Static_assert(sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS) == 32, "CUDA_GRAPH_INSTANTIATE_PARAMS");
_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v1) == 56, "CUDA_KERNEL_NODE_PARAMS_v1");
_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS) == 72, "CUDA_KERNEL_NODE_PARAMS");
_Static_assert(sizeof(CUDA_MEMSET_NODE_PARAMS) == 40, "CUDA_MEMSET_NODE_PARAMS");
_Static_assert(sizeof(CUgraphEdgeData) == 8, "CUgraphEdgeData");
_Static_assert(sizeof(CUgraphExecUpdateResultInfo) == 24, "CUgraphExecUpdateResultInfo");

/* The streams family (api/remote/streams.tsv, its memory values): the fixed-width
 * integers of cuStreamWaitValue* / cuStreamWriteValue*. */
typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;
/* CUstreamAttrValue (CUlaunchAttributeValue): a 64-byte union; the access policy window is
 * the member whose device address the server checks. */
typedef struct {
    void *base_ptr;
    size_t num_bytes;
    float hitRatio;
    int hitProp, missProp;
} CUaccessPolicyWindow;
typedef union {
    CUaccessPolicyWindow accessPolicyWindow;
    int syncPolicy;
    int priority;
    char bytes[64];
} CUstreamAttrValue;
_Static_assert(sizeof(CUaccessPolicyWindow) == 32, "CUaccessPolicyWindow is 32 bytes");
_Static_assert(sizeof(CUstreamAttrValue) == 64, "CUstreamAttrValue is 64 bytes");
typedef CUstreamAttrValue CUkernelNodeAttrValue; /* both are CUlaunchAttributeValue */

/* A tensor map (cuTensorMapEncode*): 128 opaque bytes, 64-byte aligned, encoded by the server's
 * driver and read only by the client's kernels. */
typedef struct {
    _Alignas(64) cuuint64_t opaque[16];
} CUtensorMap;
_Static_assert(sizeof(CUtensorMap) == 128, "CUtensorMap is 128 bytes");

/* External memory and semaphores (family external): the descriptors their calls copy. Sizes
 * from the documented layouts (checked below against the toolkit's on x86-64). */
#define CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD 1
#define CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF 8
#define CU_EXTERNAL_MEMORY_HANDLE_TYPE_DMABUF_FD 9
#define CUDA_EXTERNAL_MEMORY_DEDICATED 0x1u
#define CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD 1
#define CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_NVSCISYNC 6
#define CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD 9
typedef struct om_CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
    int type; /* CUexternalMemoryHandleType */
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
        const void *nvSciBufObject;
    } handle;
    unsigned long long size;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_HANDLE_DESC;
typedef struct om_CUDA_EXTERNAL_MEMORY_BUFFER_DESC {
    unsigned long long offset, size;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_BUFFER_DESC;
typedef struct om_CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC {
    unsigned long long offset;
    CUDA_ARRAY3D_DESCRIPTOR arrayDesc;
    unsigned int numLevels;
    unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC;
typedef struct om_CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC {
    int type; /* CUexternalSemaphoreHandleType */
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
        const void *nvSciSyncObj;
    } handle;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC;
typedef struct om_CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS {
    struct {
        struct {
            unsigned long long value;
        } fence;
        union {
            void *fence;
            unsigned long long reserved;
        } nvSciSync;
        struct {
            unsigned long long key;
        } keyedMutex;
        unsigned int reserved[12];
    } params;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS;
typedef struct om_CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS {
    struct {
        struct {
            unsigned long long value;
        } fence;
        union {
            void *fence;
            unsigned long long reserved;
        } nvSciSync;
        struct {
            unsigned long long key;
            unsigned int timeoutMs;
        } keyedMutex;
        unsigned int reserved[10];
    } params;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS;
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(CUDA_EXTERNAL_MEMORY_HANDLE_DESC) == 104, "CUDA_EXTERNAL_MEMORY_HANDLE_DESC");
_Static_assert(offsetof(CUDA_EXTERNAL_MEMORY_HANDLE_DESC, size) == 24, "ext memory size");
_Static_assert(offsetof(CUDA_EXTERNAL_MEMORY_HANDLE_DESC, flags) == 32, "ext memory flags");
_Static_assert(sizeof(CUDA_EXTERNAL_MEMORY_BUFFER_DESC) == 88, "CUDA_EXTERNAL_MEMORY_BUFFER_DESC");
_Static_assert(sizeof(CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC) == 120, "mipmapped array desc");
_Static_assert(offsetof(CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC, numLevels) == 48, "numLevels");
_Static_assert(sizeof(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC) == 96, "semaphore handle desc");
_Static_assert(offsetof(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC, flags) == 24, "semaphore flags");
_Static_assert(sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS) == 144, "signal params");
_Static_assert(offsetof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, flags) == 72, "signal flags");
_Static_assert(sizeof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS) == 144, "wait params");
_Static_assert(offsetof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, flags) == 72, "wait flags");
#endif

/* Legacy family (api/remote/legacy.tsv): the v1 array descriptors (unsigned int sizes, declared
 * by cuda.h only under __CUDA_API_VERSION_INTERNAL) and cuLaunchCooperativeKernelMultiDevice's
 * launch parameters. */
typedef struct {
    unsigned int Width, Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;
typedef struct {
    unsigned int Width, Height, Depth;
    CUarray_format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;
typedef struct {
    CUfunction function;
    unsigned int gridDimX, gridDimY, gridDimZ;
    unsigned int blockDimX, blockDimY, blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    void **kernelParams;
} CUDA_LAUNCH_PARAMS;
_Static_assert(sizeof(CUDA_ARRAY_DESCRIPTOR_v1) == 16, "CUDA_ARRAY_DESCRIPTOR_v1");
_Static_assert(sizeof(CUDA_ARRAY3D_DESCRIPTOR_v1) == 24, "CUDA_ARRAY3D_DESCRIPTOR_v1");
_Static_assert(sizeof(CUDA_LAUNCH_PARAMS) == 56, "CUDA_LAUNCH_PARAMS");

/* v1 family (api/remote/v1.tsv): the CUDA 3.1-era copy structs (32-bit device addresses,
 * unsigned int sizes), declared by cuda.h only under __CUDA_API_VERSION_INTERNAL. */
typedef unsigned int CUdeviceptr_v1;
typedef struct om_CUDA_MEMCPY2D_v1 {
    unsigned int srcXInBytes, srcY;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr_v1 srcDevice;
    void *srcArray;
    unsigned int srcPitch;
    unsigned int dstXInBytes, dstY;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr_v1 dstDevice;
    void *dstArray;
    unsigned int dstPitch;
    unsigned int WidthInBytes, Height;
} CUDA_MEMCPY2D_v1;
typedef struct om_CUDA_MEMCPY3D_v1 {
    unsigned int srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr_v1 srcDevice;
    void *srcArray;
    void *reserved0;
    unsigned int srcPitch, srcHeight;
    unsigned int dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr_v1 dstDevice;
    void *dstArray;
    void *reserved1;
    unsigned int dstPitch, dstHeight;
    unsigned int WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D_v1;
_Static_assert(sizeof(CUDA_MEMCPY2D_v1) == 96, "CUDA_MEMCPY2D_v1");
_Static_assert(offsetof(CUDA_MEMCPY2D_v1, dstXInBytes) == 44, "CUDA_MEMCPY2D_v1 dst");
_Static_assert(offsetof(CUDA_MEMCPY2D_v1, WidthInBytes) == 84, "CUDA_MEMCPY2D_v1 width");
_Static_assert(sizeof(CUDA_MEMCPY3D_v1) == 144, "CUDA_MEMCPY3D_v1");
_Static_assert(offsetof(CUDA_MEMCPY3D_v1, reserved0) == 48, "CUDA_MEMCPY3D_v1 reserved0");
_Static_assert(offsetof(CUDA_MEMCPY3D_v1, dstXInBytes) == 64, "CUDA_MEMCPY3D_v1 dst");
_Static_assert(offsetof(CUDA_MEMCPY3D_v1, WidthInBytes) == 128, "CUDA_MEMCPY3D_v1 width");

/* Copies family: CUDA_MEMCPY3D_PEER (CUDA_MEMCPY3D with each side's context in place of its
 * reserved pointer; api/copies.c converts one into the other). */
typedef struct om_CUDA_MEMCPY3D_PEER {
    size_t srcXInBytes, srcY, srcZ, srcLOD;
    int srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    void *srcArray;
    void *srcContext;
    size_t srcPitch, srcHeight;
    size_t dstXInBytes, dstY, dstZ, dstLOD;
    int dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    void *dstArray;
    void *dstContext;
    size_t dstPitch, dstHeight;
    size_t WidthInBytes, Height, Depth;
} CUDA_MEMCPY3D_PEER;
_Static_assert(sizeof(CUDA_MEMCPY3D_PEER) == 200, "CUDA_MEMCPY3D_PEER as in cuda.h");
_Static_assert(sizeof(CUDA_MEMCPY3D_PEER) == sizeof(CUDA_MEMCPY3D) &&
                   offsetof(CUDA_MEMCPY3D_PEER, dstContext) == 152 &&
                   offsetof(CUDA_MEMCPY3D, reserved1) == 152,
               "the same layout");
/* CUmemcpyAttributes: cuMemcpyBatchAsync's attributes of a run of copies. */
typedef struct om_CUmemcpyAttributes {
    int srcAccessOrder; /* CUmemcpySrcAccessOrder: 1 stream, 2 during the call, 3 any */
    CUmemLocation srcLocHint, dstLocHint;
    unsigned int flags; /* CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE = 1 */
} CUmemcpyAttributes;
_Static_assert(sizeof(CUmemcpyAttributes) == 24, "CUmemcpyAttributes as in cuda.h");
/* CUDA_MEMCPY3D_BATCH_OP: two operands (a pointer with its row length and layer height in
 * elements, or an array with an offset), the extent, the source access order, flags. */
typedef struct {
    int type; /* CUmemcpy3DOperandType: 1 pointer, 2 array */
    union {
        struct {
            CUdeviceptr ptr;
            size_t rowLength, layerHeight;
            CUmemLocation locHint;
        } ptr;
        struct {
            void *array;
            size_t x, y, z;
        } array;
    } op;
} om_memcpy3d_operand;
typedef struct om_CUDA_MEMCPY3D_BATCH_OP {
    om_memcpy3d_operand src, dst;
    size_t width, height, depth;
    int srcAccessOrder;
    unsigned int flags;
} CUDA_MEMCPY3D_BATCH_OP;
_Static_assert(sizeof(CUDA_MEMCPY3D_BATCH_OP) == 112 &&
                   offsetof(CUDA_MEMCPY3D_BATCH_OP, dst) == 40 &&
                   offsetof(CUDA_MEMCPY3D_BATCH_OP, srcAccessOrder) == 104,
               "CUDA_MEMCPY3D_BATCH_OP as in cuda.h");

/* Graph nodes (api/remote/nodes.tsv): an external semaphore node's parameters (cuda.h's _v1; _v2
 * has the same layout). 24 bytes: two pointers, an unsigned, padding. */
typedef struct om_CUDA_EXT_SEM_SIGNAL_NODE_PARAMS {
    struct CUexternalSemaphore_st **extSemArray; /* CUexternalSemaphore * */
    const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray;
    unsigned int numExtSems;
} CUDA_EXT_SEM_SIGNAL_NODE_PARAMS;
typedef struct om_CUDA_EXT_SEM_WAIT_NODE_PARAMS {
    struct CUexternalSemaphore_st **extSemArray; /* CUexternalSemaphore * */
    const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray;
    unsigned int numExtSems;
} CUDA_EXT_SEM_WAIT_NODE_PARAMS;
_Static_assert(sizeof(CUDA_EXT_SEM_SIGNAL_NODE_PARAMS) == 24, "ext sem signal node params");
_Static_assert(sizeof(CUDA_EXT_SEM_WAIT_NODE_PARAMS) == 24, "ext sem wait node params");
/* A batch memory op node's parameters (cuda.h's _v1 and _v2 alike): 32 bytes. */
typedef struct om_CUDA_BATCH_MEM_OP_NODE_PARAMS {
    CUcontext ctx;
    unsigned int count;
    union om_CUstreamBatchMemOpParams *paramArray;
    unsigned int flags;
} CUDA_BATCH_MEM_OP_NODE_PARAMS;
_Static_assert(sizeof(CUDA_BATCH_MEM_OP_NODE_PARAMS) == 32, "batch mem op node params");
/* Graph memory and conditional nodes (api/remote/graphmem.tsv, nodes.tsv): an
 * allocation node's parameters (cuda.h's _v1 and _v2 alike, 120 bytes), a conditional node's
 * (32 bytes). CUgraphConditionalHandle is src/common/gen/types.h's 64-bit scalar. */
typedef struct om_CUDA_MEM_ALLOC_NODE_PARAMS {
    CUmemPoolProps poolProps;
    const CUmemAccessDesc *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr; /* out: written by the driver */
} CUDA_MEM_ALLOC_NODE_PARAMS;
_Static_assert(sizeof(CUDA_MEM_ALLOC_NODE_PARAMS) == 120 &&
                   offsetof(CUDA_MEM_ALLOC_NODE_PARAMS, dptr) == 112,
               "CUDA_MEM_ALLOC_NODE_PARAMS as in cuda.h");
_Static_assert(sizeof(CUmemAccessDesc) == 12, "CUmemAccessDesc as in cuda.h");
typedef struct om_CUDA_CONDITIONAL_NODE_PARAMS {
    unsigned long long handle; /* CUgraphConditionalHandle */
    int type;                  /* CUgraphConditionalNodeType: 0 if, 1 while, 2 switch */
    unsigned int size;         /* body graphs */
    CUgraph *phGraph_out;      /* the driver's array of them, written at creation */
    CUcontext ctx;
} CUDA_CONDITIONAL_NODE_PARAMS;
_Static_assert(sizeof(CUDA_CONDITIONAL_NODE_PARAMS) == 32 &&
                   offsetof(CUDA_CONDITIONAL_NODE_PARAMS, phGraph_out) == 16,
               "CUDA_CONDITIONAL_NODE_PARAMS as in cuda.h");
/* The generic node parameters (cuGraphAddNode): the type, then one kind's parameters; 256
 * bytes. Only the kinds the client dispatches are spelt out. */
typedef struct om_CUgraphNodeParams {
    int type; /* CUgraphNodeType */
    int reserved0[3];
    union {
        long long reserved1[29];
        CUDA_KERNEL_NODE_PARAMS kernel; /* _v3: the same layout */
        struct {
            int flags, reserved;
            CUcontext copyCtx;
            CUDA_MEMCPY3D copyParams;
        } memcpy;
        struct {
            CUDA_MEMSET_NODE_PARAMS p; /* _v2: these fields, then the context */
            CUcontext ctx;
        } memset;
        struct {
            CUgraph graph;
            int ownership; /* CUgraphChildGraphNodeOwnership: 0 clone */
        } graph;
        struct {
            CUevent event;
        } event;
        CUDA_EXT_SEM_SIGNAL_NODE_PARAMS extSem; /* signal or wait, _v2: the same layout */
        CUDA_BATCH_MEM_OP_NODE_PARAMS memOp;
        CUDA_MEM_ALLOC_NODE_PARAMS alloc; /* _v2: the same layout */
        struct {
            CUdeviceptr dptr;
        } free;
        CUDA_CONDITIONAL_NODE_PARAMS conditional;
    } u;
    long long reserved2;
} CUgraphNodeParams;
_Static_assert(sizeof(CUgraphNodeParams) == 256, "graph node params");
_Static_assert(offsetof(CUgraphNodeParams, u) == 16, "graph node params' union");

/* Sparse arrays' tile mappings (api/remote/arraymap.tsv): one element of cuMemMapArrayAsync's
 * list. resourceType is a CU_RESOURCE_TYPE_ARRAY or _MIPMAPPED_ARRAY; subresourceType 0 sparse
 * level, 1 mip tail; memOperationType 1 map, 2 unmap; memHandleType 0 generic (the only one). */
#define CU_ARRAY_SPARSE_SUBRESOURCE_TYPE_MIPTAIL 1
#define CU_MEM_OPERATION_TYPE_MAP 1
#define CU_MEM_OPERATION_TYPE_UNMAP 2
#define CU_MEM_HANDLE_TYPE_GENERIC 0
#define CUDA_ARRAY3D_SPARSE 0x40
typedef struct {
    CUresourcetype resourceType;
    union {
        CUmipmappedArray mipmap;
        CUarray array;
    } resource;
    int subresourceType;
    union {
        struct {
            unsigned int level, layer;
            unsigned int offsetX, offsetY, offsetZ;
            unsigned int extentWidth, extentHeight, extentDepth;
        } sparseLevel;
        struct {
            unsigned int layer;
            unsigned long long offset, size;
        } miptail;
    } subresource;
    int memOperationType;
    int memHandleType;
    union {
        CUmemGenericAllocationHandle memHandle;
    } memHandle;
    unsigned long long offset;
    unsigned int deviceBitMask;
    unsigned int flags;
    unsigned int reserved[2];
} CUarrayMapInfo;
_Static_assert(sizeof(CUarrayMapInfo) == 96, "CUarrayMapInfo");
_Static_assert(offsetof(CUarrayMapInfo, subresource) == 24, "CUarrayMapInfo.subresource");
_Static_assert(offsetof(CUarrayMapInfo, subresource.miptail.offset) == 32, "miptail.offset");
_Static_assert(offsetof(CUarrayMapInfo, memOperationType) == 56, "memOperationType");
_Static_assert(offsetof(CUarrayMapInfo, memHandle) == 64, "CUarrayMapInfo.memHandle");
_Static_assert(offsetof(CUarrayMapInfo, deviceBitMask) == 80, "deviceBitMask");
/* Shareable handles (api/remote/shareable.tsv): the handle types of CUmemAllocationHandleType
 * (a mask in CUmemAllocationProp.requestedHandleTypes and CUmemPoolProps.handleTypes), a fabric
 * handle and a pool pointer's export data (64 opaque bytes each). */
#define CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR 0x1
#define CU_MEM_HANDLE_TYPE_WIN32 0x2
#define CU_MEM_HANDLE_TYPE_WIN32_KMT 0x4
#define CU_MEM_HANDLE_TYPE_FABRIC 0x8
typedef struct {
    unsigned char data[64];
} CUmemFabricHandle;
typedef struct om_CUmemPoolPtrExportData {
    unsigned char reserved[64];
} CUmemPoolPtrExportData;
_Static_assert(sizeof(CUmemFabricHandle) == 64, "CUmemFabricHandle as in cuda.h");
_Static_assert(sizeof(CUmemPoolPtrExportData) == 64, "CUmemPoolPtrExportData as in cuda.h");

/* Host nodes and user objects (api/remote/hostnodes.tsv): a host node's parameters (cuda.h's
 * _v1; _v2 has the same layout), the client's function and argument. 16 bytes. */
typedef struct om_CUDA_HOST_NODE_PARAMS {
    void (*fn)(void *userData);
    void *userData;
} CUDA_HOST_NODE_PARAMS;
_Static_assert(sizeof(CUDA_HOST_NODE_PARAMS) == 16, "host node params");

/* Green contexts and device resources (api/remote/green.tsv): CUdevResource (RESOURCE_ABI_VERSION
 * 1), 144 bytes: the type, 92 bytes the driver keeps to itself, then 48 bytes of the type's data
 * (for the SM type three unsigneds). The server never takes the driver's 92 bytes from a client
 * (api/green.c keeps the real structs; the client's copy carries a reference). */
#define CU_DEV_RESOURCE_TYPE_INVALID 0
#define CU_DEV_RESOURCE_TYPE_SM 1
#define CU_GREEN_CTX_DEFAULT_STREAM 0x1
#define CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING 0x1
#define CU_DEV_SM_RESOURCE_SPLIT_MAX_POTENTIAL_CLUSTER_SIZE 0x2
#define CUDA_ERROR_INVALID_RESOURCE_TYPE 914
#define CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION 915
typedef struct om_CUdevSmResource {
    unsigned int smCount;
    unsigned int minSmPartitionSize;
    unsigned int smCoscheduledAlignment;
} CUdevSmResource;
struct om_CUdevResource {
    int type; /* CUdevResourceType */
    unsigned char _internal_padding[92];
    union {
        CUdevSmResource sm;
        unsigned char _oversize[48];
    };
};
_Static_assert(sizeof(struct om_CUdevResource) == 144 &&
                   offsetof(struct om_CUdevResource, sm) == 96,
               "CUdevResource as in cuda.h");

/* Fatbin images as the runtime hands them to cuLibraryLoadData (docs/driver-facts.md). */
#define OM_FATBIN_WRAPPER_MAGIC 0x466243B1u
#define OM_FATBIN_MAGIC 0xBA55ED50u

#endif
