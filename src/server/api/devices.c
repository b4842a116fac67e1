/* SPDX-License-Identifier: MIT */
/* The server's hand-written handlers of the devices family (api/remote/devices.tsv has the
 * rest): the device's memory as the calling client may use it. */
#include "../exec.h"
#include "openmps/ops.h"

/* The answers of the generated rows (api/remote/devices.tsv) the server makes its own. */

/* out:smcount (cuDeviceGetAttribute): the SM count is the client's share's (share.c). */
CUresult om_answer_smcount(struct call *c, int *v, uint64_t attrib, int dev)
{
    if (attrib == CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT) {
        unsigned sms = om_share_client_sms(c->s, dev);
        if (sms && sms < (unsigned)*v)
            *v = (int)sms;
    }
    return CUDA_SUCCESS;
}
