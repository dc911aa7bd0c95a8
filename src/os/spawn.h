/* Spawning a worker process (spec 3.3: fork/exec with stdin/stdout pipes),
 * the libuv way: every fd close-on-exec, exec errors reported back through
 * a close-on-exec pipe, every signal blocked around fork() (the parent's
 * mask restored after), signal dispositions and mask reset in the child,
 * _exit(127) when exec fails, only async-signal-safe calls between fork and
 * exec (the environment is built before fork). */
#ifndef SB_SPAWN_H
#define SB_SPAWN_H

#include <sys/types.h>

typedef struct {
    pid_t pid;
    int stdin_fd;  /* write end, non-blocking, close-on-exec */
    int stdout_fd; /* read end, non-blocking, close-on-exec */
    int stderr_fd; /* read end, non-blocking, close-on-exec */
} sb_child;

/* flags of sb_spawn */
#define SB_SPAWN_GROUP 1u /* the child leads a process group of its own (pgid = pid) */

/* Starts path with argv and the daemon's environment plus the NULL-
 * terminated "KEY=VALUE" strings in extra_env. With SB_SPAWN_GROUP the
 * child is made the leader of a new process group before exec (setpgid in
 * the child and in the parent, so the group exists whichever runs first):
 * kill(-pid, sig) then reaches whatever it starts, unless that leaves the
 * group itself.
 * Returns 0 when exec succeeded; STDIO_BUS_ERR with errno set when pipes
 * or fork failed (no child) or exec failed (child reaped; *exec_errno set,
 * child->pid = the reaped pid). */
int sb_spawn(const char *path, char *const argv[], char *const extra_env[], unsigned flags,
             sb_child *child, int *exec_errno);

#endif
