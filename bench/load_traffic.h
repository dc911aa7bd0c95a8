/* bench_load's traffic: W requests in flight on each of K connections,
 * every answer checked (exactly once, on the connection that asked, with
 * its sessionId and its payload intact), latency recorded. */
#ifndef BENCH_LOAD_TRAFFIC_H
#define BENCH_LOAD_TRAFFIC_H

#include "bench_buf.h"
#include "load_opts.h"

#include <stdint.h>

typedef struct {
    int in_fd, out_fd; /* equal for sockets */
    bench_inbuf in;
    char *out; /* requests not yet written */
    size_t out_off, out_len, out_cap;
    long quota, issued; /* requests this connection sends / has sent */
    int inflight;
    int sessions; /* sessionIds owned by this connection */
    int closed;   /* the server closed it */
} load_conn;

typedef struct {
    long ok;         /* answered once, right connection, right sessionId and payload */
    long lost;       /* never answered */
    long dup;        /* extra answers to a request already answered */
    long misrouted;  /* answered on another connection */
    long badsid;     /* answered with a wrong or missing sessionId */
    long badpayload; /* answered with a payload that is not the request's */
    long unknown;    /* answers whose id was never sent */
    long malformed;  /* lines that are not an answer at all */
    double seconds;  /* first request to last answer */
    int64_t *lat_ns; /* latencies of the ok answers; owned, free() it */
    long lat_count;
    char error[256]; /* the first problem, for the human line */
} load_result;

void load_conn_init(load_conn *c, int in_fd, int out_fd, size_t max_line);
void load_conn_fini(load_conn *c);

/* Writes line and waits until one complete line comes back (warm-up,
 * touching idle connections). Returns 0, or -1 on EOF, error or deadline. */
int load_conn_roundtrip(load_conn *c, const char *line, int64_t deadline_ns);

/* Runs the whole load over conns[0..k). Returns 0 when every request was
 * answered correctly, 1 otherwise, -1 when out of memory. */
int load_traffic_run(load_conn *conns, int k, const load_opts *o, load_result *res);

#endif
