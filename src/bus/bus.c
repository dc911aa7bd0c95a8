/* The daemon's shared state: allocated once at start-up, freed at exit. */
#include "bus.h"
#include "bus_limits.h"
#include "log.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

/* Worker slots of a pool: its instances, and under "spawn": "per_connection"
 * as many again for workers still exiting after their client left, which
 * do not count against instances (SB-X-21). */
static int slots_of(const sb_pool_config *pool) {
    return pool->per_connection ? 2 * pool->instances : pool->instances;
}

int sb_bus_worker_slots(const sb_config *cfg) {
    int n = 0;
    for (int p = 0; p < cfg->pool_count; p++)
        n += slots_of(&cfg->pools[p]);
    return n;
}

int sb_bus_init(sb_bus *d, const sb_config *cfg, const sb_options *opt) {
    memset(d, 0, sizeof *d);
    d->cfg = cfg;
    d->limits = &cfg->limits;
    d->mode = opt->mode;
    int slots = sb_bus_worker_slots(cfg);
    d->worker_count = slots;
    d->workers = calloc((size_t)slots, sizeof *d->workers);
    d->reaper.workers = malloc((size_t)(slots + SB_REAPER_SPARED) * sizeof *d->reaper.workers);
    if (!d->workers || sb_client_table_init(&d->clients) < 0 || !d->reaper.workers ||
        sb_round_init(&d->round, slots, STDIO_BUS_MAX_CONNECTIONS) < 0 ||
        sb_loop_init(&d->loop) < 0 ||
        sb_router_init(&d->router, slots, STDIO_BUS_MAX_CONNECTIONS) < 0 ||
        sb_router_set_affinity(&d->router, cfg->affinity) < 0 ||
        sb_timers_init(&d->timers, SB_TIMER_PEERS + SB_TIMERS_PER_PEER *
                                                        (slots + STDIO_BUS_MAX_CONNECTIONS)) < 0) {
        sb_error(NULL, "out of memory at start-up");
        return STDIO_BUS_ERR;
    }
    int id = 0;
    for (int p = 0; p < cfg->pool_count; p++) /* SB-I-13: ids in config order */
        for (int k = 0; k < slots_of(&cfg->pools[p]); k++, id++)
            if (sb_worker_init(&d->workers[id], id, &cfg->pools[p], d->limits) < 0) {
                sb_error(NULL, "out of memory at start-up");
                return STDIO_BUS_ERR;
            }
    return STDIO_BUS_OK;
}

void sb_bus_fini(sb_bus *d) {
    sb_router_fini(&d->router);
    sb_timers_fini(&d->timers);
    sb_loop_fini(&d->loop);
    free(d->workers);
    sb_client_table_fini(&d->clients);
    free(d->reaper.workers);
    sb_round_fini(&d->round);
}