/* libbench_malloc_count.so: counts the allocator calls of one process.
 *
 * LD_PRELOAD it into the server; at exit it appends one line
 *   malloc_count pid=N malloc=N calloc=N realloc=N free=N memalign=N
 * to the file named by BENCH_MALLOC_COUNT_OUT (stderr when unset). It
 * removes LD_PRELOAD from the environment at load, so the workers the
 * server spawns are not counted. The allocator itself is glibc's, reached
 * through its __libc_* entry points (no dlsym, so no recursion at start). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t size);

static uint64_t n_malloc, n_calloc, n_realloc, n_free, n_memalign;
static char out_path[512];

void *malloc(size_t size) {
    n_malloc++;
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size) {
    n_calloc++;
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size) {
    n_realloc++;
    return __libc_realloc(p, size);
}

void free(void *p) {
    if (p)
        n_free++;
    __libc_free(p);
}

int posix_memalign(void **out, size_t align, size_t size) {
    n_memalign++;
    void *p = __libc_memalign(align, size);
    if (!p)
        return 12; /* ENOMEM */
    *out = p;
    return 0;
}

void *aligned_alloc(size_t align, size_t size) {
    n_memalign++;
    return __libc_memalign(align, size);
}

__attribute__((constructor)) static void start(void) {
    const char *path = getenv("BENCH_MALLOC_COUNT_OUT");
    if (path && strlen(path) < sizeof out_path)
        strcpy(out_path, path);
    unsetenv("LD_PRELOAD");
}

__attribute__((destructor)) static void finish(void) {
    char line[256];
    int n = snprintf(line, sizeof line,
                     "malloc_count pid=%d malloc=%llu calloc=%llu realloc=%llu free=%llu "
                     "memalign=%llu\n",
                     (int)getpid(), (unsigned long long)n_malloc, (unsigned long long)n_calloc,
                     (unsigned long long)n_realloc, (unsigned long long)n_free,
                     (unsigned long long)n_memalign);
    FILE *f = out_path[0] ? fopen(out_path, "a") : NULL;
    if (f) {
        fwrite(line, 1, (size_t)n, f);
        fclose(f);
    } else {
        ssize_t ignored = write(STDERR_FILENO, line, (size_t)n);
        (void)ignored;
    }
}
