/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of cluster occupancy queries (api/remote/occupancy.tsv). */
#include <string.h>

#include "../../common/launchattr.h"
#include "../exec.h"

/* ------------------------------------------------------------------ occupancy of clusters */

/* CUlaunchConfig as the driver reads it; its attributes are OM_LAUNCH_ATTR_BYTES each, at most
 * OM_LAUNCH_ATTRS_MAX travel (src/common/launchattr.h). */
struct occ_config {
    unsigned gx, gy, gz, bx, by, bz, smem;
    CUstream stream;
    void *attrs;
    unsigned nattrs;
};

/* The attributes a cluster query may carry: those whose values travel as bytes
 * (src/common/launchattr.h) but an access policy window, which names a device address of the
 * client; an ignored entry too. */
static bool occ_attribute_allowed(int id)
{
    return id == OM_LAUNCH_ATTR_IGNORE ||
           (id != OM_LAUNCH_ATTR_ACCESS_POLICY_WINDOW && om_launch_attr_plain(id));
}

/* The function, the configuration with its stream (the client's, only queried) and checked
 * attributes, then the driver's one int. */
static CUresult cluster_query(struct call *c,
                              CUresult (*query)(int *, CUfunction, const struct occ_config *))
{
    uint64_t k = om_get_u64(&c->in), g = om_get_u64(&c->in), m = om_get_u64(&c->in);
    uint64_t b = om_get_u64(&c->in), smem = om_get_u64(&c->in), sh = om_get_u64(&c->in);
    uint64_t nattrs = om_get_u64(&c->in);
    const void *ap =
        nattrs <= OM_LAUNCH_ATTRS_MAX ? om_get_bytes(&c->in, nattrs * OM_LAUNCH_ATTR_BYTES) : NULL;
    uint8_t attrs[OM_LAUNCH_ATTRS_MAX * OM_LAUNCH_ATTR_BYTES];
    struct occ_config cfg;
    CUresult rc = ARGS_OK(c);
    CUstream st;
    int v = 0;

    if (rc != CUDA_SUCCESS)
        return rc;
    if (nattrs > OM_LAUNCH_ATTRS_MAX || (nattrs && !ap) || smem > UINT32_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    if (nattrs)
        memcpy(attrs, ap, nattrs * OM_LAUNCH_ATTR_BYTES);
    for (uint64_t i = 0; i < nattrs; i++) {
        int id;
        memcpy(&id, attrs + i * OM_LAUNCH_ATTR_BYTES, sizeof(id));
        if (!occ_attribute_allowed(id)) {
            client_err(c->s,
                       "client %d: launch attribute %d in an occupancy query is not supported",
                       (int)c->s->pid, id);
            return CUDA_ERROR_NOT_SUPPORTED;
        }
    }
    if ((rc = om_arg_handle(c, OM_H_FUNCTION, k, false)) != CUDA_SUCCESS)
        return rc;
    st = om_arg_stream(c, sh, false, &rc);
    if (!st)
        return rc;
    cfg = (struct occ_config){
        (unsigned)g,           (unsigned)(g >> 32), (unsigned)m,    (unsigned)(m >> 32),
        (unsigned)b,           (unsigned)(b >> 32), (unsigned)smem, st,
        nattrs ? attrs : NULL, (unsigned)nattrs};
    rc = query(&v, (CUfunction)(uintptr_t)k, &cfg);
    if (rc == CUDA_SUCCESS)
        om_put_u64(&c->out, (uint64_t)(int64_t)v);
    return rc;
}

CUresult om_x_cuOccupancyMaxPotentialClusterSize(struct call *c)
{
    return cluster_query(c, REAL(cuOccupancyMaxPotentialClusterSize));
}

CUresult om_x_cuOccupancyMaxActiveClusters(struct call *c)
{
    return cluster_query(c, REAL(cuOccupancyMaxActiveClusters));
}
