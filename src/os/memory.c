#include "memory.h"

#include <stdlib.h> /* defines __GLIBC__ */
#ifdef __GLIBC__
#include <malloc.h>
#endif

/* glibc's default threshold, made fixed: left alone, it follows the largest
 * block freed (up to 32 MiB), and a 4 MiB output queue freed once makes
 * every later one a heap block. */
#define SB_MEMORY_MMAP_MIN (128 * 1024)

void sb_memory_tune(void) {
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, SB_MEMORY_MMAP_MIN);
#endif
}

void sb_memory_give_back(void) {
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}
