#include "load_opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char load_usage[] =
    "usage: bench_load --server PATH (--worker PATH | --config PATH) [options]\n"
    "  --mode stdio|unix|tcp     how clients reach the server (stdio)\n"
    "  --clients K               connections, unix/tcp only (1)\n"
    "  --inflight W              requests in flight per connection (1)\n"
    "  --messages M              requests in all (10000)\n"
    "  --payload P               bytes per request line, newline included (100)\n"
    "  --sessions S              distinct sessionIds, 0 = none (0)\n"
    "  --idle-connections N      also open N idle connections and report RSS\n"
    "  --idle-settle SEC         after one request on each, watch RSS fall (0)\n"
    "  --worker-arg X            argument for the worker (repeatable)\n"
    "  --server-arg X            extra argument for the server (repeatable)\n"
    "  --instances N             workers in the generated config (1)\n"
    "  --max-input-buffer N      generated config's limit (1048576)\n"
    "  --max-output-queue N      generated config's limit (4194304)\n"
    "  --log-level L             passed to the server (warn)\n"
    "  --wrap 'CMD ARGS'         run the server under CMD (valgrind, env)\n"
    "  --timeout SEC             no answer for SEC: the rest count as lost (60)\n"
    "  --exit-timeout SEC        wait this long for the server to exit (60)\n"
    "  --tag 'k=v ...'           appended to the result line\n";

static int number(const char *s, double min, double max, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int load_opts_parse(int argc, char **argv, load_opts *o, char *err, size_t err_size) {
    memset(o, 0, sizeof *o);
    o->instances = 1;
    o->max_input_buffer = 1048576;
    o->max_output_queue = 4194304;
    o->clients = 1;
    o->inflight = 1;
    o->messages = 10000;
    o->payload = 100;
    o->log_level = "warn";
    o->timeout_sec = 60;
    o->exit_timeout_sec = 60;
    o->tag = "";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        double x;
        if (!v) {
            snprintf(err, err_size, "%s: unknown option or missing value", a);
            return -1;
        }
        i++;
#define NUM(flag, min, max, field)                                                                 \
    else if (strcmp(a, flag) == 0) {                                                               \
        if (number(v, min, max, &x) < 0) {                                                         \
            snprintf(err, err_size, "%s: expected a number in [%g, %g]", a, (double)(min),         \
                     (double)(max));                                                               \
            return -1;                                                                             \
        }                                                                                          \
        field = x;                                                                                 \
    }
        if (strcmp(a, "--server") == 0)
            o->server = v;
        else if (strcmp(a, "--config") == 0)
            o->config = v;
        else if (strcmp(a, "--worker") == 0)
            o->worker = v;
        else if (strcmp(a, "--log-level") == 0)
            o->log_level = v;
        else if (strcmp(a, "--tag") == 0)
            o->tag = v;
        else if (strcmp(a, "--worker-arg") == 0 && o->worker_argc < LOAD_MAX_ARGS)
            o->worker_args[o->worker_argc++] = v;
        else if (strcmp(a, "--server-arg") == 0 && o->server_argc < LOAD_MAX_ARGS)
            o->server_args[o->server_argc++] = v;
        else if (strcmp(a, "--wrap") == 0) {
            free(o->wrap_storage);
            o->wrap_storage = strdup(v);
            o->wrap_argc = 0;
            for (char *t = strtok(o->wrap_storage, " "); t && o->wrap_argc < LOAD_MAX_ARGS - 1;
                 t = strtok(NULL, " "))
                o->wrap[o->wrap_argc++] = t;
        } else if (strcmp(a, "--mode") == 0) {
            if (strcmp(v, "stdio") == 0)
                o->mode = BENCH_STDIO;
            else if (strcmp(v, "unix") == 0)
                o->mode = BENCH_UNIX;
            else if (strcmp(v, "tcp") == 0)
                o->mode = BENCH_TCP;
            else {
                snprintf(err, err_size, "--mode: stdio, unix or tcp");
                return -1;
            }
        }
        NUM("--clients", 1, 1000, o->clients)
        NUM("--inflight", 1, 4096, o->inflight)
        NUM("--messages", 0, 1e8, o->messages)
        NUM("--payload", 1, 1 << 30, o->payload)
        NUM("--sessions", 0, 1e6, o->sessions)
        NUM("--idle-connections", 0, 100000, o->idle_connections)
        NUM("--idle-settle", 0, 3600, o->idle_settle_sec)
        NUM("--instances", 1, 256, o->instances)
        NUM("--max-input-buffer", 64, 1 << 30, o->max_input_buffer)
        NUM("--max-output-queue", 1, 1e12, o->max_output_queue)
        NUM("--timeout", 0.1, 1e6, o->timeout_sec)
        NUM("--exit-timeout", 0.1, 1e6, o->exit_timeout_sec)
        else {
            snprintf(err, err_size, "%s: unknown option", a);
            return -1;
        }
#undef NUM
    }
    if (!o->server || (!o->config && !o->worker)) {
        snprintf(err, err_size, "--server and one of --worker, --config are required");
        return -1;
    }
    if (o->mode == BENCH_STDIO && o->clients != 1) {
        snprintf(err, err_size, "--clients: stdio mode has exactly one client");
        return -1;
    }
    if (o->mode == BENCH_STDIO && o->idle_connections) {
        snprintf(err, err_size, "--idle-connections needs --mode unix or tcp");
        return -1;
    }
    if (o->sessions && o->sessions < o->clients) {
        snprintf(err, err_size, "--sessions: at least one per client (or 0)");
        return -1;
    }
    return 0;
}

void load_opts_fini(load_opts *o) {
    free(o->wrap_storage);
    o->wrap_storage = NULL;
}
