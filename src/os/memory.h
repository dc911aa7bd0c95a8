/* The allocator's side of memory returning after load (issue 27).
 *
 * Client buffers are freed when a client goes idle or leaves (frame.c,
 * outq.c, the idle sweep), yet glibc kept the freed memory: its mmap
 * threshold rises to the largest buffer freed so far, so later large
 * buffers come from the heap, and a heap with live blocks near its top is
 * never trimmed. These two calls make freed buffers go back to the system. */
#ifndef SB_MEMORY_H
#define SB_MEMORY_H

/* At start: buffers of SB_MEMORY_MMAP_MIN bytes or more get pages of their
 * own, unmapped when freed, whatever was freed before. */
void sb_memory_tune(void);

/* When no client holds a buffer any more: gives the free pages inside the
 * heap back to the system (malloc_trim). Costs a walk of the heap, so it
 * is called once when the daemon goes idle, never per message. */
void sb_memory_give_back(void);

#endif
