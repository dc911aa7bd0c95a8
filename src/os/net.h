/* Listening sockets for the socket modes (spec 4.1.1). */
#ifndef SB_NET_H
#define SB_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Which file a unix socket was bound to. */
typedef struct {
    dev_t dev;
    ino_t ino;
} sb_net_unix_id;

/* Binds and listens on a unix socket at path, mode 0600 (SB-I-22). A stale
 * socket file (nobody accepts on it) is replaced; a live one is an error.
 * Returns the fd (non-blocking, close-on-exec) or STDIO_BUS_ERR with a
 * reason in err; *id gets the socket file's identity. */
int sb_net_listen_unix(const char *path, sb_net_unix_id *id, char *err, size_t err_size);

/* Removes the socket file at path only if it is still the one *id names
 * (SB-I-22): once removed, the path may belong to another daemon. Returns
 * 1 when removed, 0 when left in place (gone, or another file). */
int sb_net_unlink_unix(const char *path, const sb_net_unix_id *id);

/* Binds exactly host:port (IPv4 literal, IPv6 literal or name) and
 * listens. Returns the fd or STDIO_BUS_ERR with a reason in err; *bound
 * gets the address actually bound, e.g. "127.0.0.1:40123". */
int sb_net_listen_tcp(const char *host, const char *port, char *bound, size_t bound_size, char *err,
                      size_t err_size);

/* True when bytes can be read from the socket fd now (a peek; nothing is
 * consumed). False at end of stream, on an error such as a reset, or when
 * nothing is waiting. */
bool sb_net_has_data(int fd);

/* True when a connection is waiting to be accepted on the listening fd
 * (a poll; nothing is accepted). */
bool sb_net_pending(int listen_fd);

/* Accepts one connection: non-blocking, close-on-exec. Returns the fd,
 * STDIO_BUS_EAGAIN when none is waiting, STDIO_BUS_ERR otherwise. */
int sb_net_accept(int listen_fd);

#endif
