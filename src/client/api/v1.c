/* SPDX-License-Identifier: MIT */
/* Remote mode: the CUDA 3.1-era entry points without a _v2 suffix (api/remote/v1.tsv). Each one
 * widens its 32-bit addresses and sizes, calls the _v2 implementation, and narrows what comes
 * back. An address that does not fit in 32 bits cannot be answered through these prototypes:
 * a new allocation there is freed again and reported as CUDA_ERROR_OUT_OF_MEMORY (no memory the
 * caller could address was available), a lookup of an existing one answers
 * CUDA_ERROR_NOT_SUPPORTED (docs/architecture.md, "32-bit (v1) entry points"). */
#define _GNU_SOURCE
#include <limits.h>
#include <stdint.h>

#include "../../common/gen/entries.h"
#include "../gen/remote_decls.h"
#include "../remote.h"
#include "../shim.h"
#include "../gen/calls.h"

static bool fits(uint64_t v)
{
    return v <= UINT_MAX;
}

/* ------------------------------------------------------------------ memory */

CUresult om_r_cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    CUdeviceptr d = 0;
    CUresult rc;

    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    rc = OM_CALL(cuMemAlloc_v2)(&d, bytesize);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!fits(d)) {
        OM_CALL(cuMemFree_v2)(d);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = (CUdeviceptr_v1)d;
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemAllocHost(void **pp, unsigned int bytesize)
{
    return OM_CALL(cuMemAllocHost_v2)(pp, bytesize);
}

CUresult om_r_cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch, unsigned int width,
                              unsigned int height, unsigned int elem)
{
    CUdeviceptr d = 0;
    size_t pitch = 0;
    CUresult rc;

    if (!dptr || !pPitch)
        return CUDA_ERROR_INVALID_VALUE;
    rc = OM_CALL(cuMemAllocPitch_v2)(&d, &pitch, width, height, elem);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!fits(d) || !fits(pitch) || !fits(d + (uint64_t)pitch * height - 1)) {
        OM_CALL(cuMemFree_v2)(d);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = (CUdeviceptr_v1)d;
    *pPitch = (unsigned int)pitch;
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemFree(CUdeviceptr_v1 dptr)
{
    return OM_CALL(cuMemFree_v2)(dptr);
}

CUresult om_r_cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize, CUdeviceptr_v1 dptr)
{
    CUdeviceptr b = 0;
    size_t s = 0;
    CUresult rc = OM_CALL(cuMemGetAddressRange_v2)(pbase ? &b : NULL, psize ? &s : NULL, dptr);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((pbase && !fits(b)) || (psize && !fits(s)))
        return CUDA_ERROR_NOT_SUPPORTED;
    if (pbase)
        *pbase = (CUdeviceptr_v1)b;
    if (psize)
        *psize = (unsigned int)s;
    return CUDA_SUCCESS;
}

/* Sizes above 4 GiB - 1 are reported as 4 GiB - 1: a program asking whether its allocation
 * fits still gets a true answer. */
CUresult om_r_cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    CUresult (*info)(size_t *, size_t *) = om_remote_entry(OM_IDX_cuMemGetInfo_v2);
    size_t f = 0, t = 0;
    CUresult rc;

    if (!free || !total)
        return CUDA_ERROR_INVALID_VALUE;
    rc = info(&f, &t);
    if (rc != CUDA_SUCCESS)
        return rc;
    *free = fits(f) ? (unsigned int)f : UINT_MAX;
    *total = fits(t) ? (unsigned int)t : UINT_MAX;
    return CUDA_SUCCESS;
}

CUresult om_r_cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
    CUdeviceptr d = 0;
    CUresult rc;

    if (!pdptr)
        return CUDA_ERROR_INVALID_VALUE;
    rc = OM_CALL(cuMemHostGetDevicePointer_v2)(&d, p, Flags);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (!fits(d))
        return CUDA_ERROR_NOT_SUPPORTED;
    *pdptr = (CUdeviceptr_v1)d;
    return CUDA_SUCCESS;
}

CUresult om_r_cuModuleGetGlobal(CUdeviceptr_v1 *dptr, unsigned int *bytes, CUmodule hmod,
                                const char *name)
{
    CUdeviceptr d = 0;
    size_t n = 0;
    CUresult rc = OM_CALL(cuModuleGetGlobal_v2)(dptr ? &d : NULL, bytes ? &n : NULL, hmod, name);

    if (rc != CUDA_SUCCESS)
        return rc;
    if ((dptr && !fits(d)) || (bytes && !fits(n)))
        return CUDA_ERROR_NOT_SUPPORTED;
    if (dptr)
        *dptr = (CUdeviceptr_v1)d;
    if (bytes)
        *bytes = (unsigned int)n;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ 2D and 3D copies */

static CUDA_MEMCPY2D widen2d(const CUDA_MEMCPY2D_v1 *c)
{
    return (CUDA_MEMCPY2D){
        .srcXInBytes = c->srcXInBytes,
        .srcY = c->srcY,
        .srcMemoryType = c->srcMemoryType,
        .srcHost = c->srcHost,
        .srcDevice = c->srcDevice,
        .srcArray = c->srcArray,
        .srcPitch = c->srcPitch,
        .dstXInBytes = c->dstXInBytes,
        .dstY = c->dstY,
        .dstMemoryType = c->dstMemoryType,
        .dstHost = c->dstHost,
        .dstDevice = c->dstDevice,
        .dstArray = c->dstArray,
        .dstPitch = c->dstPitch,
        .WidthInBytes = c->WidthInBytes,
        .Height = c->Height,
    };
}

static CUDA_MEMCPY3D widen3d(const CUDA_MEMCPY3D_v1 *c)
{
    return (CUDA_MEMCPY3D){
        .srcXInBytes = c->srcXInBytes,
        .srcY = c->srcY,
        .srcZ = c->srcZ,
        .srcLOD = c->srcLOD,
        .srcMemoryType = c->srcMemoryType,
        .srcHost = c->srcHost,
        .srcDevice = c->srcDevice,
        .srcArray = c->srcArray,
        .reserved0 = c->reserved0,
        .srcPitch = c->srcPitch,
        .srcHeight = c->srcHeight,
        .dstXInBytes = c->dstXInBytes,
        .dstY = c->dstY,
        .dstZ = c->dstZ,
        .dstLOD = c->dstLOD,
        .dstMemoryType = c->dstMemoryType,
        .dstHost = c->dstHost,
        .dstDevice = c->dstDevice,
        .dstArray = c->dstArray,
        .reserved1 = c->reserved1,
        .dstPitch = c->dstPitch,
        .dstHeight = c->dstHeight,
        .WidthInBytes = c->WidthInBytes,
        .Height = c->Height,
        .Depth = c->Depth,
    };
}

CUresult om_r_cuMemcpy2D(const CUDA_MEMCPY2D_v1 *pCopy)
{
    CUDA_MEMCPY2D c;

    if (!pCopy)
        return CUDA_ERROR_INVALID_VALUE;
    c = widen2d(pCopy);
    return OM_CALL(cuMemcpy2D_v2)(&c);
}

CUresult om_r_cuMemcpy2DUnaligned(const CUDA_MEMCPY2D_v1 *pCopy)
{
    return om_r_cuMemcpy2D(pCopy);
}

CUresult om_r_cuMemcpy2DAsync(const CUDA_MEMCPY2D_v1 *pCopy, CUstream hStream)
{
    CUDA_MEMCPY2D c;

    if (!pCopy)
        return CUDA_ERROR_INVALID_VALUE;
    c = widen2d(pCopy);
    return OM_CALL(cuMemcpy2DAsync_v2)(&c, hStream);
}

CUresult om_r_cuMemcpy3D(const CUDA_MEMCPY3D_v1 *pCopy)
{
    CUDA_MEMCPY3D c;

    if (!pCopy)
        return CUDA_ERROR_INVALID_VALUE;
    c = widen3d(pCopy);
    return OM_CALL(cuMemcpy3D_v2)(&c);
}

CUresult om_r_cuMemcpy3DAsync(const CUDA_MEMCPY3D_v1 *pCopy, CUstream hStream)
{
    CUDA_MEMCPY3D c;

    if (!pCopy)
        return CUDA_ERROR_INVALID_VALUE;
    c = widen3d(pCopy);
    return OM_CALL(cuMemcpy3DAsync_v2)(&c, hStream);
}

/* ------------------------------------------------------------------ 1D copies and sets */

CUresult om_r_cuMemcpyAtoA(CUarray dstArray, unsigned int dstOffset, CUarray srcArray,
                           unsigned int srcOffset, unsigned int ByteCount)
{
    return OM_CALL(cuMemcpyAtoA_v2)(dstArray, dstOffset, srcArray, srcOffset, ByteCount);
}

CUresult om_r_cuMemcpyAtoD(CUdeviceptr_v1 dstDevice, CUarray srcArray, unsigned int srcOffset,
                           unsigned int ByteCount)
{
    return OM_CALL(cuMemcpyAtoD_v2)(dstDevice, srcArray, srcOffset, ByteCount);
}

CUresult om_r_cuMemcpyAtoH(void *dstHost, CUarray srcArray, unsigned int srcOffset,
                           unsigned int ByteCount)
{
    return OM_CALL(cuMemcpyAtoH_v2)(dstHost, srcArray, srcOffset, ByteCount);
}

CUresult om_r_cuMemcpyAtoHAsync(void *dstHost, CUarray srcArray, unsigned int srcOffset,
                                unsigned int ByteCount, CUstream hStream)
{
    return OM_CALL(cuMemcpyAtoHAsync_v2)(dstHost, srcArray, srcOffset, ByteCount, hStream);
}

CUresult om_r_cuMemcpyDtoA(CUarray dstArray, unsigned int dstOffset, CUdeviceptr_v1 srcDevice,
                           unsigned int ByteCount)
{
    return OM_CALL(cuMemcpyDtoA_v2)(dstArray, dstOffset, srcDevice, ByteCount);
}

CUresult om_r_cuMemcpyHtoA(CUarray dstArray, unsigned int dstOffset, const void *srcHost,
                           unsigned int ByteCount)
{
    return OM_CALL(cuMemcpyHtoA_v2)(dstArray, dstOffset, srcHost, ByteCount);
}

CUresult om_r_cuMemcpyHtoAAsync(CUarray dstArray, unsigned int dstOffset, const void *srcHost,
                                unsigned int ByteCount, CUstream hStream)
{
    return OM_CALL(cuMemcpyHtoAAsync_v2)(dstArray, dstOffset, srcHost, ByteCount, hStream);
}

CUresult om_r_cuMemcpyDtoD(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
                           unsigned int ByteCount)
{
    return OM_CALL(cuMemcpyDtoD_v2)(dstDevice, srcDevice, ByteCount);
}

CUresult om_r_cuMemcpyDtoDAsync(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
                                unsigned int ByteCount, CUstream hStream)
{
    return OM_CALL(cuMemcpyDtoDAsync_v2)(dstDevice, srcDevice, ByteCount, hStream);
}

CUresult om_r_cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
    return OM_CALL(cuMemcpyDtoH_v2)(dstHost, srcDevice, ByteCount);
}

CUresult om_r_cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount,
                                CUstream hStream)
{
    return OM_CALL(cuMemcpyDtoHAsync_v2)(dstHost, srcDevice, ByteCount, hStream);
}

CUresult om_r_cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount)
{
    return OM_CALL(cuMemcpyHtoD_v2)(dstDevice, srcHost, ByteCount);
}

CUresult om_r_cuMemcpyHtoDAsync(CUdeviceptr_v1 dstDevice, const void *srcHost,
                                unsigned int ByteCount, CUstream hStream)
{
    return OM_CALL(cuMemcpyHtoDAsync_v2)(dstDevice, srcHost, ByteCount, hStream);
}

CUresult om_r_cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N)
{
    return OM_CALL(cuMemsetD8_v2)(dstDevice, uc, N);
}

CUresult om_r_cuMemsetD16(CUdeviceptr_v1 dstDevice, unsigned short us, unsigned int N)
{
    return OM_CALL(cuMemsetD16_v2)(dstDevice, us, N);
}

CUresult om_r_cuMemsetD32(CUdeviceptr_v1 dstDevice, unsigned int ui, unsigned int N)
{
    return OM_CALL(cuMemsetD32_v2)(dstDevice, ui, N);
}

CUresult om_r_cuMemsetD2D8(CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned char uc,
                           unsigned int Width, unsigned int Height)
{
    return OM_CALL(cuMemsetD2D8_v2)(dstDevice, dstPitch, uc, Width, Height);
}

CUresult om_r_cuMemsetD2D16(CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned short us,
                            unsigned int Width, unsigned int Height)
{
    return OM_CALL(cuMemsetD2D16_v2)(dstDevice, dstPitch, us, Width, Height);
}

CUresult om_r_cuMemsetD2D32(CUdeviceptr_v1 dstDevice, unsigned int dstPitch, unsigned int ui,
                            unsigned int Width, unsigned int Height)
{
    return OM_CALL(cuMemsetD2D32_v2)(dstDevice, dstPitch, ui, Width, Height);
}
