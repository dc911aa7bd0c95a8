/* bench_load: the load generator of the stdio Bus benchmarks.
 *
 * Starts the server (the daemon or bench_relay) with a bench_echo worker,
 * reaches it over stdio or K unix/TCP connections, keeps W requests in
 * flight per connection until M requests of P bytes over S sessions are
 * answered, and checks every answer (see load_traffic.h). Prints one
 * machine-readable line (key=value, starting "bench_load ") and one human
 * line (starting "# "). It reports; it never judges speed.
 *
 * Exit status: 0 every request answered correctly and the server exited
 * cleanly; 1 a correctness problem (lost, duplicated, misrouted, damaged
 * answers, or a server that did not exit cleanly); 2 usage or set-up. */
#include "load_opts.h"
#include "load_server.h"
#include "load_traffic.h"
#include "proc.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOAD_MAX_CHILDREN 256

typedef struct {
    int64_t stat_ns, sched_ns; /* the server's CPU time */
    int64_t user_ns, sys_ns;   /* stat_ns split: user and kernel time */
    int64_t workers_ns;        /* its children's (stat) */
} cpu_sample;

typedef struct {
    long rss_start_kb, rss_end_kb, hwm_kb;
    long rss_idle_kb, rss_touched_kb; /* with the idle connections */
    long rss_settled_kb;              /* the lowest while they stay idle */
    int idle_open;
    cpu_sample before, after;
    int server_status;
} server_facts;

static void sample_cpu(pid_t pid, cpu_sample *s) {
    pid_t kids[LOAD_MAX_CHILDREN];
    s->stat_ns = bench_proc_stat_cpu_ns(pid);
    if (bench_proc_stat_times_ns(pid, &s->user_ns, &s->sys_ns) < 0)
        s->user_ns = s->sys_ns = 0;
    s->sched_ns = bench_proc_sched_cpu_ns(pid);
    s->workers_ns = 0;
    int n = bench_proc_children(pid, kids, LOAD_MAX_CHILDREN);
    for (int i = 0; i < n; i++) {
        int64_t ns = bench_proc_stat_cpu_ns(kids[i]);
        if (ns > 0)
            s->workers_ns += ns;
    }
}

static void raise_fd_limit(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n), in microseconds. */
static double pct_us(const int64_t *v, long n, double p) {
    if (n == 0)
        return 0;
    long rank = (long)(p * (double)n + 0.999999);
    if (rank < 1)
        rank = 1;
    return (double)v[rank > n ? n - 1 : rank - 1] / 1000.0;
}

/* Opens n idle connections, waits until the server holds them all (its fd
 * count), and samples RSS; then sends one request on each and samples it
 * again (a connection that has been used keeps its buffers). */
static int idle_probe(const load_server *s, const load_opts *o, int *fds, server_facts *f) {
    int base = bench_proc_fd_count(s->pid);
    int64_t deadline = load_now_ns() + (int64_t)(o->timeout_sec * 1e9);
    for (int i = 0; i < o->idle_connections; i++) {
        fds[i] = load_server_connect(s, o, deadline);
        if (fds[i] < 0) {
            fprintf(stderr, "bench_load: idle connection %d: connect failed\n", i);
            return -1;
        }
        f->idle_open++;
    }
    /* accept() runs when the server gets to it: wait for its fd table. */
    while (bench_proc_fd_count(s->pid) < base + o->idle_connections) {
        if (load_now_ns() > deadline) {
            fprintf(stderr, "bench_load: the server did not accept %d connections in time\n",
                    o->idle_connections);
            return -1;
        }
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    f->rss_idle_kb = bench_proc_status_kb(s->pid, "VmRSS");
    for (int i = 0; i < o->idle_connections; i++) {
        load_conn c;
        load_conn_init(&c, fds[i], fds[i], 1 << 20);
        int rc = load_conn_roundtrip(
            &c, "{\"jsonrpc\":\"2.0\",\"id\":\"touch\",\"method\":\"echo\"}\n", deadline);
        load_conn_fini(&c);
        if (rc < 0) {
            fprintf(stderr, "bench_load: idle connection %d: no answer\n", i);
            return -1;
        }
    }
    f->rss_touched_kb = f->rss_settled_kb = bench_proc_status_kb(s->pid, "VmRSS");
    /* A server may release a connection's buffers once it has been idle a
     * while: watch for that until it is back at the never-used level or
     * the settle time is up. */
    int64_t settle_end = load_now_ns() + (int64_t)(o->idle_settle_sec * 1e9);
    while (f->rss_settled_kb > f->rss_idle_kb && load_now_ns() < settle_end) {
        struct timespec pause = {0, 50000000};
        nanosleep(&pause, NULL);
        long kb = bench_proc_status_kb(s->pid, "VmRSS");
        if (kb >= 0 && kb < f->rss_settled_kb)
            f->rss_settled_kb = kb;
    }
    return 0;
}

static const char *mode_name(bench_mode m) {
    return m == BENCH_STDIO ? "stdio" : m == BENCH_UNIX ? "unix" : "tcp";
}

static void report(const load_opts *o, const load_result *r, const server_facts *f, int rc) {
    const char *name = strrchr(o->server, '/') ? strrchr(o->server, '/') + 1 : o->server;
    double m = o->messages ? (double)o->messages : 1;
    double secs = r->seconds > 0 ? r->seconds : 1e-9;
    double p50 = pct_us(r->lat_ns, r->lat_count, 0.50), p99 = pct_us(r->lat_ns, r->lat_count, 0.99);
    double max = pct_us(r->lat_ns, r->lat_count, 1.0);
    double stat_us = (double)(f->after.stat_ns - f->before.stat_ns) / 1000.0 / m;
    double sched_us = f->after.sched_ns >= 0 && f->before.sched_ns >= 0
                          ? (double)(f->after.sched_ns - f->before.sched_ns) / 1000.0 / m
                          : -1;
    double user_us = (double)(f->after.user_ns - f->before.user_ns) / 1000.0 / m;
    double sys_us = (double)(f->after.sys_ns - f->before.sys_ns) / 1000.0 / m;
    double worker_us = (double)(f->after.workers_ns - f->before.workers_ns) / 1000.0 / m;
    double rate = (double)r->ok / secs;
    int exit_code = WIFEXITED(f->server_status) ? WEXITSTATUS(f->server_status)
                    : f->server_status < 0      ? -1
                                                : 128 + WTERMSIG(f->server_status);
    printf("bench_load server=%s mode=%s clients=%d inflight=%d messages=%ld payload=%zu "
           "sessions=%d ok=%ld lost=%ld dup=%ld misrouted=%ld badsid=%ld badpayload=%ld "
           "unknown=%ld malformed=%ld secs=%.4f msgs_per_s=%.1f mib_per_s=%.2f p50_us=%.1f "
           "p99_us=%.1f max_us=%.1f server_cpu_us_per_msg=%.3f server_sched_us_per_msg=%.3f "
           "server_user_us_per_msg=%.3f server_sys_us_per_msg=%.3f "
           "worker_cpu_us_per_msg=%.3f rss_start_kb=%ld rss_end_kb=%ld hwm_kb=%ld",
           name, mode_name(o->mode), o->clients, o->inflight, o->messages, o->payload, o->sessions,
           r->ok, r->lost, r->dup, r->misrouted, r->badsid, r->badpayload, r->unknown, r->malformed,
           r->seconds, rate, rate * (double)o->payload / 1048576.0, p50, p99, max, stat_us,
           sched_us, user_us, sys_us, worker_us, f->rss_start_kb, f->rss_end_kb, f->hwm_kb);
    if (o->idle_connections)
        printf(
            " idle_connections=%d rss_idle_kb=%ld idle_conn_bytes=%.0f rss_touched_kb=%ld "
            "touched_conn_bytes=%.0f idle_settle_s=%g rss_settled_kb=%ld settled_conn_bytes=%.0f",
            o->idle_connections, f->rss_idle_kb,
            (double)(f->rss_idle_kb - f->rss_start_kb) * 1024.0 / o->idle_connections,
            f->rss_touched_kb,
            (double)(f->rss_touched_kb - f->rss_start_kb) * 1024.0 / o->idle_connections,
            o->idle_settle_sec, f->rss_settled_kb,
            (double)(f->rss_settled_kb - f->rss_start_kb) * 1024.0 / o->idle_connections);
    printf(" server_exit=%d status=%s%s%s\n", exit_code, rc == 0 ? "ok" : "FAILED",
           o->tag[0] ? " " : "", o->tag);
    printf("# %s %s K=%d W=%d P=%zu S=%d: %ld/%ld ok, %.0f msg/s, p50 %.0f us, p99 %.0f us, "
           "server %.2f us CPU/msg, peak RSS %ld KiB%s%s\n",
           name, mode_name(o->mode), o->clients, o->inflight, o->payload, o->sessions, r->ok,
           o->messages, rate, p50, p99, sched_us >= 0 ? sched_us : stat_us, f->hwm_kb,
           r->error[0] ? "; first problem: " : "", r->error);
    fflush(stdout);
}

int main(int argc, char **argv) {
    load_opts o;
    char err[512];
    if (load_opts_parse(argc, argv, &o, err, sizeof err) < 0) {
        fprintf(stderr, "bench_load: %s\n%s", err, load_usage);
        load_opts_fini(&o);
        return 2;
    }
    raise_fd_limit();
    signal(SIGPIPE, SIG_IGN);

    load_server s;
    if (load_server_start(&s, &o, err, sizeof err) < 0) {
        fprintf(stderr, "bench_load: %s\n", err);
        load_server_stop(&s, o.exit_timeout_sec);
        load_opts_fini(&o);
        return 2;
    }
    int k = o.mode == BENCH_STDIO ? 1 : o.clients;
    load_conn *conns = calloc((size_t)k, sizeof *conns);
    int *idle = calloc((size_t)o.idle_connections + 1, sizeof *idle);
    server_facts f;
    load_result res;
    memset(&f, 0, sizeof f);
    memset(&res, 0, sizeof res);
    int rc = 2, opened = 0;
    size_t max_line = 2 * o.max_input_buffer + (1 << 20);
    int64_t deadline = load_now_ns() + (int64_t)(o.timeout_sec * 1e9);
    if (!conns || !idle)
        goto stop;
    for (; opened < k; opened++) {
        int fd = o.mode == BENCH_STDIO ? -1 : load_server_connect(&s, &o, deadline);
        if (o.mode == BENCH_STDIO)
            load_conn_init(&conns[0], s.from_fd, s.to_fd, max_line);
        else if (fd < 0) {
            fprintf(stderr, "bench_load: cannot connect to %s\n", s.address);
            goto stop;
        } else
            load_conn_init(&conns[opened], fd, fd, max_line);
    }
    /* A first round trip: the server and its worker are up and warm. */
    if (load_conn_roundtrip(&conns[0],
                            "{\"jsonrpc\":\"2.0\",\"id\":\"warmup\",\"method\":\"echo\"}\n",
                            deadline) < 0) {
        fprintf(stderr, "bench_load: no answer to the warm-up request\n");
        goto stop;
    }
    f.rss_start_kb = bench_proc_status_kb(s.pid, "VmRSS");
    if (o.idle_connections && idle_probe(&s, &o, idle, &f) < 0)
        goto stop;
    sample_cpu(s.pid, &f.before);
    rc = load_traffic_run(conns, k, &o, &res);
    if (rc < 0) {
        fprintf(stderr, "bench_load: out of memory\n");
        rc = 2;
        goto stop;
    }
    sample_cpu(s.pid, &f.after);
    f.rss_end_kb = bench_proc_status_kb(s.pid, "VmRSS");
    f.hwm_kb = bench_proc_status_kb(s.pid, "VmHWM");
    qsort(res.lat_ns, (size_t)res.lat_count, sizeof *res.lat_ns, cmp_i64);
stop:
    for (int i = 0; i < f.idle_open; i++)
        close(idle[i]);
    for (int i = 0; i < opened; i++) {
        if (conns[i].in_fd > 2 && o.mode != BENCH_STDIO)
            close(conns[i].in_fd);
        load_conn_fini(&conns[i]);
    }
    f.server_status = load_server_stop(&s, o.exit_timeout_sec);
    if (rc != 2) {
        int clean =
            f.server_status >= 0 && WIFEXITED(f.server_status) && WEXITSTATUS(f.server_status) == 0;
        if (!clean && !res.error[0])
            snprintf(res.error, sizeof res.error, "the server did not exit cleanly");
        if (!clean)
            rc = 1;
        report(&o, &res, &f, rc);
    }
    free(res.lat_ns);
    free(conns);
    free(idle);
    load_opts_fini(&o);
    return rc;
}
