/* bench_load's command line. */
#ifndef BENCH_LOAD_OPTS_H
#define BENCH_LOAD_OPTS_H

#include "bench_net.h"

#include <stddef.h>

#define LOAD_MAX_ARGS 16

typedef struct {
    const char *server; /* the daemon, or bench_relay */
    const char *config; /* an existing config; else one is written from worker */
    const char *worker;
    const char *worker_args[LOAD_MAX_ARGS];
    int worker_argc;
    const char *server_args[LOAD_MAX_ARGS]; /* extra server flags (--batch) */
    int server_argc;
    char *wrap[LOAD_MAX_ARGS]; /* command prefix: valgrind, env LD_PRELOAD=... */
    int wrap_argc;
    char *wrap_storage;
    int instances;
    size_t max_input_buffer;
    size_t max_output_queue;
    bench_mode mode;
    int clients;    /* K connections (stdio: 1) */
    int inflight;   /* W requests in flight per connection */
    long messages;  /* M requests in all */
    size_t payload; /* P: bytes per request line, newline included */
    int sessions;   /* S distinct sessionIds (0: none), split over the clients */
    const char *log_level;
    int idle_connections;
    double idle_settle_sec; /* then watch RSS fall for up to this long */
    double timeout_sec;     /* no answer for this long: the rest are lost */
    double exit_timeout_sec;
    const char *tag; /* appended verbatim to the result line */
} load_opts;

extern const char load_usage[];

/* Returns 0, or -1 with a message in err. */
int load_opts_parse(int argc, char **argv, load_opts *o, char *err, size_t err_size);
void load_opts_fini(load_opts *o);

#endif
