/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of the legacy family (api/remote/legacy.tsv):
 * cuTensorMapReplaceAddress, whose opaque map travels both ways. The address is only encoded
 * into the map (the client's kernels read through it as through any pointer they are given);
 * the driver checks the map and the address's alignment. */
#include <string.h>

#include "../exec.h"

CUresult om_x_cuTensorMapReplaceAddress(struct call *c)
{
    const void *b = om_get_bytes(&c->in, sizeof(CUtensorMap));
    uint64_t addr = om_get_u64(&c->in);
    CUtensorMap map;
    CUresult rc = ARGS_OK(c);

    if (rc != CUDA_SUCCESS)
        return rc;
    memcpy(&map, b, sizeof(map));
    rc = ((CUresult(*)(CUtensorMap *, void *))REAL(cuTensorMapReplaceAddress))(
        &map, (void *)(uintptr_t)addr);
    if (rc == CUDA_SUCCESS)
        om_put_bytes(&c->out, &map, sizeof(map));
    return rc;
}
