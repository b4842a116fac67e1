/* SPDX-License-Identifier: MIT */
/* Remote mode: the table of remote implementations and the NOT_SUPPORTED stubs (the state
 * layer: gen/remote_stubs.c sets every row's implementation here, shim.c installs them). */
#include "remote.h"
#include "shim.h"

/* An entry point not remoted yet: NOT_SUPPORTED, its name logged once. It
 * never reaches the real driver, which does not know the server's handles. */
static int unsupported(int index)
{
    static unsigned char told[OM_ENTRY_COUNT];

    om_note_once(index, "not supported in remote mode yet (CUDA_ERROR_NOT_SUPPORTED)");
    /* Once per entry point, server.log gets the name too (the shim itself is silent). */
    if (!__atomic_exchange_n(&told[index], 1, __ATOMIC_RELAXED))
        om_post_note_unsupported(index);
    return OM_CUDA_ERROR_NOT_SUPPORTED;
}

#define OM_X_STUB(i, sym, mode)                                                                    \
    static int unsup_##sym(void)                                                                   \
    {                                                                                              \
        return unsupported(i);                                                                     \
    }
OM_ENTRIES(OM_X_STUB)
#undef OM_X_STUB

static void *const unsupported_stubs[OM_ENTRY_COUNT] = {
#define OM_X_REF(i, sym, mode) [i] = (void *)unsup_##sym,
    OM_ENTRIES(OM_X_REF)
#undef OM_X_REF
};

static const unsigned char modes[OM_ENTRY_COUNT] = {
#define OM_X_MODE(i, sym, mode) [i] = OM_ENTRY_##mode,
    OM_ENTRIES(OM_X_MODE)
#undef OM_X_MODE
};

/* Implementations set by the hand-written client sides (NULL: not remoted). */
static void *impl[OM_ENTRY_COUNT];

void om_remote_set(int index, void *fn)
{
    impl[index] = fn;
}

bool om_entry_is_passthrough(int index)
{
    return index >= 0 && index < OM_ENTRY_COUNT && modes[index] == OM_ENTRY_PASSTHROUGH;
}

void *om_remote_entry(int index)
{
    if (impl[index])
        return impl[index];
    switch (modes[index]) {
    case OM_ENTRY_LOCAL: return om_local_fn[index] ? om_local_fn[index] : unsupported_stubs[index];
    case OM_ENTRY_PASSTHROUGH:
        return om_shim.real_fn[index] ? om_shim.real_fn[index] : unsupported_stubs[index];
    default: return unsupported_stubs[index];
    }
}
