#include "stderr_watch.h"
#include "log.h"
#include "status.h"

#include <unistd.h>

static void on_stderr_event(sb_loop *l, void *data, int fd, short revents) {
    sb_stderr_watch *sw = data;
    int rc = revents & (POLLERR | POLLHUP | POLLNVAL) ? STDIO_BUS_ERR : sb_log_flush();
    if (rc == 0)
        return; /* still full: wait again */
    sb_loop_del(l, fd);
    sw->state = rc < 0 ? -1 : 0;
    sw->failed_at = sb_log_clears;
}

void sb_stderr_watch_tend(sb_stderr_watch *sw, sb_loop *loop) {
    if (sw->state < 0 && sw->failed_at != sb_log_clears)
        sw->state = 0; /* stderr took lines since it failed: watch it again */
    if (sw->state == 0 && sb_loop_add(loop, STDERR_FILENO, POLLOUT, on_stderr_event, sw) == 0)
        sw->state = 1;
}
