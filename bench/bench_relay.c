/* bench_relay: the physical limit of the stdio Bus design, for comparison.
 *
 * One worker (the first pool's command), one thread, poll(2), and framing
 * only: read, find the newline, write. No JSON is looked at. Responses go
 * back by order: the relay remembers which client sent each line, and the
 * worker (bench_echo) answers in order, so the k-th line out of the worker
 * belongs to the k-th line into it.
 *
 * usage: bench_relay --config PATH [--stdio | --unix PATH | --tcp HOST:PORT]
 *                    [--log-level LEVEL] [--per-line]
 * The command line is the daemon's, so bench_load drives either. Each run
 * of complete lines bound for one destination goes out with one write,
 * straight from the input buffer (no copy unless the fd takes less);
 * --per-line writes every line on its own instead.
 * A line longer than max_input_buffer closes its client; an output queue
 * over max_output_queue pauses the inputs that feed it. stdio mode ends at
 * stdin EOF once every answer is written; socket modes end on SIGTERM. */
#include "bench_buf.h"
#include "bench_net.h"
#include "relay_config.h"
#include "bench_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    int in_fd, out_fd; /* -1 when closed; equal for sockets */
    uint32_t gen;      /* bumped when the slot is reused */
    int used;
    bench_inbuf in;
    bench_outq out;
} relay_peer;

/* Who sent the k-th line still unanswered: a ring of (slot, generation). */
typedef struct {
    uint64_t *entries;
    size_t head, len, cap;
} relay_fifo;

typedef struct {
    relay_config cfg;
    bench_mode mode;
    const char *address;
    int batch;

    relay_peer worker;
    pid_t worker_pid;
    relay_peer *clients;
    int client_cap;
    relay_fifo fifo;

    int listen_fd, sig_fd;
    int stdin_done; /* stdio: stdin ended, finishing in-flight answers */
    int stop;
    int status;

    struct pollfd *pfds;
    int *owners; /* per pfd: -3 listen, -2 signals, -1 worker, >= 0 client slot */
    int pfd_cap;
} relay;

static void die(const char *what) {
    fprintf(stderr, "bench_relay: %s\n", what);
    exit(1);
}

static int fifo_push(relay_fifo *f, uint64_t v) {
    if (f->len == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 4096;
        uint64_t *grown = malloc(cap * sizeof *grown);
        if (!grown)
            return -1;
        for (size_t i = 0; i < f->len; i++)
            grown[i] = f->entries[(f->head + i) % f->cap];
        free(f->entries);
        f->entries = grown;
        f->head = 0;
        f->cap = cap;
    }
    f->entries[(f->head + f->len) % f->cap] = v;
    f->len++;
    return 0;
}

static int fifo_pop(relay_fifo *f, uint64_t *v) {
    if (!f->len)
        return -1;
    *v = f->entries[f->head];
    f->head = (f->head + 1) % f->cap;
    f->len--;
    return 0;
}

static void peer_init(relay_peer *p, int in_fd, int out_fd, size_t max) {
    p->in_fd = in_fd;
    p->out_fd = out_fd;
    p->used = 1;
    bench_inbuf_init(&p->in, max);
    memset(&p->out, 0, sizeof p->out);
}

static void client_close(relay *r, int slot) {
    relay_peer *c = &r->clients[slot];
    if (c->in_fd > STDERR_FILENO)
        close(c->in_fd);
    if (c->out_fd > STDERR_FILENO && c->out_fd != c->in_fd)
        close(c->out_fd);
    bench_inbuf_fini(&c->in);
    bench_outq_fini(&c->out);
    c->in_fd = c->out_fd = -1;
    c->used = 0;
    c->gen++; /* answers still owed to this client are dropped */
    if (r->mode == BENCH_STDIO)
        r->stop = 1;
}

static int client_open(relay *r, int in_fd, int out_fd) {
    int slot = 0;
    while (slot < r->client_cap && r->clients[slot].used)
        slot++;
    if (slot == r->client_cap) {
        int cap = r->client_cap ? r->client_cap * 2 : 16;
        relay_peer *grown = realloc(r->clients, (size_t)cap * sizeof *grown);
        if (!grown)
            return -1;
        memset(grown + r->client_cap, 0, (size_t)(cap - r->client_cap) * sizeof *grown);
        r->clients = grown;
        r->client_cap = cap;
    }
    peer_init(&r->clients[slot], in_fd, out_fd, r->cfg.max_input_buffer);
    return slot;
}

/* Sends the lines [start, start+n) to p; -1 when p's fd failed. */
static int send_to(relay_peer *p, const char *start, size_t n) {
    if (p->out_fd < 0)
        return 0;
    return bench_outq_send(&p->out, p->out_fd, start, n) < 0 ? -1 : 0;
}

static void worker_gone(relay *r, const char *why) {
    fprintf(stderr, "bench_relay: worker %s\n", why);
    r->status = 1;
    r->stop = 1;
}

/* Routes every complete line buffered from client `slot` to the worker. */
static void from_client(relay *r, int slot) {
    relay_peer *c = &r->clients[slot];
    uint64_t tag = ((uint64_t)c->gen << 32) | (uint32_t)slot;
    const char *line, *run = NULL;
    size_t n, run_len = 0;
    while ((n = bench_inbuf_next(&c->in, &line)) > 0) {
        if (fifo_push(&r->fifo, tag) < 0)
            die("out of memory");
        if (r->batch) { /* consecutive lines are contiguous in the buffer */
            if (!run)
                run = line;
            run_len += n;
        } else if (send_to(&r->worker, line, n) < 0) {
            worker_gone(r, "stdin failed");
            return;
        }
    }
    if (run && send_to(&r->worker, run, run_len) < 0)
        worker_gone(r, "stdin failed");
}

static void from_worker(relay *r) {
    const char *line, *run = NULL;
    size_t n, run_len = 0;
    relay_peer *run_to = NULL;
    while ((n = bench_inbuf_next(&r->worker.in, &line)) > 0) {
        uint64_t tag;
        relay_peer *to = NULL;
        if (fifo_pop(&r->fifo, &tag) == 0) {
            int slot = (int)(uint32_t)tag;
            if (slot < r->client_cap && r->clients[slot].used &&
                r->clients[slot].gen == (uint32_t)(tag >> 32))
                to = &r->clients[slot];
        }
        if (run && (to != run_to || !r->batch)) {
            if (run_to && send_to(run_to, run, run_len) < 0)
                client_close(r, (int)(run_to - r->clients));
            run = NULL;
            run_len = 0;
        }
        if (!run) {
            run = line;
            run_to = to;
        }
        run_len += n;
    }
    if (run && run_to && send_to(run_to, run, run_len) < 0)
        client_close(r, (int)(run_to - r->clients));
}

/* Reads once from p. Returns 1 when bytes came, 0 on EAGAIN, -1 at EOF,
 * on error, or when a line is longer than max_input_buffer. */
static int read_peer(relay_peer *p) {
    size_t avail;
    char *space = bench_inbuf_space(&p->in, &avail);
    if (!space)
        return -1;
    ssize_t n;
    do
        n = read(p->in_fd, space, avail);
    while (n < 0 && errno == EINTR);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (n <= 0)
        return -1;
    bench_inbuf_commit(&p->in, (size_t)n);
    return 1;
}

static int client_paused(const relay *r) {
    return r->stop || r->worker.out_fd < 0 ||
           bench_outq_len(&r->worker.out) > r->cfg.max_output_queue;
}

static int worker_paused(const relay *r) {
    for (int i = 0; i < r->client_cap; i++)
        if (r->clients[i].used && bench_outq_len(&r->clients[i].out) > r->cfg.max_output_queue)
            return 1;
    return 0;
}

static void add_pfd(relay *r, int *n, int fd, short events, int owner) {
    if (*n == r->pfd_cap) {
        int cap = r->pfd_cap ? r->pfd_cap * 2 : 64;
        struct pollfd *p = realloc(r->pfds, (size_t)cap * sizeof *p);
        int *o = p ? realloc(r->owners, (size_t)cap * sizeof *o) : NULL;
        if (p)
            r->pfds = p;
        if (!o)
            die("out of memory");
        r->owners = o;
        r->pfd_cap = cap;
    }
    r->pfds[*n] = (struct pollfd){fd, events, 0};
    r->owners[*n] = owner;
    (*n)++;
}

static int build_pollset(relay *r) {
    int n = 0;
    int clients_paused = client_paused(r), worker_held = worker_paused(r);
    add_pfd(r, &n, r->sig_fd, POLLIN, -2);
    if (r->listen_fd >= 0)
        add_pfd(r, &n, r->listen_fd, clients_paused ? 0 : POLLIN, -3);
    if (r->worker.in_fd >= 0)
        add_pfd(r, &n, r->worker.in_fd, worker_held ? 0 : POLLIN, -1);
    if (r->worker.out_fd >= 0 && bench_outq_len(&r->worker.out))
        add_pfd(r, &n, r->worker.out_fd, POLLOUT, -1);
    for (int i = 0; i < r->client_cap; i++) {
        relay_peer *c = &r->clients[i];
        if (!c->used)
            continue;
        short in = c->in_fd >= 0 && !clients_paused ? POLLIN : 0;
        short out = bench_outq_len(&c->out) ? POLLOUT : 0;
        if (c->in_fd == c->out_fd) {
            add_pfd(r, &n, c->in_fd, in | out, i);
            continue;
        }
        if (c->in_fd >= 0)
            add_pfd(r, &n, c->in_fd, in, i);
        if (out)
            add_pfd(r, &n, c->out_fd, out, i);
    }
    return n;
}

static void on_signal(relay *r) {
    struct signalfd_siginfo si;
    while (read(r->sig_fd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGCHLD) {
            int status;
            if (waitpid(r->worker_pid, &status, WNOHANG) == r->worker_pid) {
                r->worker_pid = -1;
                if (!r->stop)
                    worker_gone(r, "exited");
            }
        } else {
            r->stop = 1; /* SIGTERM, SIGINT */
        }
    }
}

static void on_accept(relay *r) {
    for (;;) {
        int fd = accept4(r->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        if (client_open(r, fd, fd) < 0)
            close(fd);
    }
}

static void on_client(relay *r, int slot, int fd, short revents) {
    relay_peer *c = &r->clients[slot];
    if ((revents & POLLOUT) && fd == c->out_fd && bench_outq_flush(&c->out, c->out_fd) < 0) {
        client_close(r, slot);
        return;
    }
    if (fd == c->in_fd && (revents & (POLLIN | POLLHUP | POLLERR))) {
        int got = read_peer(c);
        if (got > 0) {
            from_client(r, slot);
        } else if (got < 0 && r->mode == BENCH_STDIO && bench_inbuf_pending(&c->in) < c->in.max) {
            c->in_fd = -1; /* stdin ended: answer what is in flight, then stop */
            r->stdin_done = 1;
        } else if (got < 0) {
            client_close(r, slot);
        }
    } else if (fd == c->out_fd && (revents & (POLLERR | POLLHUP))) {
        client_close(r, slot);
    }
}

static void on_worker(relay *r, int fd, short revents) {
    relay_peer *w = &r->worker;
    if (fd == w->out_fd) {
        if ((revents & (POLLERR | POLLHUP)) || bench_outq_flush(&w->out, w->out_fd) < 0)
            worker_gone(r, "closed its stdin");
        return;
    }
    int got = read_peer(w);
    if (got > 0)
        from_worker(r);
    else if (got < 0)
        worker_gone(r, "closed its stdout (or wrote a line over max_input_buffer)");
}

static int finished(const relay *r) {
    if (r->stop)
        return 1;
    if (!r->stdin_done || r->fifo.len)
        return 0;
    return bench_outq_len(&r->clients[0].out) == 0;
}

static int parse_args(relay *r, int argc, char **argv, const char **config) {
    *config = NULL;
    r->mode = BENCH_STDIO;
    r->batch = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--config") == 0 && v) {
            *config = v;
            i++;
        } else if (strcmp(a, "--unix") == 0 && v) {
            r->mode = BENCH_UNIX;
            r->address = v;
            i++;
        } else if (strcmp(a, "--tcp") == 0 && v) {
            r->mode = BENCH_TCP;
            r->address = v;
            i++;
        } else if (strcmp(a, "--log-level") == 0 && v) {
            i++; /* accepted for the daemon's command line; the relay logs errors only */
        } else if (strcmp(a, "--stdio") == 0) {
            r->mode = BENCH_STDIO;
        } else if (strcmp(a, "--per-line") == 0) {
            r->batch = 0;
        } else {
            return -1;
        }
    }
    return *config ? 0 : -1;
}

static void setup(relay *r) {
    char err[512];
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    r->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (r->sig_fd < 0)
        die("signalfd failed");
    int to_worker, from_worker_fd;
    r->worker_pid = bench_spawn(r->cfg.argv, &to_worker, &from_worker_fd, err, sizeof err);
    if (r->worker_pid < 0)
        die(err);
    peer_init(&r->worker, from_worker_fd, to_worker, r->cfg.max_input_buffer);
    r->listen_fd = -1;
    if (r->mode == BENCH_STDIO) {
        fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
        fcntl(STDOUT_FILENO, F_SETFL, fcntl(STDOUT_FILENO, F_GETFL) | O_NONBLOCK);
        if (client_open(r, STDIN_FILENO, STDOUT_FILENO) < 0)
            die("out of memory");
        return;
    }
    r->listen_fd = bench_net_listen(r->mode, r->address, err, sizeof err);
    if (r->listen_fd < 0)
        die(err);
}

static void teardown(relay *r) {
    for (int i = 0; i < r->client_cap; i++)
        if (r->clients[i].used)
            client_close(r, i);
    /* EOF on its stdin ends bench_echo; a closed stdout ends it even when
     * it is blocked writing answers nobody will read. */
    if (r->worker.out_fd >= 0)
        close(r->worker.out_fd);
    if (r->worker.in_fd >= 0)
        close(r->worker.in_fd);
    if (r->worker_pid > 0) {
        if (r->status)
            kill(r->worker_pid, SIGTERM);
        waitpid(r->worker_pid, NULL, 0);
    }
    bench_inbuf_fini(&r->worker.in);
    bench_outq_fini(&r->worker.out);
    if (r->listen_fd >= 0) {
        close(r->listen_fd);
        if (r->mode == BENCH_UNIX)
            unlink(r->address);
    }
    close(r->sig_fd);
    free(r->clients);
    free(r->fifo.entries);
    free(r->pfds);
    free(r->owners);
    relay_config_fini(&r->cfg);
}

int main(int argc, char **argv) {
    relay r;
    memset(&r, 0, sizeof r);
    const char *config;
    char err[512];
    if (parse_args(&r, argc, argv, &config) < 0) {
        fprintf(stderr, "usage: bench_relay --config PATH [--stdio | --unix PATH | --tcp HOST:PORT]"
                        " [--log-level L] [--per-line]\n");
        return 2;
    }
    if (relay_config_load(config, &r.cfg, err, sizeof err) < 0)
        die(err);
    setup(&r);
    while (!finished(&r)) {
        int n = build_pollset(&r);
        if (poll(r.pfds, (nfds_t)n, -1) < 0) {
            if (errno == EINTR)
                continue;
            die("poll failed");
        }
        for (int i = 0; i < n && !r.stop; i++) {
            short ev = r.pfds[i].revents;
            if (!ev)
                continue;
            int owner = r.owners[i];
            if (owner == -2)
                on_signal(&r);
            else if (owner == -3)
                on_accept(&r);
            else if (owner == -1)
                on_worker(&r, r.pfds[i].fd, ev);
            else if (r.clients[owner].used)
                on_client(&r, owner, r.pfds[i].fd, ev);
        }
    }
    int status = r.status;
    teardown(&r);
    return status;
}
