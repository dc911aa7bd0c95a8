/* Starting a child process with its stdin and stdout on pipes. */
#ifndef BENCH_SPAWN_H
#define BENCH_SPAWN_H

#include <stddef.h>
#include <sys/types.h>

/* Starts argv[0] (searched on PATH when it has no '/'). With to_child and
 * from_child non-NULL the child's stdin and stdout are pipes whose other
 * ends come back there, close-on-exec and non-blocking; with NULL its stdin
 * is /dev/null and its stdout is ours. stderr is always ours. Signal mask
 * and dispositions are reset in the child. Returns the pid, or -1 with a
 * message in err (exec failures included, reported through a pipe). */
pid_t bench_spawn(char *const argv[], int *to_child, int *from_child, char *err, size_t err_size);

#endif
