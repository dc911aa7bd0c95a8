#include "net.h"
#include "status.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define SB_BACKLOG 511

static int fill_unix_addr(struct sockaddr_un *addr, const char *path) {
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof addr->sun_path)
        return STDIO_BUS_EINVAL;
    strcpy(addr->sun_path, path);
    return STDIO_BUS_OK;
}

/* True when something accepts connections on the socket file at path. */
static int unix_socket_is_live(const struct sockaddr_un *addr) {
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int live = connect(fd, (const struct sockaddr *)addr, sizeof *addr) == 0;
    close(fd);
    return live;
}

int sb_net_listen_unix(const char *path, sb_net_unix_id *id, char *err, size_t err_size) {
    struct sockaddr_un addr;
    if (fill_unix_addr(&addr, path) < 0) {
        snprintf(err, err_size, "--unix %.100s: path too long", path);
        return STDIO_BUS_ERR;
    }
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(err, err_size, "--unix %.200s: exists and is not a socket", path);
            return STDIO_BUS_ERR;
        }
        if (unix_socket_is_live(&addr)) {
            snprintf(err, err_size, "--unix %.200s: another process is listening on it", path);
            return STDIO_BUS_ERR;
        }
        unlink(path); /* stale: its daemon is gone */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, err_size, "socket: %s", strerror(errno));
        return STDIO_BUS_ERR;
    }
    /* Owner-only from the first instant: no window where others connect. */
    mode_t old_mask = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    int bind_errno = errno;
    umask(old_mask);
    if (rc < 0 || listen(fd, SB_BACKLOG) < 0 || lstat(path, &st) < 0) {
        snprintf(err, err_size, "--unix %.200s: %s", path, strerror(rc < 0 ? bind_errno : errno));
        close(fd);
        return STDIO_BUS_ERR;
    }
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    return fd;
}

int sb_net_unlink_unix(const char *path, const sb_net_unix_id *id) {
    struct stat st;
    if (lstat(path, &st) < 0 || !S_ISSOCK(st.st_mode) || st.st_dev != id->dev ||
        st.st_ino != id->ino)
        return 0;
    return unlink(path) == 0;
}

int sb_net_listen_tcp(const char *host, const char *port, char *bound, size_t bound_size, char *err,
                      size_t err_size) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, err_size, "--tcp %.100s:%s: %s", host, port, gai_strerror(gai));
        return STDIO_BUS_ERR;
    }
    int fd = -1, last_errno = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last_errno = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (ai->ai_family == AF_INET6) /* bind exactly the v6 host given */
            setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, SB_BACKLOG) == 0)
            break;
        last_errno = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, err_size, "--tcp %.100s:%s: %s", host, port, strerror(last_errno));
        return STDIO_BUS_ERR;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char h[NI_MAXHOST], p[NI_MAXSERV];
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0 &&
        getnameinfo((struct sockaddr *)&ss, len, h, sizeof h, p, sizeof p,
                    NI_NUMERICHOST | NI_NUMERICSERV) == 0)
        snprintf(bound, bound_size, ss.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, p);
    else
        snprintf(bound, bound_size, "%s:%s", host, port);
    return fd;
}

bool sb_net_has_data(int fd) {
    char byte;
    ssize_t n;
    do
        n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    while (n < 0 && errno == EINTR);
    return n > 0;
}

bool sb_net_pending(int listen_fd) {
    struct pollfd p = {.fd = listen_fd, .events = POLLIN};
    int n;
    do
        n = poll(&p, 1, 0);
    while (n < 0 && errno == EINTR);
    return n > 0 && (p.revents & POLLIN);
}

int sb_net_accept(int listen_fd) {
    for (;;) {
        int fd = accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0)
            return fd;
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return STDIO_BUS_EAGAIN;
        return STDIO_BUS_ERR;
    }
}
