/* bench_echo: the fast echo worker of the benchmarks.
 *
 * Reads NDJSON requests on stdin and answers each line that has an id with
 *   {"jsonrpc":"2.0","id":<id>,"result":<params>,"sessionId":<sessionId>}
 * copying the raw tokens (no JSON library, no decoding). Answers are built
 * as iovecs pointing into the input buffer and written with writev before
 * the next read, so an echoed payload is never copied in user space.
 *
 * usage: bench_echo [--small]   (--small answers "result":{} instead of
 *                                echoing params)
 * Lines without an id are notifications: no answer. Lines the scanner
 * cannot walk are counted on stderr at exit. */
#include "scan.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define ECHO_MIN_BUFFER (64 * 1024)

static struct iovec iov[IOV_MAX];
static int iov_count;

/* Writes every queued iovec; blocking, partial writes resumed. */
static int flush_iov(void) {
    struct iovec *v = iov;
    int n = iov_count;
    while (n > 0) {
        ssize_t w = writev(STDOUT_FILENO, v, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        size_t left = (size_t)w;
        while (n > 0 && left >= v->iov_len) {
            left -= v->iov_len;
            v++;
            n--;
        }
        if (n > 0) {
            v->iov_base = (char *)v->iov_base + left;
            v->iov_len -= left;
        }
    }
    iov_count = 0;
    return 0;
}

static int add(const void *p, size_t n) {
    if (iov_count == IOV_MAX && flush_iov() < 0)
        return -1;
    iov[iov_count].iov_base = (void *)p;
    iov[iov_count].iov_len = n;
    iov_count++;
    return 0;
}

#define ADD_LITERAL(s) add(s, sizeof s - 1)

static int answer(const char *line, size_t len, int small, long *unscannable) {
    bench_fields f;
    if (bench_scan_fields(line, len, &f) < 0) {
        (*unscannable)++;
        return 0;
    }
    if (!f.id.p)
        return 0;
    if (ADD_LITERAL("{\"jsonrpc\":\"2.0\",\"id\":") < 0 || add(f.id.p, f.id.n) < 0 ||
        ADD_LITERAL(",\"result\":") < 0)
        return -1;
    if (!small && f.params.p) {
        if (add(f.params.p, f.params.n) < 0)
            return -1;
    } else if (ADD_LITERAL("{}") < 0) {
        return -1;
    }
    if (f.session_id.p &&
        (ADD_LITERAL(",\"sessionId\":") < 0 || add(f.session_id.p, f.session_id.n) < 0))
        return -1;
    return ADD_LITERAL("}\n");
}

int main(int argc, char **argv) {
    int small = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--small") == 0) {
            small = 1;
        } else {
            fprintf(stderr, "usage: bench_echo [--small]\n");
            return 2;
        }
    }
    size_t cap = ECHO_MIN_BUFFER, start = 0, len = 0, scanned = 0;
    char *buf = malloc(cap);
    if (!buf)
        return 1;
    long unscannable = 0;
    int rc = 0;
    for (;;) {
        if (start > 0) { /* all answers were written: the consumed prefix can go */
            memmove(buf, buf + start, len - start);
            len -= start;
            scanned -= start;
            start = 0;
        }
        if (len == cap) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                rc = 1;
                break;
            }
            buf = grown;
            cap *= 2;
        }
        ssize_t n = read(STDIN_FILENO, buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0;
            break;
        }
        len += (size_t)n;
        const char *nl;
        while ((nl = memchr(buf + scanned, '\n', len - scanned))) {
            size_t end = (size_t)(nl - buf) + 1;
            if (answer(buf + start, end - start, small, &unscannable) < 0) {
                rc = 1;
                goto out;
            }
            start = scanned = end;
        }
        scanned = len;
        if (flush_iov() < 0) {
            rc = 1;
            break;
        }
    }
out:
    if (unscannable)
        fprintf(stderr, "bench_echo: %ld line(s) could not be scanned\n", unscannable);
    free(buf);
    return rc;
}
