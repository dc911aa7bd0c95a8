/* stderr spam (--mode spam): writes exactly --spam-bytes bytes to stderr,
 * in 100-byte lines `spam <8-digit n> xxx...x\n` (the last one cut short).
 * Blocking writes: stderr may be shared with the daemon, so the mock never
 * makes it non-blocking; a reader that does not drain it stalls the mock. */
#ifndef MW_SPAM_H
#define MW_SPAM_H

void mw_spam_write(long bytes);

#endif
