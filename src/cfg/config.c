#include "config.h"
#include "fields.h"
#include "status.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <linux/limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* More workers than this cannot all hold three fds each under
 * MAX_CONNECTIONS and still leave room for clients. */
#define SB_MAX_TOTAL_INSTANCES 256

typedef struct {
    char *err;
    size_t err_size;
    void (*warn)(void *ctx, const char *path);
    void *warn_ctx;
} parse_ctx;

static int fail(parse_ctx *pc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parse_ctx *pc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pc->err, pc->err_size, fmt, ap);
    va_end(ap);
    return STDIO_BUS_EINVAL;
}

static void warn_unknown(parse_ctx *pc, const char *path) {
    if (pc->warn)
        pc->warn(pc->warn_ctx, path);
}

/* Copies s for an error message: control bytes become \xNN, so err stays
 * one line whatever the file holds (SB-I-20); at most max bytes of s. */
static const char *printable(char *out, size_t size, const char *s, size_t max) {
    size_t n = 0;
    for (size_t i = 0; s[i] && i < max && n + 5 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f)
            n += (size_t)snprintf(out + n, size - n, "\\x%02x", c);
        else
            out[n++] = (char)c;
    }
    out[n] = '\0';
    return out;
}

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *copy = malloc(n);
    if (copy)
        memcpy(copy, s, n);
    return copy;
}

static int is_executable_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* SB-9.3-3 and SB-I-20: a command is a path to an executable regular file,
 * or a bare name found on PATH (as execvp would). Returns a malloc'd path. */
static char *resolve_command(const char *command) {
    if (strchr(command, '/'))
        return is_executable_file(command) ? dup_string(command) : NULL;
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char candidate[PATH_MAX];
    while (*path) {
        const char *end = strchr(path, ':');
        size_t dir_len = end ? (size_t)(end - path) : strlen(path);
        int n = snprintf(candidate, sizeof candidate, "%.*s/%s", (int)dir_len, dir_len ? path : ".",
                         command);
        if (n > 0 && (size_t)n < sizeof candidate && is_executable_file(candidate))
            return dup_string(candidate);
        if (!end)
            break;
        path = end + 1;
    }
    return NULL;
}

static int get_int(parse_ctx *pc, const cJSON *item, const char *path, long min, long max,
                   long *out) {
    if (!cJSON_IsNumber(item) || item->valuedouble != floor(item->valuedouble) ||
        item->valuedouble < (double)min || item->valuedouble > (double)max)
        return fail(pc, "%s: must be an integer >= %ld%s", path, min,
                    max < LONG_MAX ? " and within range" : "");
    *out = (long)item->valuedouble;
    return STDIO_BUS_OK;
}

/* SB-X-10, SB-X-15: "affinity" is "none" (the default) or "connection";
 * "spawn" is "at_start" (the default) or "per_connection", which implies
 * connection affinity. */
static int parse_affinity(parse_ctx *pc, const cJSON *item, int index, sb_pool_config *pool) {
    const cJSON *affinity = cJSON_GetObjectItemCaseSensitive(item, "affinity");
    const cJSON *spawn = cJSON_GetObjectItemCaseSensitive(item, "spawn");
    if (affinity) {
        if (cJSON_IsString(affinity) && strcmp(affinity->valuestring, "connection") == 0)
            pool->affinity = true;
        else if (!cJSON_IsString(affinity) || strcmp(affinity->valuestring, "none") != 0)
            return fail(pc, "pools[%d].affinity: must be \"none\" or \"connection\"", index);
    }
    if (spawn) {
        if (cJSON_IsString(spawn) && strcmp(spawn->valuestring, "per_connection") == 0)
            pool->per_connection = true;
        else if (!cJSON_IsString(spawn) || strcmp(spawn->valuestring, "at_start") != 0)
            return fail(pc, "pools[%d].spawn: must be \"at_start\" or \"per_connection\"", index);
    }
    if (pool->per_connection && affinity && !pool->affinity)
        return fail(pc, "pools[%d].spawn: \"per_connection\" needs \"affinity\": \"connection\"",
                    index);
    if (pool->per_connection)
        pool->affinity = true;
    return STDIO_BUS_OK;
}

static int parse_pool(parse_ctx *pc, const cJSON *item, int index, sb_pool_config *pool) {
    char path[96];
    if (!cJSON_IsObject(item))
        return fail(pc, "pools[%d]: must be an object", index);

    const cJSON *field;
    cJSON_ArrayForEach(field, item) {
        const char *k = field->string;
        if (strcmp(k, "id") && strcmp(k, "command") && strcmp(k, "args") &&
            strcmp(k, "instances") && strcmp(k, "affinity") && strcmp(k, "spawn")) {
            snprintf(path, sizeof path, "pools[%d].%.40s", index, k);
            warn_unknown(pc, path);
        }
    }

    const cJSON *id = cJSON_GetObjectItemCaseSensitive(item, "id");
    if (!id)
        return fail(pc, "pools[%d].id: required", index);
    if (!cJSON_IsString(id) || id->valuestring[0] == '\0')
        return fail(pc, "pools[%d].id: must be a non-empty string", index);

    const cJSON *command = cJSON_GetObjectItemCaseSensitive(item, "command");
    if (!command)
        return fail(pc, "pools[%d].command: required", index);
    if (!cJSON_IsString(command) || command->valuestring[0] == '\0')
        return fail(pc, "pools[%d].command: must be a non-empty string", index);

    const cJSON *instances = cJSON_GetObjectItemCaseSensitive(item, "instances");
    if (!instances)
        return fail(pc, "pools[%d].instances: required", index);
    long count = 0;
    snprintf(path, sizeof path, "pools[%d].instances", index);
    if (get_int(pc, instances, path, 1, SB_MAX_TOTAL_INSTANCES, &count) < 0)
        return fail(pc, "%s: must be an integer >= 1 (at most %d)", path, SB_MAX_TOTAL_INSTANCES);

    const cJSON *args = cJSON_GetObjectItemCaseSensitive(item, "args");
    int argc = 0;
    if (args) {
        if (!cJSON_IsArray(args))
            return fail(pc, "pools[%d].args: must be an array of strings", index);
        const cJSON *arg;
        cJSON_ArrayForEach(arg, args) {
            if (!cJSON_IsString(arg))
                return fail(pc, "pools[%d].args[%d]: must be a string", index, argc);
            argc++;
        }
    }

    if (parse_affinity(pc, item, index, pool) < 0)
        return STDIO_BUS_EINVAL;

    pool->id = dup_string(id->valuestring);
    pool->command = dup_string(command->valuestring);
    pool->instances = (int)count;
    pool->argv = calloc((size_t)argc + 2, sizeof *pool->argv);
    if (!pool->id || !pool->command || !pool->argv)
        return fail(pc, "pools[%d]: out of memory", index);

    pool->resolved = resolve_command(command->valuestring);
    char shown[256];
    if (!pool->resolved)
        return fail(pc, "pools[%d].command: \"%s\" is not an executable file%s", index,
                    printable(shown, sizeof shown, command->valuestring, 200),
                    strchr(command->valuestring, '/') ? "" : " on PATH");
    pool->argv[0] = dup_string(pool->resolved);
    if (!pool->argv[0])
        return fail(pc, "pools[%d]: out of memory", index);
    int a = 1;
    if (args) {
        const cJSON *arg;
        cJSON_ArrayForEach(arg, args) {
            pool->argv[a] = dup_string(arg->valuestring);
            if (!pool->argv[a++])
                return fail(pc, "pools[%d]: out of memory", index);
        }
    }
    return STDIO_BUS_OK;
}

typedef struct {
    const char *key;
    long min, max;
    size_t offset;
    int is_size; /* size_t field, else int/long by width below */
    int is_long;
} limit_field;

static const limit_field limit_fields[] = {
    {"max_input_buffer", 64, 1L << 30, offsetof(sb_limits, max_input_buffer), 1, 0},
    {"max_output_queue", 1, 1L << 34, offsetof(sb_limits, max_output_queue), 1, 0},
    {"max_restarts", 0, 10000, offsetof(sb_limits, max_restarts), 0, 0},
    {"restart_window_sec", 1, 86400 * 365, offsetof(sb_limits, restart_window_sec), 0, 0},
    {"drain_timeout_sec", 1, 86400, offsetof(sb_limits, drain_timeout_sec), 0, 0},
    {"backpressure_timeout_sec", 1, 86400 * 365, offsetof(sb_limits, backpressure_timeout_sec), 0,
     0},
    {"restart_backoff_ms", 1, 3600000, offsetof(sb_limits, restart_backoff_ms), 0, 1},
    {"restart_backoff_max_ms", 1, 86400000, offsetof(sb_limits, restart_backoff_max_ms), 0, 1},
    {"max_client_memory", 1, 1L << 40, offsetof(sb_limits, max_client_memory), 1, 0},
    {"stop_grace_ms", 0, 86400000, offsetof(sb_limits, stop_grace_ms), 0, 1}, /* SB-X-19 */
};

static int parse_limits(parse_ctx *pc, const cJSON *limits, sb_limits *out) {
    if (!cJSON_IsObject(limits))
        return fail(pc, "limits: must be an object");
    const cJSON *field;
    cJSON_ArrayForEach(field, limits) {
        const limit_field *lf = NULL;
        for (size_t i = 0; i < sizeof limit_fields / sizeof *limit_fields; i++)
            if (strcmp(field->string, limit_fields[i].key) == 0)
                lf = &limit_fields[i];
        char path[96];
        snprintf(path, sizeof path, "limits.%.60s", field->string);
        if (!lf) {
            warn_unknown(pc, path);
            continue;
        }
        if (cJSON_GetObjectItemCaseSensitive(limits, field->string) != field)
            continue; /* a repeated key: the first occurrence counts, as everywhere */
        long value = 0;
        if (get_int(pc, field, path, lf->min, lf->max, &value) < 0)
            return fail(pc, "%s: must be an integer >= %ld (at most %ld)", path, lf->min, lf->max);
        char *slot = (char *)out + lf->offset;
        if (lf->is_size)
            *(size_t *)slot = (size_t)value;
        else if (lf->is_long)
            *(long *)slot = value;
        else
            *(int *)slot = (int)value;
    }
    if (out->restart_backoff_max_ms < out->restart_backoff_ms)
        out->restart_backoff_max_ms = out->restart_backoff_ms;
    return STDIO_BUS_OK;
}

static void set_default_limits(sb_limits *l) {
    /* SB-9.3-5, SB-9.3-6: omitted limits take the defaults of 8.1. */
    l->max_input_buffer = SB_DEFAULT_MAX_INPUT_BUFFER;
    l->max_output_queue = SB_DEFAULT_MAX_OUTPUT_QUEUE;
    l->max_restarts = SB_DEFAULT_MAX_RESTARTS;
    l->restart_window_sec = SB_DEFAULT_RESTART_WINDOW_SEC;
    l->drain_timeout_sec = SB_DEFAULT_DRAIN_TIMEOUT_SEC;
    l->backpressure_timeout_sec = SB_DEFAULT_BACKPRESSURE_TIMEOUT_SEC;
    l->restart_backoff_ms = SB_DEFAULT_RESTART_BACKOFF_MS;
    l->restart_backoff_max_ms = SB_DEFAULT_RESTART_BACKOFF_MAX_MS;
    l->stop_grace_ms = SB_DEFAULT_STOP_GRACE_MS;
}

static int parse_root(parse_ctx *pc, const cJSON *root, sb_config *cfg) {
    if (!cJSON_IsObject(root))
        return fail(pc, "(top level): must be a JSON object");

    const cJSON *field;
    cJSON_ArrayForEach(field, root) {
        const char *k = field->string;
        if (strcmp(k, "pools") && strcmp(k, "limits") && strcmp(k, "orphan_policy"))
            warn_unknown(pc, k);
    }

    const cJSON *pools = cJSON_GetObjectItemCaseSensitive(root, "pools");
    if (!pools)
        return fail(pc, "pools: required");
    if (!cJSON_IsArray(pools))
        return fail(pc, "pools: must be an array");
    int count = cJSON_GetArraySize(pools);
    if (count < 1) /* SB-9.3-1 */
        return fail(pc, "pools: must contain at least one pool");

    cfg->pools = calloc((size_t)count, sizeof *cfg->pools);
    if (!cfg->pools)
        return fail(pc, "pools: out of memory");
    cfg->pool_count = count;
    int index = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, pools) {
        int rc = parse_pool(pc, item, index, &cfg->pools[index]);
        if (rc < 0)
            return rc;
        for (int j = 0; j < index; j++) /* SB-9.3-2 */
            if (strcmp(cfg->pools[j].id, cfg->pools[index].id) == 0) {
                char shown[128];
                return fail(pc, "pools[%d].id: \"%s\" is already used by pools[%d]", index,
                            printable(shown, sizeof shown, cfg->pools[index].id, 100), j);
            }
        cfg->worker_count += cfg->pools[index].instances;
        if (index > 0 && (cfg->pools[index].affinity != cfg->pools[0].affinity ||
                          cfg->pools[index].per_connection || cfg->pools[0].per_connection))
            /* A client cannot choose a pool (spec 6.1), so one connection
             * would otherwise have its messages on two kinds of worker. */
            return fail(pc, "pools[%d]: %s", index,
                        cfg->pools[index].per_connection || cfg->pools[0].per_connection
                            ? "a pool with \"spawn\": \"per_connection\" must be the only pool"
                            : "every pool must have the same \"affinity\"");
        index++;
    }
    cfg->affinity = cfg->pools[0].per_connection ? SB_AFFINITY_EXCLUSIVE
                    : cfg->pools[0].affinity     ? SB_AFFINITY_CONNECTION
                                                 : SB_AFFINITY_NONE;
    if (cfg->worker_count > SB_MAX_TOTAL_INSTANCES)
        return fail(pc, "pools: %d instances in total, at most %d are supported", cfg->worker_count,
                    SB_MAX_TOTAL_INSTANCES);

    const cJSON *limits = cJSON_GetObjectItemCaseSensitive(root, "limits");
    if (limits && parse_limits(pc, limits, &cfg->limits) < 0)
        return STDIO_BUS_EINVAL;

    const cJSON *orphan = cJSON_GetObjectItemCaseSensitive(root, "orphan_policy");
    if (orphan) {
        if (cJSON_IsString(orphan) && strcmp(orphan->valuestring, "discard") == 0)
            cfg->orphan_policy = SB_ORPHAN_DISCARD;
        else if (cJSON_IsString(orphan) && strcmp(orphan->valuestring, "error") == 0)
            cfg->orphan_policy = SB_ORPHAN_ERROR;
        else
            return fail(pc, "orphan_policy: must be \"discard\" or \"error\"");
    }
    return STDIO_BUS_OK;
}

int sb_config_parse(const char *text, size_t len, sb_config *cfg, char *err, size_t err_size,
                    void (*warn)(void *ctx, const char *path), void *warn_ctx) {
    parse_ctx pc = {err, err_size, warn, warn_ctx};
    memset(cfg, 0, sizeof *cfg);
    set_default_limits(&cfg->limits);
    err[0] = '\0';

    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t offset = end ? (size_t)(end - text) : 0;
        return fail(&pc, "(file): not valid JSON near byte %zu", offset);
    }
    /* One JSON text (RFC 8259): only whitespace may follow the value. */
    size_t offset = (size_t)(end - text);
    while (offset < len && strchr(" \t\r\n", text[offset]) && text[offset] != '\0')
        offset++;
    if (offset < len) {
        cJSON_Delete(root);
        return fail(&pc, "(file): not valid JSON: unexpected text near byte %zu", offset);
    }
    /* SB-I-20: strict JSON. cJSON also takes leading zeros, raw control
     * characters in strings and a few more; the routing-field scanner
     * does not. */
    sb_fields strict;
    if (sb_fields_parse(text, len, &strict) == STDIO_BUS_ERR) {
        cJSON_Delete(root);
        return fail(&pc, "(file): not valid JSON (RFC 8259)");
    }
    int rc = parse_root(&pc, root, cfg);
    cJSON_Delete(root);
    if (rc < 0)
        sb_config_fini(cfg);
    return rc;
}

int sb_config_load(const char *path, sb_config *cfg, char *err, size_t err_size,
                   void (*warn)(void *ctx, const char *path), void *warn_ctx) {
    memset(cfg, 0, sizeof *cfg);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, err_size, "%s: cannot open: %s", path, strerror(errno));
        return STDIO_BUS_ERR;
    }
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            if (cap > (16u << 20)) {
                snprintf(err, err_size, "%s: larger than 16 MiB", path);
                free(text);
                fclose(f);
                return STDIO_BUS_EINVAL;
            }
            char *grown = realloc(text, cap);
            if (!grown) {
                snprintf(err, err_size, "%s: out of memory", path);
                free(text);
                fclose(f);
                return STDIO_BUS_ERR;
            }
            text = grown;
        }
        size_t n = fread(text + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    int read_failed = ferror(f);
    fclose(f);
    if (read_failed) {
        snprintf(err, err_size, "%s: read error", path);
        free(text);
        return STDIO_BUS_ERR;
    }
    int rc = sb_config_parse(text, len, cfg, err, err_size, warn, warn_ctx);
    free(text);
    return rc;
}

void sb_config_fini(sb_config *cfg) {
    for (int i = 0; i < cfg->pool_count; i++) {
        sb_pool_config *p = &cfg->pools[i];
        if (p->argv)
            for (char **a = p->argv; *a; a++)
                free(*a);
        free(p->argv);
        free(p->id);
        free(p->command);
        free(p->resolved);
    }
    free(cfg->pools);
    memset(cfg, 0, sizeof *cfg);
}
