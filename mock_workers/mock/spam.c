/* stderr spam (see spam.h). */
#include "spam.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/buf.h"

#define SPAM_LINE 100

void mw_spam_write(long bytes) {
    mc_buf b;
    mc_buf_init(&b);
    for (long n = 1; (long)b.len < bytes; n++) {
        size_t start = b.len;
        mc_buf_printf(&b, "spam %08ld ", n);
        mc_buf_fill(&b, 'x', SPAM_LINE - 1 - (b.len - start));
        mc_buf_append(&b, "\n", 1);
    }
    size_t left = (size_t)bytes, off = 0;
    while (left > 0) {
        ssize_t r = write(STDERR_FILENO, b.data + off, left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        off += (size_t)r;
        left -= (size_t)r;
    }
    mc_buf_fini(&b);
}
