/* Configuration (spec 9): the JSON file named by --config, validated at
 * start-up against the rules of 9.3 (SB-9.3-*) and our interpretations. */
#ifndef SB_CONFIG_H
#define SB_CONFIG_H

#include "affinity.h"
#include "bus_limits.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    char *id;
    char *command;       /* as written in the file */
    char *resolved;      /* the executable found: command itself, or via PATH */
    char **argv;         /* NULL-terminated: resolved path as argv[0], then args */
    int instances;       /* with per_connection: the most workers at once */
    bool affinity;       /* "affinity": "connection" (SB-X-10) */
    bool per_connection; /* "spawn": "per_connection" (SB-X-15) */
} sb_pool_config;

typedef enum { SB_ORPHAN_DISCARD = 0, SB_ORPHAN_ERROR } sb_orphan_policy;

typedef struct {
    sb_pool_config *pools;
    int pool_count;
    int worker_count; /* sum of instances */
    sb_limits limits;
    sb_orphan_policy orphan_policy;
    sb_affinity_mode affinity; /* the pools', which all agree (SB-X-10) */
} sb_config;

/* Parses and validates the JSON text text[0..len). On success returns 0
 * and fills *cfg (owned by the caller: release with sb_config_fini). On
 * failure returns STDIO_BUS_EINVAL and writes one line naming the field and
 * the problem into err (e.g. "pools[1].instances: must be an integer >= 1").
 * Unknown keys are reported through warn(ctx, key) and otherwise ignored. */
int sb_config_parse(const char *text, size_t len, sb_config *cfg, char *err, size_t err_size,
                    void (*warn)(void *ctx, const char *path), void *warn_ctx);

/* Reads the file at path and parses it as above; a read failure is
 * reported in err too. */
int sb_config_load(const char *path, sb_config *cfg, char *err, size_t err_size,
                   void (*warn)(void *ctx, const char *path), void *warn_ctx);

void sb_config_fini(sb_config *cfg);

#endif
