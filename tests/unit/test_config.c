/* Unit tests for configuration parsing and validation (src/cfg/config.c;
 * spec 8.1, 9.2, 9.3). Every failure must name the exact field, so an
 * operator can fix the file from the one log line (SB-I-20). */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "status.h"

/* ---- helpers ---------------------------------------------------------- */

/* Unknown-key paths reported through the warn callback. */
typedef struct {
    int count;
    char paths[16][128];
} warnings;

static void record_warning(void *ctx, const char *path) {
    warnings *w = ctx;
    if (w->count < 16)
        snprintf(w->paths[w->count], sizeof w->paths[0], "%s", path);
    w->count++;
}

static bool warned(const warnings *w, const char *path) {
    for (int i = 0; i < w->count && i < 16; i++)
        if (strcmp(w->paths[i], path) == 0)
            return true;
    return false;
}

static char err[512];
static sb_config cfg;
static warnings warns;

static int parse(const char *text) {
    memset(&warns, 0, sizeof warns);
    memset(err, 'x', sizeof err - 1); /* a stale message must not survive */
    err[sizeof err - 1] = '\0';
    return sb_config_parse(text, strlen(text), &cfg, err, sizeof err, record_warning, &warns);
}

/* Parses a text built with printf-style arguments. */
static int parsef(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int parsef(const char *fmt, ...) {
    char text[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    cr_assert(n > 0 && (size_t)n < sizeof text);
    return parse(text);
}

/* Asserts the parse failed with EINVAL and a one-line message that starts
 * with the field path and contains the given words. */
static void expect_error(int rc, const char *field_prefix, const char *words) {
    cr_assert_eq(rc, STDIO_BUS_EINVAL, "rc %d, expected EINVAL (err: %s)", rc, err);
    cr_assert(strncmp(err, field_prefix, strlen(field_prefix)) == 0,
              "error \"%s\" does not start with \"%s\"", err, field_prefix);
    if (words)
        cr_assert(strstr(err, words), "error \"%s\" does not say \"%s\"", err, words);
    cr_assert_null(strchr(err, '\n'), "error is not one line: \"%s\"", err);
    /* A failed parse leaves nothing to free. */
    cr_assert_null(cfg.pools);
    cr_assert_eq(cfg.pool_count, 0);
}

static void expect_ok(int rc) {
    cr_assert_eq(rc, STDIO_BUS_OK, "rc %d, err: %s", rc, err);
    cr_assert_str_empty(err);
}

static void release(void) {
    sb_config_fini(&cfg);
}

#define POOL_SH  "{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":1}"
#define ONE_POOL "{\"pools\":[" POOL_SH "]}"

/* A temporary directory, removed by the fixture's fini. */
static char tmpdir[64];

static void make_tmpdir(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/sb_config_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void remove_tmpdir(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_assert_eq(system(cmd), 0);
    release();
}

static void write_file(const char *path, const char *text, mode_t mode) {
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    cr_assert_eq(fputs(text, f) >= 0, 1);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(path, mode), 0);
}

TestSuite(config, .fini = release);

/* ---- a valid file ----------------------------------------------------- */

Test(config, minimal_pool_parses) {
    expect_ok(parse(ONE_POOL));
    cr_assert_eq(cfg.pool_count, 1);
    cr_assert_eq(cfg.worker_count, 1);
    cr_assert_str_eq(cfg.pools[0].id, "p");
    cr_assert_str_eq(cfg.pools[0].command, "/bin/sh");
    cr_assert_str_eq(cfg.pools[0].resolved, "/bin/sh");
    cr_assert_str_eq(cfg.pools[0].argv[0], "/bin/sh");
    cr_assert_null(cfg.pools[0].argv[1]);
    cr_assert_eq(cfg.pools[0].instances, 1);
    cr_assert_eq(cfg.orphan_policy, SB_ORPHAN_DISCARD);
    cr_assert_eq(warns.count, 0);
}

Test(config, args_follow_the_resolved_command_in_argv) {
    expect_ok(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":2,"
                    "\"args\":[\"-c\",\"exec cat\",\"\"]}]}"));
    char **argv = cfg.pools[0].argv;
    cr_assert_str_eq(argv[0], "/bin/sh");
    cr_assert_str_eq(argv[1], "-c");
    cr_assert_str_eq(argv[2], "exec cat");
    cr_assert_str_eq(argv[3], "");
    cr_assert_null(argv[4]);
}

Test(config, empty_args_array_is_allowed) {
    expect_ok(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":1,"
                    "\"args\":[]}]}"));
    cr_assert_null(cfg.pools[0].argv[1]);
}

Test(config, worker_count_sums_instances_of_every_pool) {
    expect_ok(parse("{\"pools\":["
                    "{\"id\":\"a\",\"command\":\"/bin/sh\",\"instances\":3},"
                    "{\"id\":\"b\",\"command\":\"/bin/true\",\"instances\":4}]}"));
    cr_assert_eq(cfg.pool_count, 2);
    cr_assert_eq(cfg.worker_count, 7);
    cr_assert_str_eq(cfg.pools[1].id, "b");
    cr_assert_str_eq(cfg.pools[1].resolved, "/bin/true");
}

Test(config, instances_written_as_2_0_is_an_integer) {
    expect_ok(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":2.0}]}"));
    cr_assert_eq(cfg.pools[0].instances, 2);
}

/* ---- 9.3: pools ------------------------------------------------------- */

Test(config, pools_missing_names_pools) {
    expect_error(parse("{}"), "pools:", "required");
}

Test(config, pools_not_an_array_names_pools) {
    expect_error(parse("{\"pools\":{}}"), "pools:", "array");
    expect_error(parse("{\"pools\":\"x\"}"), "pools:", "array");
    expect_error(parse("{\"pools\":null}"), "pools:", "array");
}

Test(config, pools_empty_names_pools) {
    expect_error(parse("{\"pools\":[]}"), "pools:", "at least one");
}

Test(config, pool_not_an_object_names_its_index) {
    expect_error(parse("{\"pools\":[" POOL_SH ",42]}"), "pools[1]:", "object");
    expect_error(parse("{\"pools\":[[]]}"), "pools[0]:", "object");
}

/* ---- 9.3: id ---------------------------------------------------------- */

Test(config, id_missing_names_the_field) {
    expect_error(parse("{\"pools\":[" POOL_SH ",{\"command\":\"/bin/sh\",\"instances\":1}]}"),
                 "pools[1].id:", "required");
}

Test(config, id_empty_names_the_field) {
    expect_error(parse("{\"pools\":[{\"id\":\"\",\"command\":\"/bin/sh\",\"instances\":1}]}"),
                 "pools[0].id:", "non-empty string");
}

Test(config, id_not_a_string_names_the_field) {
    expect_error(parse("{\"pools\":[{\"id\":7,\"command\":\"/bin/sh\",\"instances\":1}]}"),
                 "pools[0].id:", "string");
}

Test(config, duplicate_id_names_both_indexes) {
    expect_error(parse("{\"pools\":[" POOL_SH ","
                       "{\"id\":\"q\",\"command\":\"/bin/sh\",\"instances\":1},"
                       "{\"id\":\"p\",\"command\":\"/bin/true\",\"instances\":1}]}"),
                 "pools[2].id:", "pools[0]");
    cr_assert(strstr(err, "\"p\""), "error does not quote the id: %s", err);
}

Test(config, ids_differing_only_in_case_are_distinct) {
    expect_ok(
        parse("{\"pools\":[" POOL_SH ",{\"id\":\"P\",\"command\":\"/bin/sh\",\"instances\":1}]}"));
    cr_assert_eq(cfg.pool_count, 2);
}

/* ---- 9.3: command ----------------------------------------------------- */

Test(config, command_missing_names_the_field) {
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"instances\":1}]}"),
                 "pools[0].command:", "required");
}

Test(config, command_not_a_string_names_the_field) {
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":[\"/bin/sh\"],\"instances\":1}]}"),
                 "pools[0].command:", "string");
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"\",\"instances\":1}]}"),
                 "pools[0].command:", "non-empty");
}

Test(config, command_that_does_not_exist_names_the_field) {
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/nonexistent/worker\","
                       "\"instances\":1}]}"),
                 "pools[0].command:", "/nonexistent/worker");
}

Test(config, command_not_executable_names_the_field, .init = make_tmpdir, .fini = remove_tmpdir) {
    char path[128];
    snprintf(path, sizeof path, "%s/worker.sh", tmpdir);
    write_file(path, "#!/bin/sh\nexec cat\n", 0644);
    expect_error(parsef("{\"pools\":[{\"id\":\"p\",\"command\":\"%s\",\"instances\":1}]}", path),
                 "pools[0].command:", "not an executable file");

    /* The same file with an execute bit is accepted. */
    cr_assert_eq(chmod(path, 0755), 0);
    expect_ok(parsef("{\"pools\":[{\"id\":\"p\",\"command\":\"%s\",\"instances\":1}]}", path));
    cr_assert_str_eq(cfg.pools[0].resolved, path);
}

Test(config, command_that_is_a_directory_names_the_field, .init = make_tmpdir,
     .fini = remove_tmpdir) {
    /* A directory has execute bits but cannot be exec'd. */
    expect_error(parsef("{\"pools\":[{\"id\":\"p\",\"command\":\"%s\",\"instances\":1}]}", tmpdir),
                 "pools[0].command:", "not an executable file");
}

Test(config, bare_command_is_found_on_path) {
    cr_assert_eq(setenv("PATH", "/nonexistent:/bin:/usr/bin", 1), 0);
    expect_ok(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"sh\",\"instances\":1}]}"));
    cr_assert_str_eq(cfg.pools[0].command, "sh");
    cr_assert_str_eq(cfg.pools[0].resolved, "/bin/sh");
    cr_assert_str_eq(cfg.pools[0].argv[0], "/bin/sh");
}

Test(config, bare_command_skips_non_executables_on_path, .init = make_tmpdir,
     .fini = remove_tmpdir) {
    /* execvp semantics: a non-executable match earlier on PATH is skipped. */
    char path[128], env[256];
    snprintf(path, sizeof path, "%s/sh", tmpdir);
    write_file(path, "not a program\n", 0644);
    snprintf(env, sizeof env, "%s:/bin", tmpdir);
    cr_assert_eq(setenv("PATH", env, 1), 0);
    expect_ok(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"sh\",\"instances\":1}]}"));
    cr_assert_str_eq(cfg.pools[0].resolved, "/bin/sh");
}

Test(config, bare_command_not_on_path_names_the_field) {
    cr_assert_eq(setenv("PATH", "/nonexistent:/bin", 1), 0);
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"sb-no-such-worker\","
                       "\"instances\":1}]}"),
                 "pools[0].command:", "on PATH");
    cr_assert(strstr(err, "sb-no-such-worker"), "%s", err);
}

/* ---- 9.3: instances --------------------------------------------------- */

Test(config, instances_missing_names_the_field) {
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\"}]}"),
                 "pools[0].instances:", "required");
}

Test(config, instances_zero_names_the_field) {
    expect_error(parse("{\"pools\":[" POOL_SH ",{\"id\":\"q\",\"command\":\"/bin/sh\","
                       "\"instances\":0}]}"),
                 "pools[1].instances: must be an integer >= 1", NULL);
}

Test(config, instances_negative_names_the_field) {
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":-1}]}"),
                 "pools[0].instances: must be an integer >= 1", NULL);
}

Test(config, instances_fractional_names_the_field) {
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":1.5}]}"),
                 "pools[0].instances: must be an integer >= 1", NULL);
}

Test(config, instances_as_a_string_names_the_field) {
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":\"2\"}]}"),
                 "pools[0].instances: must be an integer >= 1", NULL);
}

Test(config, instances_null_or_bool_names_the_field) {
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":null}]}"),
                 "pools[0].instances:", NULL);
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":true}]}"),
                 "pools[0].instances:", NULL);
}

Test(config, instances_above_the_supported_total_is_rejected) {
    expect_ok(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":256}]}"));
    release();
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":257}]}"),
                 "pools[0].instances:", NULL);
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":1e30}]}"),
                 "pools[0].instances:", NULL);
    expect_error(parse("{\"pools\":["
                       "{\"id\":\"a\",\"command\":\"/bin/sh\",\"instances\":200},"
                       "{\"id\":\"b\",\"command\":\"/bin/sh\",\"instances\":57}]}"),
                 "pools:", "257");
}

/* ---- args ------------------------------------------------------------- */

Test(config, args_not_an_array_names_the_field) {
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":1,"
                       "\"args\":\"-c\"}]}"),
                 "pools[0].args:", "array");
}

Test(config, args_with_a_non_string_element_names_its_index) {
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":1,"
                       "\"args\":[\"-c\",\"x\",3]}]}"),
                 "pools[0].args[2]:", "string");
    expect_error(parse("{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":1,"
                       "\"args\":[null]}]}"),
                 "pools[0].args[0]:", "string");
}

/* ---- 8.1 defaults, partial limits, bounds ----------------------------- */

Test(config, omitted_limits_take_every_default_of_8_1) {
    expect_ok(parse(ONE_POOL));
    cr_assert_eq(cfg.limits.max_input_buffer, 1048576);
    cr_assert_eq(cfg.limits.max_output_queue, 4194304);
    cr_assert_eq(cfg.limits.max_restarts, 5);
    cr_assert_eq(cfg.limits.restart_window_sec, 60);
    cr_assert_eq(cfg.limits.drain_timeout_sec, 30);
    cr_assert_eq(cfg.limits.backpressure_timeout_sec, 60);
    cr_assert_eq(cfg.limits.restart_backoff_ms, SB_DEFAULT_RESTART_BACKOFF_MS);
    cr_assert_eq(cfg.limits.restart_backoff_max_ms, SB_DEFAULT_RESTART_BACKOFF_MAX_MS);
    cr_assert_eq(cfg.limits.max_client_memory, 0, "SB-X-17: no budget unless one is given");
}

Test(config, empty_limits_object_takes_every_default) {
    expect_ok(parse("{\"pools\":[" POOL_SH "],\"limits\":{}}"));
    cr_assert_eq(cfg.limits.max_input_buffer, 1048576);
    cr_assert_eq(cfg.limits.max_output_queue, 4194304);
    cr_assert_eq(cfg.limits.max_restarts, 5);
    cr_assert_eq(cfg.limits.restart_window_sec, 60);
    cr_assert_eq(cfg.limits.drain_timeout_sec, 30);
    cr_assert_eq(cfg.limits.backpressure_timeout_sec, 60);
}

/* Each 8.1 field set alone: it takes the given value, the five others keep
 * their default (SB-9.3-6). */
typedef struct {
    const char *key;
    long value;
} limit_case;

static long limit_value(const sb_limits *l, const char *key) {
    if (!strcmp(key, "max_input_buffer"))
        return (long)l->max_input_buffer;
    if (!strcmp(key, "max_output_queue"))
        return (long)l->max_output_queue;
    if (!strcmp(key, "max_restarts"))
        return l->max_restarts;
    if (!strcmp(key, "restart_window_sec"))
        return l->restart_window_sec;
    if (!strcmp(key, "drain_timeout_sec"))
        return l->drain_timeout_sec;
    if (!strcmp(key, "backpressure_timeout_sec"))
        return l->backpressure_timeout_sec;
    if (!strcmp(key, "restart_backoff_ms"))
        return l->restart_backoff_ms;
    if (!strcmp(key, "restart_backoff_max_ms"))
        return l->restart_backoff_max_ms;
    if (!strcmp(key, "max_client_memory"))
        return (long)l->max_client_memory;
    cr_assert_fail("unknown limit %s", key);
    return -1;
}

static const limit_case defaults[] = {
    {"max_input_buffer", 1048576}, {"max_output_queue", 4194304}, {"max_restarts", 5},
    {"restart_window_sec", 60},    {"drain_timeout_sec", 30},     {"backpressure_timeout_sec", 60},
};

Test(config, each_limit_alone_leaves_the_others_at_default) {
    for (size_t i = 0; i < 6; i++) {
        expect_ok(parsef("{\"pools\":[" POOL_SH "],\"limits\":{\"%s\":%d}}", defaults[i].key, 77));
        for (size_t j = 0; j < 6; j++)
            cr_assert_eq(limit_value(&cfg.limits, defaults[j].key), i == j ? 77 : defaults[j].value,
                         "with only %s set, %s is %ld", defaults[i].key, defaults[j].key,
                         limit_value(&cfg.limits, defaults[j].key));
        release();
    }
}

Test(config, partial_limits_mix_given_values_and_defaults) {
    expect_ok(parse("{\"pools\":[" POOL_SH "],\"limits\":{\"max_output_queue\":1000,"
                    "\"max_restarts\":0,\"drain_timeout_sec\":2}}"));
    cr_assert_eq(cfg.limits.max_output_queue, 1000);
    cr_assert_eq(cfg.limits.max_restarts, 0);
    cr_assert_eq(cfg.limits.drain_timeout_sec, 2);
    cr_assert_eq(cfg.limits.max_input_buffer, 1048576);
    cr_assert_eq(cfg.limits.restart_window_sec, 60);
    cr_assert_eq(cfg.limits.backpressure_timeout_sec, 60);
}

/* The bounds config.c enforces: min is accepted, min - 1 is not; max is
 * accepted, max + 1 is not. */
typedef struct {
    const char *key;
    long min, max;
} limit_bounds;

static const limit_bounds bounds[] = {
    {"max_input_buffer", 64, 1L << 30}, {"max_output_queue", 1, 1L << 34},
    {"max_restarts", 0, 10000},         {"restart_window_sec", 1, 86400L * 365},
    {"drain_timeout_sec", 1, 86400},    {"backpressure_timeout_sec", 1, 86400L * 365},
    {"restart_backoff_ms", 1, 3600000}, {"restart_backoff_max_ms", 1, 86400000},
    {"max_client_memory", 1, 1L << 40},
};

Test(config, each_limit_accepts_its_bounds_and_names_itself_beyond_them) {
    for (size_t i = 0; i < sizeof bounds / sizeof *bounds; i++) {
        const limit_bounds *b = &bounds[i];
        char field[64];
        snprintf(field, sizeof field, "limits.%s:", b->key);

        /* restart_backoff_max_ms is raised to restart_backoff_ms when below
         * it, so its minimum is checked with the smallest backoff. */
        const char *with =
            strcmp(b->key, "restart_backoff_max_ms") == 0 ? "\"restart_backoff_ms\":1," : "";
        expect_ok(
            parsef("{\"pools\":[" POOL_SH "],\"limits\":{%s\"%s\":%ld}}", with, b->key, b->min));
        cr_assert_eq(limit_value(&cfg.limits, b->key), b->min, "%s", b->key);
        release();
        expect_ok(
            parsef("{\"pools\":[" POOL_SH "],\"limits\":{%s\"%s\":%ld}}", with, b->key, b->max));
        cr_assert_eq(limit_value(&cfg.limits, b->key), b->max, "%s", b->key);
        release();
        expect_error(
            parsef("{\"pools\":[" POOL_SH "],\"limits\":{\"%s\":%ld}}", b->key, b->min - 1), field,
            NULL);
        expect_error(
            parsef("{\"pools\":[" POOL_SH "],\"limits\":{\"%s\":%ld}}", b->key, b->max + 1), field,
            NULL);
        expect_error(
            parsef("{\"pools\":[" POOL_SH "],\"limits\":{\"%s\":\"%ld\"}}", b->key, b->min), field,
            NULL);
        expect_error(parsef("{\"pools\":[" POOL_SH "],\"limits\":{\"%s\":%ld.5}}", b->key, b->min),
                     field, NULL);
    }
}

Test(config, backoff_max_below_backoff_is_raised_to_it) {
    expect_ok(parse("{\"pools\":[" POOL_SH "],\"limits\":{\"restart_backoff_ms\":5000,"
                    "\"restart_backoff_max_ms\":10}}"));
    cr_assert_eq(cfg.limits.restart_backoff_ms, 5000);
    cr_assert_eq(cfg.limits.restart_backoff_max_ms, 5000);
}

Test(config, limits_not_an_object_names_limits) {
    expect_error(parse("{\"pools\":[" POOL_SH "],\"limits\":[]}"), "limits:", "object");
    expect_error(parse("{\"pools\":[" POOL_SH "],\"limits\":5}"), "limits:", "object");
}

/* ---- unknown keys ----------------------------------------------------- */

Test(config, unknown_keys_are_reported_with_their_path_and_ignored) {
    expect_ok(parse("{\"pools\":[" POOL_SH ",{\"id\":\"q\",\"command\":\"/bin/sh\","
                    "\"instances\":1,\"env\":{}}],"
                    "\"limits\":{\"max_restarts\":3,\"max_sessions\":9},"
                    "\"verbose\":true}"));
    cr_assert_eq(warns.count, 3, "%d warnings", warns.count);
    cr_assert(warned(&warns, "verbose"), "top-level key not reported");
    cr_assert(warned(&warns, "pools[1].env"), "pool key not reported");
    cr_assert(warned(&warns, "limits.max_sessions"), "limits key not reported");
    cr_assert_eq(cfg.limits.max_restarts, 3);
}

Test(config, null_warn_callback_is_allowed) {
    const char *text = "{\"pools\":[" POOL_SH "],\"x\":1}";
    cr_assert_eq(sb_config_parse(text, strlen(text), &cfg, err, sizeof err, NULL, NULL),
                 STDIO_BUS_OK, "%s", err);
}

/* ---- orphan_policy ---------------------------------------------------- */

Test(config, orphan_policy_accepts_discard_and_error) {
    expect_ok(parse("{\"pools\":[" POOL_SH "],\"orphan_policy\":\"error\"}"));
    cr_assert_eq(cfg.orphan_policy, SB_ORPHAN_ERROR);
    release();
    expect_ok(parse("{\"pools\":[" POOL_SH "],\"orphan_policy\":\"discard\"}"));
    cr_assert_eq(cfg.orphan_policy, SB_ORPHAN_DISCARD);
}

Test(config, orphan_policy_other_values_name_the_field) {
    expect_error(parse("{\"pools\":[" POOL_SH "],\"orphan_policy\":\"drop\"}"),
                 "orphan_policy:", NULL);
    expect_error(parse("{\"pools\":[" POOL_SH "],\"orphan_policy\":\"Error\"}"),
                 "orphan_policy:", NULL);
    expect_error(parse("{\"pools\":[" POOL_SH "],\"orphan_policy\":1}"), "orphan_policy:", NULL);
}

/* ---- affinity and spawn (SB-X-10, SB-X-15) ----------------------------- */

#define POOL_AFF(id, extra) "{\"id\":\"" id "\",\"command\":\"/bin/sh\",\"instances\":2" extra "}"

Test(config, affinity_defaults_to_none) {
    expect_ok(parse(ONE_POOL));
    cr_assert_eq(cfg.affinity, SB_AFFINITY_NONE);
    cr_assert(!cfg.pools[0].affinity && !cfg.pools[0].per_connection);
}

Test(config, affinity_connection_and_none_are_accepted) {
    expect_ok(parse("{\"pools\":[" POOL_AFF("p", ",\"affinity\":\"connection\"") "]}"));
    cr_assert_eq(cfg.affinity, SB_AFFINITY_CONNECTION);
    cr_assert_eq(warns.count, 0);
    release();
    expect_ok(
        parse("{\"pools\":[" POOL_AFF("p", ",\"affinity\":\"none\",\"spawn\":\"at_start\"") "]}"));
    cr_assert_eq(cfg.affinity, SB_AFFINITY_NONE);
    cr_assert_eq(warns.count, 0);
}

Test(config, spawn_per_connection_implies_connection_affinity) {
    expect_ok(parse("{\"pools\":[" POOL_AFF("p", ",\"spawn\":\"per_connection\"") "]}"));
    cr_assert_eq(cfg.affinity, SB_AFFINITY_EXCLUSIVE);
    cr_assert(cfg.pools[0].affinity && cfg.pools[0].per_connection);
    release();
    expect_ok(parse("{\"pools\":[" POOL_AFF(
        "p", ",\"spawn\":\"per_connection\",\"affinity\":\"connection\"") "]}"));
    cr_assert_eq(cfg.affinity, SB_AFFINITY_EXCLUSIVE);
}

Test(config, affinity_and_spawn_other_values_name_the_field) {
    expect_error(parse("{\"pools\":[" POOL_AFF("p", ",\"affinity\":\"Connection\"") "]}"),
                 "pools[0].affinity:", "\"connection\"");
    expect_error(parse("{\"pools\":[" POOL_AFF("p", ",\"affinity\":true") "]}"),
                 "pools[0].affinity:", NULL);
    expect_error(parse("{\"pools\":[" POOL_AFF("p", ",\"spawn\":\"lazy\"") "]}"),
                 "pools[0].spawn:", "\"per_connection\"");
    expect_error(parse("{\"pools\":[" POOL_AFF(
                     "p", ",\"spawn\":\"per_connection\",\"affinity\":\"none\"") "]}"),
                 "pools[0].spawn:", "needs");
}

Test(config, pools_must_agree_on_affinity) {
    expect_error(parse("{\"pools\":[" POOL_AFF("a", ",\"affinity\":\"connection\"") "," POOL_AFF(
                     "b", "") "]}"),
                 "pools[1]:", "same \"affinity\"");
    expect_ok(parse("{\"pools\":[" POOL_AFF("a", ",\"affinity\":\"connection\"") "," POOL_AFF(
        "b", ",\"affinity\":\"connection\"") "]}"));
    cr_assert_eq(cfg.affinity, SB_AFFINITY_CONNECTION);
}

Test(config, a_per_connection_pool_is_the_only_pool) {
    expect_error(parse("{\"pools\":[" POOL_AFF("a", ",\"spawn\":\"per_connection\"") "," POOL_AFF(
                     "b", ",\"spawn\":\"per_connection\"") "]}"),
                 "pools[1]:", "only pool");
    expect_error(parse("{\"pools\":[" POOL_AFF("a", ",\"affinity\":\"connection\"") "," POOL_AFF(
                     "b", ",\"spawn\":\"per_connection\"") "]}"),
                 "pools[1]:", "only pool");
}

/* ---- not JSON, not an object ------------------------------------------ */

Test(config, invalid_json_is_reported_with_an_offset) {
    expect_error(parse("{\"pools\":[" POOL_SH ",]}"), "(file):", "not valid JSON near byte");
    expect_error(parse(""), "(file):", "not valid JSON");
    expect_error(parse("{\"pools\":"), "(file):", "not valid JSON");
}

Test(config, trailing_text_after_the_object_is_invalid_json) {
    /* A config file is one JSON text (RFC 8259); anything after the top-level
     * value makes it invalid, like a second object or a stray brace. */
    expect_error(parse(ONE_POOL " {}"), "(file):", "not valid JSON");
    expect_error(parse(ONE_POOL "}"), "(file):", "not valid JSON");
}

Test(config, trailing_whitespace_is_allowed) {
    expect_ok(parse(" \n" ONE_POOL "\n\n"));
}

Test(config, top_level_not_an_object_is_rejected) {
    expect_error(parse("[" POOL_SH "]"), "(top level):", "object");
    expect_error(parse("\"pools\""), "(top level):", "object");
    expect_error(parse("null"), "(top level):", "object");
}

Test(config, only_len_bytes_are_parsed) {
    /* The text need not be NUL-terminated at len. */
    const char *text = ONE_POOL "garbage";
    cr_assert_eq(sb_config_parse(text, strlen(ONE_POOL), &cfg, err, sizeof err, NULL, NULL),
                 STDIO_BUS_OK, "%s", err);
}

Test(config, error_is_truncated_to_the_buffer) {
    char small[12];
    const char *text = "{\"pools\":[]}";
    cr_assert_eq(sb_config_parse(text, strlen(text), &cfg, small, sizeof small, NULL, NULL),
                 STDIO_BUS_EINVAL);
    cr_assert_eq(strlen(small), sizeof small - 1);
}

/* ---- sb_config_load --------------------------------------------------- */

Test(config, load_missing_file_names_the_path) {
    int rc = sb_config_load("/nonexistent/stdio_bus.json", &cfg, err, sizeof err, NULL, NULL);
    cr_assert_lt(rc, 0);
    cr_assert(strstr(err, "/nonexistent/stdio_bus.json"), "%s", err);
    cr_assert(strstr(err, "No such file"), "%s", err);
    cr_assert_null(cfg.pools);
}

Test(config, load_directory_fails, .init = make_tmpdir, .fini = remove_tmpdir) {
    int rc = sb_config_load(tmpdir, &cfg, err, sizeof err, NULL, NULL);
    cr_assert_lt(rc, 0);
    cr_assert(strstr(err, tmpdir), "%s", err);
}

Test(config, load_reads_and_validates_a_file, .init = make_tmpdir, .fini = remove_tmpdir) {
    char path[128];
    snprintf(path, sizeof path, "%s/config.json", tmpdir);
    write_file(path, "{\"pools\":[" POOL_SH "],\"limits\":{\"max_restarts\":2},\"x\":0}\n", 0644);
    memset(&warns, 0, sizeof warns);
    cr_assert_eq(sb_config_load(path, &cfg, err, sizeof err, record_warning, &warns), STDIO_BUS_OK,
                 "%s", err);
    cr_assert_eq(cfg.limits.max_restarts, 2);
    cr_assert(warned(&warns, "x"));
    release();

    write_file(path, "{\"pools\":[{\"id\":\"p\",\"command\":\"/bin/sh\",\"instances\":0}]}", 0644);
    cr_assert_eq(sb_config_load(path, &cfg, err, sizeof err, NULL, NULL), STDIO_BUS_EINVAL);
    cr_assert(strncmp(err, "pools[0].instances:", 19) == 0, "%s", err);
}

Test(config, load_file_larger_than_a_read_chunk, .init = make_tmpdir, .fini = remove_tmpdir) {
    /* Many pools push the file past the 4 KiB first read and several
     * doublings of the buffer. */
    static char text[64 * 1024];
    size_t n = (size_t)snprintf(text, sizeof text, "{\"pools\":[");
    for (int i = 0; i < 200; i++)
        n += (size_t)snprintf(text + n, sizeof text - n,
                              "%s{\"id\":\"pool-%03d\",\"command\":\"/bin/sh\",\"instances\":1,"
                              "\"args\":[\"-c\",\"exec cat # padding padding padding\"]}",
                              i ? "," : "", i);
    snprintf(text + n, sizeof text - n, "]}");
    cr_assert_gt(strlen(text), 16384);
    char path[128];
    snprintf(path, sizeof path, "%s/big.json", tmpdir);
    write_file(path, text, 0644);
    cr_assert_eq(sb_config_load(path, &cfg, err, sizeof err, NULL, NULL), STDIO_BUS_OK, "%s", err);
    cr_assert_eq(cfg.pool_count, 200);
    cr_assert_str_eq(cfg.pools[199].id, "pool-199");
}

Test(config, fini_twice_is_harmless) {
    expect_ok(parse(ONE_POOL));
    sb_config_fini(&cfg);
    sb_config_fini(&cfg);
    cr_assert_null(cfg.pools);
}
