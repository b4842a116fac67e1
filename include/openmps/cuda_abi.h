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
#define CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS 89

/* Virtual memory management (cuMemCreate and friends). */
#define CU_MEM_ALLOCATION_TYPE_PINNED 0x1
#define CU_MEM_LOCATION_TYPE_DEVICE 0x1
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

/* The modules family (api/remote/modules.tsv, streams' memory values): the fixed-width
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

/* Fatbin images as the runtime hands them to cuLibraryLoadData (DRIVER_FACTS.md). */
#define OM_FATBIN_WRAPPER_MAGIC 0x466243B1u
#define OM_FATBIN_MAGIC 0xBA55ED50u

#endif
