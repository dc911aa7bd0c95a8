#include "loop.h"
#include "status.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int sb_loop_init(sb_loop *l) {
    memset(l, 0, sizeof *l);
    return STDIO_BUS_OK;
}

void sb_loop_fini(sb_loop *l) {
    free(l->slots);
    free(l->pfds);
    free(l->fired);
    memset(l, 0, sizeof *l);
}

static int ensure_slot(sb_loop *l, int fd) {
    if (fd < l->slot_count)
        return STDIO_BUS_OK;
    int n = l->slot_count ? l->slot_count : 64;
    while (n <= fd)
        n *= 2;
    sb_loop_slot *grown = realloc(l->slots, (size_t)n * sizeof *grown);
    if (!grown)
        return STDIO_BUS_ERR;
    for (int i = l->slot_count; i < n; i++)
        grown[i] = (sb_loop_slot){NULL, NULL, 0, -1};
    l->slots = grown;
    l->slot_count = n;
    return STDIO_BUS_OK;
}

int sb_loop_add(sb_loop *l, int fd, short events, sb_loop_fn fn, void *data) {
    if (ensure_slot(l, fd) < 0)
        return STDIO_BUS_ERR;
    if (l->count == l->capacity) {
        int n = l->capacity ? l->capacity * 2 : 64;
        struct pollfd *pfds = realloc(l->pfds, (size_t)n * sizeof *pfds);
        if (!pfds)
            return STDIO_BUS_ERR;
        l->pfds = pfds;
        sb_loop_fired *fired = realloc(l->fired, (size_t)n * sizeof *fired);
        if (!fired)
            return STDIO_BUS_ERR;
        l->fired = fired;
        l->capacity = n;
    }
    sb_loop_slot *s = &l->slots[fd];
    s->fn = fn;
    s->data = data;
    s->gen++;
    s->dense = l->count;
    l->pfds[l->count++] = (struct pollfd){fd, events, 0};
    return STDIO_BUS_OK;
}

void sb_loop_set(sb_loop *l, int fd, short events) {
    if (fd < l->slot_count && l->slots[fd].dense >= 0)
        l->pfds[l->slots[fd].dense].events = events;
}

short sb_loop_get(const sb_loop *l, int fd) {
    if (fd < l->slot_count && l->slots[fd].dense >= 0)
        return l->pfds[l->slots[fd].dense].events;
    return 0;
}

void sb_loop_del(sb_loop *l, int fd) {
    if (fd >= l->slot_count || l->slots[fd].dense < 0)
        return;
    int i = l->slots[fd].dense;
    l->pfds[i] = l->pfds[--l->count];
    if (i < l->count)
        l->slots[l->pfds[i].fd].dense = i;
    l->slots[fd].dense = -1;
    l->slots[fd].fn = NULL;
    l->slots[fd].gen++;
}

int sb_loop_run_once(sb_loop *l, int timeout_ms) {
    int ready = poll(l->pfds, (nfds_t)l->count, timeout_ms);
    if (ready < 0)
        return errno == EINTR ? 0 : STDIO_BUS_ERR;
    int fired = 0;
    for (int i = 0; i < l->count && fired < ready; i++) {
        if (!l->pfds[i].revents)
            continue;
        int fd = l->pfds[i].fd;
        l->fired[fired++] = (sb_loop_fired){fd, l->pfds[i].revents, l->slots[fd].gen};
    }
    int dispatched = 0;
    for (int i = 0; i < fired; i++) {
        const sb_loop_fired *f = &l->fired[i];
        sb_loop_slot *s = &l->slots[f->fd];
        if (s->dense < 0 || s->gen != f->gen || !s->fn)
            continue; /* removed or re-registered by an earlier handler */
        s->fn(l, s->data, f->fd, f->revents);
        dispatched++;
    }
    return dispatched;
}
