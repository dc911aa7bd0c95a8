#include "load_traffic.h"
#include "load_server.h"
#include "scan.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How many request bytes are generated ahead of the socket. */
#define LOAD_OUT_BATCH (256 * 1024)

enum { REQ_UNSENT = 0, REQ_SENT, REQ_ANSWERED };

typedef struct {
    int64_t sent_ns;
    uint32_t pad_len; /* payload bytes, to check the echo */
    uint32_t session; /* index among the connection's sessionIds */
    uint16_t conn;
    uint8_t state;
} load_req;

typedef struct {
    const load_opts *o;
    load_conn *conns;
    int k;
    load_req *reqs;
    long next_id;
    long settled;  /* requests answered, rightly or wrongly */
    char *pattern; /* 'a'..'z' repeated: request n's payload starts at n % 26 */
    load_result *res;
    int64_t last_answer_ns;
} traffic;

void load_conn_init(load_conn *c, int in_fd, int out_fd, size_t max_line) {
    memset(c, 0, sizeof *c);
    c->in_fd = in_fd;
    c->out_fd = out_fd;
    bench_inbuf_init(&c->in, max_line);
}

void load_conn_fini(load_conn *c) {
    bench_inbuf_fini(&c->in);
    free(c->out);
    c->out = NULL;
}

static void note(load_result *res, const char *fmt, long a, long b) {
    if (!res->error[0])
        snprintf(res->error, sizeof res->error, fmt, a, b);
}

static int wait_fd(int fd, short events, int64_t deadline_ns) {
    int64_t left = (deadline_ns - load_now_ns()) / 1000000;
    if (left <= 0)
        return -1;
    struct pollfd p = {fd, events, 0};
    return poll(&p, 1, (int)(left > 1000 ? 1000 : left)) < 0 && errno != EINTR ? -1 : 0;
}

int load_conn_roundtrip(load_conn *c, const char *line, int64_t deadline_ns) {
    size_t len = strlen(line), done = 0;
    while (done < len) {
        ssize_t w = write(c->out_fd, line + done, len - done);
        if (w > 0)
            done += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EINTR)
            return -1;
        else if (wait_fd(c->out_fd, POLLOUT, deadline_ns) < 0)
            return -1;
    }
    for (;;) {
        const char *got;
        if (bench_inbuf_next(&c->in, &got) > 0)
            return 0;
        size_t avail;
        char *space = bench_inbuf_space(&c->in, &avail);
        if (!space)
            return -1;
        ssize_t n = read(c->in_fd, space, avail);
        if (n > 0)
            bench_inbuf_commit(&c->in, (size_t)n);
        else if (n == 0 || (errno != EAGAIN && errno != EINTR))
            return -1;
        else if (wait_fd(c->in_fd, POLLIN, deadline_ns) < 0)
            return -1;
    }
}

static size_t session_text(char *buf, size_t size, int conn, uint32_t session) {
    return (size_t)snprintf(buf, size, "\"s%d-%u\"", conn, session);
}

/* Appends requests to c's output while its window and quota allow. */
static int fill(traffic *t, int ci) {
    load_conn *c = &t->conns[ci];
    const load_opts *o = t->o;
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    while (c->inflight < o->inflight && c->issued < c->quota) {
        long id = t->next_id;
        uint32_t session = c->sessions ? (uint32_t)(c->issued % c->sessions) : 0;
        char head[96], tail[96], sid[48];
        size_t head_len = (size_t)snprintf(
            head, sizeof head,
            "{\"jsonrpc\":\"2.0\",\"id\":%ld,\"method\":\"echo\",\"params\":{\"p\":\"", id);
        size_t tail_len = 4;
        memcpy(tail, "\"}", 2);
        if (c->sessions) {
            size_t sid_len = session_text(sid, sizeof sid, ci, session);
            tail_len =
                (size_t)snprintf(tail, sizeof tail, "\"},\"sessionId\":%.*s}\n", (int)sid_len, sid);
        } else {
            memcpy(tail + 2, "}\n", 2);
        }
        size_t pad = o->payload > head_len + tail_len ? o->payload - head_len - tail_len : 0;
        size_t need = head_len + pad + tail_len;
        size_t queued = c->out_len - c->out_off;
        if (queued && queued + need > LOAD_OUT_BATCH)
            break;
        if (c->out_len + need > c->out_cap) {
            if (c->out_off) {
                memmove(c->out, c->out + c->out_off, queued);
                c->out_len = queued;
                c->out_off = 0;
            }
            if (c->out_len + need > c->out_cap) {
                size_t cap = c->out_cap ? c->out_cap : LOAD_OUT_BATCH;
                while (cap < c->out_len + need)
                    cap *= 2;
                char *grown = realloc(c->out, cap);
                if (!grown)
                    return -1;
                c->out = grown;
                c->out_cap = cap;
            }
        }
        char *p = c->out + c->out_len;
        memcpy(p, head, head_len);
        memcpy(p + head_len, t->pattern + id % 26, pad);
        memcpy(p + head_len + pad, tail, tail_len);
        c->out_len += need;

        load_req *r = &t->reqs[id];
        r->sent_ns = load_now_ns();
        r->pad_len = (uint32_t)pad;
        r->session = session;
        r->conn = (uint16_t)ci;
        r->state = REQ_SENT;
        t->next_id++;
        c->issued++;
        c->inflight++;
    }
    return 0;
}

/* Writes what c's socket takes. Returns -1 when the server is gone. */
static int flush(load_conn *c) {
    while (c->out_off < c->out_len) {
        ssize_t w = write(c->out_fd, c->out + c->out_off, c->out_len - c->out_off);
        if (w > 0) {
            c->out_off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return 0;
        return -1;
    }
    return 0;
}

static int parse_id(const bench_span *id, long *out) {
    long v = 0;
    if (!id->p || id->n == 0 || id->n > 15)
        return -1;
    for (size_t i = 0; i < id->n; i++) {
        if (id->p[i] < '0' || id->p[i] > '9')
            return -1;
        v = v * 10 + (id->p[i] - '0');
    }
    *out = v;
    return 0;
}

static int payload_intact(const traffic *t, long id, const load_req *r, const bench_span *result) {
    static const char open[] = "{\"p\":\"";
    size_t pad = r->pad_len;
    return result->p && result->n == pad + 8 && memcmp(result->p, open, 6) == 0 &&
           memcmp(result->p + 6, t->pattern + id % 26, pad) == 0 &&
           memcmp(result->p + 6 + pad, "\"}", 2) == 0;
}

static void check_answer(traffic *t, int ci, const char *line, size_t len) {
    load_result *res = t->res;
    bench_fields f;
    long id;
    if (bench_scan_fields(line, len, &f) < 0 || !f.id.p) {
        res->malformed++;
        note(res, "connection %ld: a line that is not an answer (%ld bytes)", ci, (long)len);
        return;
    }
    if (parse_id(&f.id, &id) < 0 || id >= t->next_id) {
        res->unknown++;
        note(res, "connection %ld: an answer to an id never sent (%ld bytes)", ci, (long)len);
        return;
    }
    load_req *r = &t->reqs[id];
    if (r->state == REQ_ANSWERED) {
        res->dup++;
        note(res, "request %ld answered twice (second on connection %ld)", id, ci);
        return;
    }
    r->state = REQ_ANSWERED;
    t->settled++;
    t->conns[r->conn].inflight--;
    int64_t now = load_now_ns();
    t->last_answer_ns = now;
    if (r->conn != ci) {
        res->misrouted++;
        note(res, "request %ld answered on connection %ld", id, ci);
        return;
    }
    char sid[48];
    size_t sid_len = t->conns[ci].sessions ? session_text(sid, sizeof sid, ci, r->session) : 0;
    if (sid_len ? !f.session_id.p || f.session_id.n != sid_len ||
                      memcmp(f.session_id.p, sid, sid_len) != 0
                : f.session_id.p != NULL) {
        res->badsid++;
        note(res, "request %ld answered with the wrong sessionId (connection %ld)", id, ci);
        return;
    }
    if (!payload_intact(t, id, r, &f.result)) {
        res->badpayload++;
        note(res, "request %ld answered with a damaged payload (connection %ld)", id, ci);
        return;
    }
    res->ok++;
    res->lat_ns[res->lat_count++] = now - r->sent_ns;
}

/* One read on c, then every complete line checked. */
static void drain(traffic *t, int ci) {
    load_conn *c = &t->conns[ci];
    size_t avail;
    char *space = bench_inbuf_space(&c->in, &avail);
    if (!space) {
        note(t->res, "connection %ld: an answer longer than %ld bytes", ci, (long)c->in.max);
        c->closed = 1;
        return;
    }
    ssize_t n = read(c->in_fd, space, avail);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n <= 0) {
        note(t->res, "connection %ld closed by the server (%ld)", ci, (long)n);
        c->closed = 1;
        return;
    }
    bench_inbuf_commit(&c->in, (size_t)n);
    const char *line;
    size_t len;
    while ((len = bench_inbuf_next(&c->in, &line)) > 0)
        check_answer(t, ci, line, len);
}

static int setup(traffic *t, load_conn *conns, int k, const load_opts *o, load_result *res) {
    memset(t, 0, sizeof *t);
    memset(res, 0, sizeof *res);
    t->o = o;
    t->conns = conns;
    t->k = k;
    t->res = res;
    size_t m = (size_t)(o->messages ? o->messages : 1);
    t->reqs = calloc(m, sizeof *t->reqs);
    res->lat_ns = malloc(m * sizeof *res->lat_ns);
    t->pattern = malloc(o->payload + 26);
    if (!t->reqs || !res->lat_ns || !t->pattern)
        return -1;
    for (size_t i = 0; i < o->payload + 26; i++)
        t->pattern[i] = (char)('a' + i % 26);
    for (int i = 0; i < k; i++) {
        conns[i].quota = o->messages / k + (i < o->messages % k);
        conns[i].sessions = o->sessions / k + (i < o->sessions % k);
        conns[i].issued = conns[i].inflight = 0;
    }
    return 0;
}

int load_traffic_run(load_conn *conns, int k, const load_opts *o, load_result *res) {
    traffic t;
    memset(&t, 0, sizeof t);
    struct pollfd *pfds = malloc((size_t)k * 2 * sizeof *pfds);
    int *owner = malloc((size_t)k * 2 * sizeof *owner);
    if (!pfds || !owner || setup(&t, conns, k, o, res) < 0) {
        free(pfds);
        free(owner);
        free(t.reqs);
        free(t.pattern);
        return -1;
    }
    int rc = 0;
    int64_t start = load_now_ns();
    t.last_answer_ns = start;
    while (t.settled < o->messages) {
        int n = 0, open = 0;
        for (int i = 0; i < k; i++) {
            load_conn *c = &conns[i];
            if (c->closed)
                continue;
            if (fill(&t, i) < 0) {
                rc = -1;
                goto out;
            }
            if (flush(c) < 0) {
                note(res, "connection %ld: write failed (%ld)", i, errno);
                c->closed = 1;
                continue;
            }
            open++;
            short out = c->out_off < c->out_len ? POLLOUT : 0;
            if (c->in_fd == c->out_fd) {
                pfds[n] = (struct pollfd){c->in_fd, POLLIN | out, 0};
                owner[n++] = i;
            } else {
                pfds[n] = (struct pollfd){c->in_fd, POLLIN, 0};
                owner[n++] = i;
                if (out) {
                    pfds[n] = (struct pollfd){c->out_fd, POLLOUT, 0};
                    owner[n++] = i;
                }
            }
        }
        if (!open)
            break;
        if (poll(pfds, (nfds_t)n, 200) < 0 && errno != EINTR) {
            rc = -1;
            break;
        }
        for (int i = 0; i < n; i++) {
            load_conn *c = &conns[owner[i]];
            if (c->closed || !pfds[i].revents)
                continue;
            if (pfds[i].fd == c->in_fd && (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                drain(&t, owner[i]);
            else if (pfds[i].revents & (POLLERR | POLLHUP)) {
                note(res, "connection %ld: the server closed its input (%ld)", owner[i], 0);
                c->closed = 1;
            }
        }
        if ((load_now_ns() - t.last_answer_ns) / 1e9 > o->timeout_sec) {
            note(res, "no answer for %ld s: %ld request(s) outstanding", (long)o->timeout_sec,
                 o->messages - t.settled);
            break;
        }
    }
out:
    res->seconds = (double)(t.last_answer_ns - start) / 1e9;
    res->lost = o->messages - t.settled;
    if (rc == 0 && (res->ok != o->messages || res->dup || res->unknown || res->malformed))
        rc = 1;
    free(t.reqs);
    free(t.pattern);
    free(pfds);
    free(owner);
    return rc;
}
