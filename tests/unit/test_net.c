/* Unit tests for the unix socket file's life (src/os/net.c; SB-I-22): the
 * daemon removes the file at exit only while it is still its own. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "net.h"
#include "status.h"

static char dir[64];
static char path[128];

static void setup(void) {
    strcpy(dir, "/tmp/sb-net-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/bus.sock", dir);
}

static void teardown(void) {
    unlink(path);
    rmdir(dir);
}

TestSuite(net, .init = setup, .fini = teardown);

static int listen_at(sb_net_unix_id *id) {
    char err[256];
    int fd = sb_net_listen_unix(path, id, err, sizeof err);
    cr_assert_geq(fd, 0, "listen: %s", err);
    return fd;
}

Test(net, own_socket_file_is_removed) {
    sb_net_unix_id id;
    int fd = listen_at(&id);
    cr_assert_eq(sb_net_unlink_unix(path, &id), 1);
    struct stat st;
    cr_assert_eq(lstat(path, &st), -1);
    close(fd);
}

Test(net, socket_file_of_another_daemon_is_left_alone) {
    sb_net_unix_id ours, theirs;
    int fd = listen_at(&ours);
    unlink(path); /* removed by someone, then taken by another daemon */
    int other = listen_at(&theirs);
    cr_assert_eq(sb_net_unlink_unix(path, &ours), 0);
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "the other daemon's socket file was removed");
    cr_assert_eq(sb_net_unlink_unix(path, &theirs), 1);
    close(fd);
    close(other);
}

Test(net, other_file_at_the_path_is_left_alone) {
    sb_net_unix_id id;
    int fd = listen_at(&id);
    unlink(path);
    FILE *f = fopen(path, "w"); /* a regular file now: never ours */
    cr_assert_not_null(f);
    fclose(f);
    cr_assert_eq(sb_net_unlink_unix(path, &id), 0);
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0);
    cr_assert(S_ISREG(st.st_mode));
    close(fd);
}

Test(net, missing_file_is_not_an_error) {
    sb_net_unix_id id;
    int fd = listen_at(&id);
    unlink(path);
    cr_assert_eq(sb_net_unlink_unix(path, &id), 0);
    close(fd);
}

Test(net, has_data_peeks_without_consuming) {
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_not(sb_net_has_data(sv[0]), "nothing sent yet");
    cr_assert_eq(write(sv[1], "x", 1), 1);
    cr_assert(sb_net_has_data(sv[0]));
    cr_assert(sb_net_has_data(sv[0]), "the peek consumed the byte");
    close(sv[1]);
    cr_assert(sb_net_has_data(sv[0]), "a byte sent before the hang-up is still readable");
    char b;
    cr_assert_eq(read(sv[0], &b, 1), 1);
    cr_assert_not(sb_net_has_data(sv[0]), "end of stream");
    close(sv[0]);
}
