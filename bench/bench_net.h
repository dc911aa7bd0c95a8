/* Unix and TCP sockets for bench_relay (listening) and bench_load
 * (connecting). Addresses are "PATH" for unix and "HOST:PORT" for TCP. */
#ifndef BENCH_NET_H
#define BENCH_NET_H

#include <stddef.h>

typedef enum { BENCH_STDIO = 0, BENCH_UNIX, BENCH_TCP } bench_mode;

/* A non-blocking, close-on-exec listening socket; a stale unix socket file
 * is replaced. Returns the fd, or -1 with a message in err. */
int bench_net_listen(bench_mode mode, const char *address, char *err, size_t err_size);
/* A blocking connect, then the socket is made non-blocking. Returns the fd,
 * or -1 with errno set (ECONNREFUSED / ENOENT while the server starts). */
int bench_net_connect(bench_mode mode, const char *address);
/* A TCP port on 127.0.0.1 that was free a moment ago. Returns it, or -1. */
int bench_net_free_port(void);

#endif
