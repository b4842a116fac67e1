/* SPDX-License-Identifier: MIT */
/*
 * The client's device numbering. A client's CUDA_VISIBLE_DEVICES picks and orders a subset of
 * the server's devices (the daemon resolves it: common/visible.c); every device ordinal a client
 * passes is mapped here to the server's before the driver sees it, and every ordinal the driver
 * answers is mapped back. The session keeps the map (s->devmap, fixed at its start).
 */
#include "exec.h"

#include <stdlib.h>

int om_dev_in(const struct session *s, uint64_t cdev)
{
    return cdev < s->devmap.count ? (int)s->devmap.server[cdev] : -1;
}

int om_dev_out(const struct session *s, int sdev)
{
    for (uint32_t i = 0; i < s->devmap.count; i++)
        if ((int)s->devmap.server[i] == sdev)
            return (int)i;
    return -1;
}

CUresult om_loc_in(const struct session *s, CUmemLocation *loc)
{
    int d;

    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_SUCCESS; /* host and NUMA locations name no device */
    if ((d = om_dev_in(s, (uint64_t)(int64_t)loc->id)) < 0 || loc->id < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    loc->id = d;
    return CUDA_SUCCESS;
}

void om_loc_out(const struct session *s, CUmemLocation *loc)
{
    if (loc->type == CU_MEM_LOCATION_TYPE_DEVICE)
        loc->id = om_dev_out(s, loc->id); /* -1: a device the client does not see */
}

/* The device of the client's streams and pools: noted only where it is not the session's first
 * device (a client of one device keeps the list empty). */
int om_first_device(const struct session *s)
{
    return s->devmap.count ? (int)s->devmap.server[0] : 0;
}

int om_handle_device(const struct session *s, uint64_t h)
{
    for (size_t i = 0; i < s->nhandle_devs; i++)
        if (s->handle_devs[i].handle == h)
            return s->handle_devs[i].dev;
    return om_first_device(s);
}

bool om_note_device(struct session *s, uint64_t h, int dev)
{
    if (dev == om_first_device(s))
        return true;
    if (!om_grow((void **)&s->handle_devs, s->nhandle_devs, &s->handle_devs_cap,
                 sizeof(*s->handle_devs), 8))
        return false;
    s->handle_devs[s->nhandle_devs++] = (struct om_handle_dev){h, dev};
    return true;
}

void om_forget_device(struct session *s, uint64_t h)
{
    for (size_t i = 0; i < s->nhandle_devs; i++)
        if (s->handle_devs[i].handle == h) {
            s->handle_devs[i] = s->handle_devs[--s->nhandle_devs];
            return;
        }
}

void om_handle_devs_release(struct session *s)
{
    free(s->handle_devs);
    s->handle_devs = NULL;
    s->nhandle_devs = s->handle_devs_cap = 0;
}

/* out:dev (cuDeviceGetByPCIBusId): a device the client does not see is none, as it is for a
 * process whose CUDA_VISIBLE_DEVICES leaves it out. */
CUresult om_answer_dev(struct call *c, CUdevice *dev)
{
    int d = om_dev_out(c->s, *dev);

    if (d < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *dev = d;
    return CUDA_SUCCESS;
}

/* out:allocprop (cuMemGetAllocationPropertiesFromHandle): where the allocation lives. */
CUresult om_answer_allocprop(struct call *c, CUmemAllocationProp *p)
{
    om_loc_out(c->s, &p->location);
    return CUDA_SUCCESS;
}

/* arr:access (cuMemPoolSetAccess): each device a pool's access names. */
CUresult om_check_access(struct call *c, CUmemAccessDesc *v, size_t n)
{
    CUresult rc;

    for (size_t i = 0; i < n; i++)
        if ((rc = om_loc_in(c->s, &v[i].location)) != CUDA_SUCCESS)
            return rc;
    return CUDA_SUCCESS;
}
