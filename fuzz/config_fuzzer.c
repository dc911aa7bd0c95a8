/* Fuzz target for the configuration parser, sb_config_parse (spec 9,
 * SB-I-20).
 *
 * Every input is parsed once. The result is judged against an oracle
 * written here, apart from src/cfg/config.c:
 *   - strict JSON is decided by sb_fields_parse (RFC 8259, no cJSON), and
 *     only a JSON object can be a configuration;
 *   - the rules of 9.2, 9.3 and SB-I-20 are evaluated on cJSON's tree, and
 *     every violated rule adds its field path to a list.
 * A success must come with an empty list and a configuration that says
 * exactly what the file says (pools, ids, argv, instances, limits with
 * their defaults, orphan_policy) and satisfies every rule. A failure must
 * come with a non-empty list, and `err` must be one line starting with one
 * of those field paths, then ": ". No crash, no leak (ASan/LSan), and
 * *cfg is left zeroed after a failure and after sb_config_fini.
 *
 * Checks for bugs that are reported but not yet fixed can be relaxed for
 * a campaign, so it goes on finding others:
 *   -DSB_FUZZ_ALLOW_LENIENT_JSON   what cJSON accepts beyond RFC 8259 may be
 *                                  accepted or rejected as "(file)"
 *   -DSB_FUZZ_ALLOW_MULTILINE_ERR  accept a newline inside err
 *   -DSB_FUZZ_ALLOW_LAST_DUPLICATE a limit given twice may take its last
 *                                  value (everywhere else, and in SB-I-19,
 *                                  the first occurrence counts) */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "config.h"
#include "fields.h"
#include "status.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "config_fuzzer: %s:%d: check failed: %s\n", __FILE__, __LINE__,        \
                    #cond);                                                                        \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The daemon's own buffer (src/main.c). */
#define ERR_SIZE       512
#define MAX_VIOLATIONS 64
#define PATH_SIZE      128
/* SB-I-20 leaves the upper bound open; config.c documents this one. */
#define MAX_TOTAL_INSTANCES 256

typedef struct {
    char paths[MAX_VIOLATIONS][PATH_SIZE];
    int count;
    int overflow; /* more violations than slots: any path is accepted */
} violations;

static void violate(violations *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void violate(violations *v, const char *fmt, ...) {
    if (v->count == MAX_VIOLATIONS) {
        v->overflow = 1;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->paths[v->count++], PATH_SIZE, fmt, ap);
    va_end(ap);
}

/* The limits of 8.1 plus our two extensions (SB-X-6, SB-X-7): spec minimum,
 * our documented maximum, and the default. */
typedef struct {
    const char *key;
    double min, max;
    long def;
} limit_rule;

static const limit_rule limit_rules[] = {
    {"max_input_buffer", 64, 1073741824.0, 1048576},
    {"max_output_queue", 1, 17179869184.0, 4194304},
    {"max_restarts", 0, 10000, 5},
    {"restart_window_sec", 1, 86400.0 * 365, 60},
    {"drain_timeout_sec", 1, 86400, 30},
    {"backpressure_timeout_sec", 1, 86400.0 * 365, 60},
    {"restart_backoff_ms", 1, 3600000, 1000},
    {"restart_backoff_max_ms", 1, 86400000, 30000},
};
#define LIMIT_RULES (sizeof limit_rules / sizeof *limit_rules)

static long configured_limit(const sb_limits *l, size_t i) {
    switch (i) {
    case 0:
        return (long)l->max_input_buffer;
    case 1:
        return (long)l->max_output_queue;
    case 2:
        return l->max_restarts;
    case 3:
        return l->restart_window_sec;
    case 4:
        return l->drain_timeout_sec;
    case 5:
        return l->backpressure_timeout_sec;
    case 6:
        return l->restart_backoff_ms;
    default:
        return l->restart_backoff_max_ms;
    }
}

static int is_integer_in(const cJSON *item, double min, double max) {
    return cJSON_IsNumber(item) && item->valuedouble == floor(item->valuedouble) &&
           item->valuedouble >= min && item->valuedouble <= max;
}

static int is_exec_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* What execvp would run for command, as SB-I-20 reads "valid executable
 * path": a name with a '/' is taken as is, a bare name is searched on PATH
 * (an empty PATH entry meaning the current directory). Writes the path
 * into out and returns 1, or returns 0. */
static int oracle_resolve(const char *command, char *out, size_t out_size) {
    if (strchr(command, '/')) {
        if (!is_exec_file(command) || strlen(command) >= out_size)
            return 0;
        strcpy(out, command);
        return 1;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (;;) {
        const char *colon = strchr(path, ':');
        size_t dir_len = colon ? (size_t)(colon - path) : strlen(path);
        int n = snprintf(out, out_size, "%.*s/%s", (int)dir_len, dir_len ? path : ".", command);
        if (n > 0 && (size_t)n < out_size && is_exec_file(out))
            return 1;
        if (colon == NULL)
            return 0;
        path = colon + 1;
    }
}

static int is_known(const char *key, const char *const *known) {
    for (; *known; known++)
        if (strcmp(key, *known) == 0)
            return 1;
    return 0;
}

static const char *const root_keys[] = {"pools", "limits", "orphan_policy", NULL};
static const char *const pool_keys[] = {"id", "command", "args", "instances", NULL};

/* Collects every rule of 9.2, 9.3 and SB-I-20 that the tree breaks, and
 * counts the unknown keys a successful parse must warn about. */
static void oracle_check(const cJSON *root, violations *v, int *unknown_keys) {
    *unknown_keys = 0;
    if (!cJSON_IsObject(root)) {
        violate(v, "(top level)");
        return;
    }
    const cJSON *member;
    cJSON_ArrayForEach(member, root) {
        if (!is_known(member->string, root_keys))
            ++*unknown_keys;
    }

    const cJSON *pools = cJSON_GetObjectItemCaseSensitive(root, "pools");
    if (!cJSON_IsArray(pools) || cJSON_GetArraySize(pools) < 1) { /* SB-9.3-1 */
        violate(v, "pools");
    } else {
        int index = 0;
        double total = 0;
        const cJSON *pool;
        cJSON_ArrayForEach(pool, pools) {
            if (!cJSON_IsObject(pool)) {
                violate(v, "pools[%d]", index++);
                continue;
            }
            cJSON_ArrayForEach(member, pool) {
                if (!is_known(member->string, pool_keys))
                    ++*unknown_keys;
            }
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(pool, "id");
            const cJSON *command = cJSON_GetObjectItemCaseSensitive(pool, "command");
            const cJSON *instances = cJSON_GetObjectItemCaseSensitive(pool, "instances");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(pool, "args");
            if (!cJSON_IsString(id) || id->valuestring[0] == '\0') { /* SB-9.2-1 */
                violate(v, "pools[%d].id", index);
            } else {
                /* SB-9.3-2: the later of two equal ids is the bad one. */
                int earlier = 0;
                const cJSON *other;
                cJSON_ArrayForEach(other, pools) {
                    if (earlier++ == index)
                        break;
                    const cJSON *other_id = cJSON_GetObjectItemCaseSensitive(other, "id");
                    if (cJSON_IsObject(other) && cJSON_IsString(other_id) &&
                        strcmp(other_id->valuestring, id->valuestring) == 0) {
                        violate(v, "pools[%d].id", index);
                        break;
                    }
                }
            }
            char resolved[PATH_MAX];
            if (!cJSON_IsString(command) || command->valuestring[0] == '\0' ||    /* SB-9.2-2 */
                !oracle_resolve(command->valuestring, resolved, sizeof resolved)) /* SB-9.3-3 */
                violate(v, "pools[%d].command", index);
            if (!is_integer_in(instances, 1, MAX_TOTAL_INSTANCES)) /* SB-9.2-4, SB-9.3-4 */
                violate(v, "pools[%d].instances", index);
            else
                total += instances->valuedouble;
            if (args) {
                if (!cJSON_IsArray(args)) {
                    violate(v, "pools[%d].args", index);
                } else {
                    int a = 0;
                    const cJSON *arg;
                    cJSON_ArrayForEach(arg, args) {
                        if (!cJSON_IsString(arg))
                            violate(v, "pools[%d].args[%d]", index, a);
                        a++;
                    }
                }
            }
            index++;
        }
        if (total > MAX_TOTAL_INSTANCES)
            violate(v, "pools");
    }

    const cJSON *limits = cJSON_GetObjectItemCaseSensitive(root, "limits");
    if (limits) {
        if (!cJSON_IsObject(limits)) {
            violate(v, "limits");
        } else {
            cJSON_ArrayForEach(member, limits) {
                size_t i = 0;
                while (i < LIMIT_RULES && strcmp(member->string, limit_rules[i].key) != 0)
                    i++;
                if (i == LIMIT_RULES) {
                    ++*unknown_keys;
                    continue;
                }
#ifndef SB_FUZZ_ALLOW_LAST_DUPLICATE
                /* A repeated key: only the first occurrence counts. */
                if (cJSON_GetObjectItemCaseSensitive(limits, member->string) != member)
                    continue;
#endif
                if (!is_integer_in(member, limit_rules[i].min, limit_rules[i].max))
                    violate(v, "limits.%s", limit_rules[i].key);
            }
        }
    }

    const cJSON *orphan = cJSON_GetObjectItemCaseSensitive(root, "orphan_policy");
    if (orphan && !(cJSON_IsString(orphan) && (strcmp(orphan->valuestring, "discard") == 0 ||
                                               strcmp(orphan->valuestring, "error") == 0)))
        violate(v, "orphan_policy"); /* SB-X-8 */
}

/* The parsed configuration must say what the file says. */
static void check_success(const sb_config *cfg, const cJSON *root, int unknown_keys, int warnings) {
    const cJSON *pools = cJSON_GetObjectItemCaseSensitive(root, "pools");
    CHECK(cfg->pool_count == cJSON_GetArraySize(pools));
    CHECK(cfg->pool_count >= 1 && cfg->pools != NULL);
    int total = 0;
    for (int i = 0; i < cfg->pool_count; i++) {
        const sb_pool_config *p = &cfg->pools[i];
        const cJSON *pool = cJSON_GetArrayItem(pools, i);
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(pool, "args");

        CHECK(p->id && p->id[0] != '\0');
        CHECK(strcmp(p->id, cJSON_GetObjectItemCaseSensitive(pool, "id")->valuestring) == 0);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(p->id, cfg->pools[j].id) != 0);
        CHECK(p->command &&
              strcmp(p->command, cJSON_GetObjectItemCaseSensitive(pool, "command")->valuestring) ==
                  0);
        char resolved[PATH_MAX];
        CHECK(oracle_resolve(p->command, resolved, sizeof resolved));
        CHECK(p->resolved && strcmp(p->resolved, resolved) == 0 && is_exec_file(p->resolved));
        CHECK(p->instances >= 1 && p->instances <= MAX_TOTAL_INSTANCES);
        CHECK(p->instances ==
              (int)cJSON_GetObjectItemCaseSensitive(pool, "instances")->valuedouble);
        total += p->instances;

        /* argv: the resolved path, then args in order, then NULL. */
        CHECK(p->argv && p->argv[0] && strcmp(p->argv[0], p->resolved) == 0);
        CHECK(p->argv[0] != p->resolved); /* each is freed on its own */
        int argc = 1;
        if (args) {
            const cJSON *arg;
            cJSON_ArrayForEach(arg, args) {
                CHECK(p->argv[argc] && strcmp(p->argv[argc], arg->valuestring) == 0);
                argc++;
            }
        }
        CHECK(p->argv[argc] == NULL);
    }
    CHECK(cfg->worker_count == total && total <= MAX_TOTAL_INSTANCES);

    /* SB-9.2-5, SB-9.3-5, SB-9.3-6: given values, else the defaults. */
    const cJSON *limits = cJSON_GetObjectItemCaseSensitive(root, "limits");
    long expect[LIMIT_RULES], last[LIMIT_RULES];
    for (size_t i = 0; i < LIMIT_RULES; i++) {
        /* A key given twice: the first occurrence, as for every other key
         * (cJSON's lookup) and for routing fields (SB-I-19). */
        const cJSON *item =
            limits ? cJSON_GetObjectItemCaseSensitive(limits, limit_rules[i].key) : NULL;
        expect[i] = last[i] = item ? (long)item->valuedouble : limit_rules[i].def;
        const cJSON *member;
        if (limits)
            cJSON_ArrayForEach(member, limits) {
                /* Only a value in the rule's range converts to long without
                 * overflow (a later duplicate of 1e300 is undefined as long);
                 * an out-of-range one could not have been taken anyway. */
                if (strcmp(member->string, limit_rules[i].key) == 0 &&
                    is_integer_in(member, limit_rules[i].min, limit_rules[i].max))
                    last[i] = (long)member->valuedouble;
            }
    }
    if (expect[7] < expect[6]) /* SB-X-7: the cap is raised to the first delay */
        expect[7] = expect[6];
    if (last[7] < last[6])
        last[7] = last[6];
    for (size_t i = 0; i < LIMIT_RULES; i++) {
        long got = configured_limit(&cfg->limits, i);
#ifdef SB_FUZZ_ALLOW_LAST_DUPLICATE
        if (got == last[i])
            continue;
#endif
        if (got != expect[i]) {
            fprintf(stderr, "config_fuzzer: limits.%s is %ld, expected %ld\n", limit_rules[i].key,
                    got, expect[i]);
            abort();
        }
    }

    const cJSON *orphan = cJSON_GetObjectItemCaseSensitive(root, "orphan_policy");
    sb_orphan_policy policy = SB_ORPHAN_DISCARD;
    if (orphan && strcmp(orphan->valuestring, "error") == 0)
        policy = SB_ORPHAN_ERROR;
    CHECK(cfg->orphan_policy == policy);

    /* SB-I-20: every unknown key is warned about, once. */
    CHECK(warnings == unknown_keys);
}

/* err must be one line: "<field path>: <problem>", the path one of the
 * rules broken (so a reader is sent to the right place). */
static void check_error(const char *err, const violations *v) {
    size_t len = strnlen(err, ERR_SIZE);
    CHECK(len > 0 && len < ERR_SIZE);
#ifndef SB_FUZZ_ALLOW_MULTILINE_ERR
    if (memchr(err, '\n', len) != NULL) {
        fprintf(stderr, "config_fuzzer: err is more than one line: \"%s\"\n", err);
        abort();
    }
#endif
    const char *colon = strstr(err, ": ");
    CHECK(colon != NULL);
    size_t path_len = (size_t)(colon - err);
    if (v->overflow)
        return;
    for (int i = 0; i < v->count; i++)
        if (strlen(v->paths[i]) == path_len && memcmp(v->paths[i], err, path_len) == 0)
            return;
    fprintf(stderr, "config_fuzzer: err \"%s\" names none of the %d broken rule(s):\n", err,
            v->count);
    for (int i = 0; i < v->count; i++)
        fprintf(stderr, "  %s\n", v->paths[i]);
    abort();
}

typedef struct {
    int count;
} warn_log;

static void on_warn(void *ctx, const char *path) {
    warn_log *log = ctx;
    CHECK(path != NULL);
    log->count++;
}

static int is_zeroed(const sb_config *cfg) {
    static const sb_config zero;
    return memcmp(cfg, &zero, sizeof zero) == 0;
}

/* Skips JSON whitespace (RFC 8259: space, tab, LF, CR). */
static size_t skip_ws(const char *text, size_t i, size_t len) {
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
        i++;
    return i;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    violations v = {0};
    int unknown_keys = 0;

    /* The oracle's view of the bytes: strict JSON first (SB-I-20: "the file
     * is strict JSON"), then the rules on cJSON's tree. */
    sb_fields ignored;
    int strict = sb_fields_parse(text, size, &ignored);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, size, &end, 0);
    bool file_optional = false; /* "(file)" is a right answer, but not the only one */
    if (root == NULL || skip_ws(text, (size_t)(end - text), size) != size) {
        violate(&v, "(file)"); /* not JSON, or more than one JSON text */
    } else if (strict == STDIO_BUS_ERR) {
        /* RFC 8259 says no where cJSON says yes (leading zeros, raw control
         * characters, bad escapes, ...). */
#ifndef SB_FUZZ_ALLOW_LENIENT_JSON
        violate(&v, "(file)");
#else
        file_optional = true;
#endif
    }
    if (root)
        oracle_check(root, &v, &unknown_keys);

    sb_config cfg;
    char err[ERR_SIZE];
    memset(err, 'X', sizeof err); /* so a missing terminator shows */
    warn_log warnings = {0};
    int rc = sb_config_parse(text, size, &cfg, err, sizeof err, on_warn, &warnings);

    if (rc == STDIO_BUS_OK) {
        if (v.count != 0) {
            fprintf(stderr, "config_fuzzer: accepted, but %d rule(s) are broken:\n", v.count);
            for (int i = 0; i < v.count; i++)
                fprintf(stderr, "  %s\n", v.paths[i]);
            abort();
        }
        CHECK(root != NULL);
        check_success(&cfg, root, unknown_keys, warnings.count);
        sb_config_fini(&cfg);
        CHECK(is_zeroed(&cfg));
    } else {
        CHECK(rc == STDIO_BUS_EINVAL);
        if (file_optional)
            violate(&v, "(file)");
        if (v.count == 0) {
            fprintf(stderr, "config_fuzzer: rejected a valid configuration: %.*s\n",
                    (int)strnlen(err, ERR_SIZE), err);
            abort();
        }
        check_error(err, &v);
        CHECK(cfg.pools == NULL && cfg.pool_count == 0); /* nothing left to free */
    }
    cJSON_Delete(root);
    return 0;
}
