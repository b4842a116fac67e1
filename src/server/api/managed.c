/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of managed memory (api/remote/managed.tsv): device memory
 * the client shadows on its side. */
#include "../exec.h"

CUresult om_x_cuMemAllocManaged(struct call *c)
{
    /* Device memory at an address the client then shadows on its side. */
    uint64_t size = 0;
    CUresult rc = om_devmem_for_client(c, true, &size);

    if (rc != CUDA_SUCCESS)
        return rc;
    om_put_u64(&c->out, size);
    return CUDA_SUCCESS;
}
