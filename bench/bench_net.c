#include "bench_net.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static int unix_addr(struct sockaddr_un *a, const char *path) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a->sun_path)
        return -1;
    strcpy(a->sun_path, path);
    return 0;
}

/* Splits "host:port" (the last colon separates). */
static int split(const char *address, char *host, size_t host_size, const char **port) {
    const char *colon = strrchr(address, ':');
    if (!colon || (size_t)(colon - address) >= host_size)
        return -1;
    memcpy(host, address, (size_t)(colon - address));
    host[colon - address] = '\0';
    *port = colon + 1;
    return 0;
}

static struct addrinfo *resolve(const char *address) {
    char host[256];
    const char *port;
    if (split(address, host, sizeof host, &port) < 0)
        return NULL;
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &res) != 0)
        return NULL;
    return res;
}

int bench_net_listen(bench_mode mode, const char *address, char *err, size_t err_size) {
    int fd = -1;
    if (mode == BENCH_UNIX) {
        struct sockaddr_un a;
        struct stat st;
        if (unix_addr(&a, address) < 0) {
            snprintf(err, err_size, "%s: path too long", address);
            return -1;
        }
        if (lstat(address, &st) == 0 && S_ISSOCK(st.st_mode))
            unlink(address);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 511) < 0)
            goto fail;
        return fd;
    }
    struct addrinfo *res = resolve(address);
    if (!res) {
        snprintf(err, err_size, "%s: not a resolvable host:port", address);
        return -1;
    }
    fd = socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 511) < 0) {
        freeaddrinfo(res);
        goto fail;
    }
    freeaddrinfo(res);
    return fd;
fail:
    snprintf(err, err_size, "listen on %s: %s", address, strerror(errno));
    if (fd >= 0)
        close(fd);
    return -1;
}

int bench_net_connect(bench_mode mode, const char *address) {
    int fd;
    if (mode == BENCH_UNIX) {
        struct sockaddr_un a;
        if (unix_addr(&a, address) < 0) {
            errno = ENAMETOOLONG;
            return -1;
        }
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
    } else {
        struct addrinfo *res = resolve(address);
        if (!res) {
            errno = EINVAL;
            return -1;
        }
        fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
            int e = errno;
            if (fd >= 0)
                close(fd);
            freeaddrinfo(res);
            errno = e;
            return -1;
        }
        freeaddrinfo(res);
        int one = 1; /* requests are whole lines: do not wait for more */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

int bench_net_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {0};
    socklen_t len = sizeof a;
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}
