/* SPDX-License-Identifier: MIT */
/* A session's end, as one ordered table of the hooks of the families and of the core (session.c
 * walks it in its worker, once the client is gone, then frees what the session itself holds).
 * The order is the contract: read each line's reason before moving one. */
#include "exec.h"

const struct om_teardown_step om_teardown[] = {
    {"shareable: what it exported, remembered", om_shareable_session_end},
    {"hostnodes: a host function still waited for is given up", om_hostcb_close},
    {"capture: the captures it left open (a capturing stream cannot be waited for)",
     om_graphs_release},
    {"replay: launches it held go out, so that its streams' work is all there",
     om_replay_session_flush},
    {"route: its streams' work done", om_route_session_wait},
    {"syncword: its completion word's page (every write landed), to the pool",
     om_syncword_session_end},
    {"replay: its templates' graphs, once their work is done", om_replay_session_end},
    {"graphmem: graph allocations, before their graphs go", om_graphmem_session_end},
    {"poolmem: its pool memory, before the pools go", om_poolmem_session_end},
    {"ipcstate: what it opened; what it exported stays while opened", om_ipc_session_end},
    {"vmm: its mappings and reservations, before its handles go", om_vmm_session_end},
    {"modref: its libraries held, its module references", om_modref_release},
    {"own: the kinds of api/handles.tsv with a destroy entry", om_own_release},
    {"hostnodes: its records and channel, after its graphs and their work", om_hostcb_release},
    {"linker: the link states' own buffers (own.c destroyed the link states)",
     om_link_forget_session},
    {"ipcstate: its events, a shared one by its last holder", om_ipc_events_session_end},
    {"route: ordering events, blocking sets, its streams untracked", om_route_session_end},
    {"contexts: cuCtxRecordEvent's joining streams", om_ctx_release},
    {"devmap: the devices of its streams and pools", om_handle_devs_release},
    {"green: its green contexts, their streams gone", om_green_release},
    {"share: its shadow streams, its lane", om_share_release},
    {"priority: its client priority counted out", om_priority_release},
    {"route: its default streams, on every device", om_route_defaults_end},
    {"sched: its streams' last kernels", om_sched_session_free},
    {"devmem: its allocations, its cache of freed ones", om_devmem_session_end},
    {"hostmem: its pinned regions, reusable where its process's memory is gone",
     om_hostmem_session_end},
    {NULL, NULL},
};
