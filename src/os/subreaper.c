#include "subreaper.h"
#include "status.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* Pids read from one thread's children file at a look: 4 KiB of text holds
 * about 500; what does not fit waits for the next look, which killing
 * these brings (each exit is a SIGCHLD). */
#define SB_SUBREAPER_TEXT 4096
#define SB_SUBREAPER_PIDS 256

int sb_subreaper_start(void) {
#ifdef PR_SET_CHILD_SUBREAPER
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? STDIO_BUS_OK : STDIO_BUS_ERR;
#else
    errno = ENOSYS;
    return STDIO_BUS_ERR;
#endif
}

/* The children of one thread of ours. A child stays ours until we reap it,
 * which only this thread does, so its process group can be asked after. */
static int children_of_task(const char *tid, sb_stray *kids, int cap, bool *more) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%.20s/children", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return STDIO_BUS_ERR;
    char text[SB_SUBREAPER_TEXT];
    ssize_t len;
    do
        len = read(fd, text, sizeof text);
    while (len < 0 && errno == EINTR);
    int saved = errno;
    close(fd);
    if (len < 0) {
        errno = saved;
        return STDIO_BUS_ERR;
    }
    if (len == (ssize_t)sizeof text)
        *more = true;
    pid_t pids[SB_SUBREAPER_PIDS];
    int room = cap < SB_SUBREAPER_PIDS ? cap : SB_SUBREAPER_PIDS;
    int n = sb_strays_parse(text, (size_t)len, pids, room);
    if (n == STDIO_BUS_EFULL) {
        *more = true;
        n = room;
    } else if (n < 0) {
        errno = EPROTO;
        return STDIO_BUS_ERR;
    }
    int kept = 0;
    for (int i = 0; i < n; i++) {
        pid_t pgid = getpgid(pids[i]);
        if (pgid > 0)
            kids[kept++] = (sb_stray){pids[i], pgid};
    }
    return kept;
}

int sb_subreaper_children(sb_stray *kids, int cap, bool *more) {
    *more = false;
    DIR *dir = opendir("/proc/self/task");
    if (!dir)
        return STDIO_BUS_ERR;
    int n = 0;
    bool read_one = false;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            *more = true;
            break;
        }
        int got = children_of_task(e->d_name, kids + n, cap - n, more);
        if (got < 0)
            continue; /* a thread that just ended */
        read_one = true;
        n += got;
    }
    int saved = errno;
    closedir(dir);
    errno = saved;
    return read_one ? n : STDIO_BUS_ERR;
}

void sb_subreaper_kill(const sb_stray *s) {
    if (s->pgid == s->pid)
        kill(-s->pid, SIGKILL);
    kill(s->pid, SIGKILL);
}
