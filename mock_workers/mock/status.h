/* Return codes of the mock's modules. The values mirror the spec's
 * Appendix A, but the mock keeps its own copy: it is a test oracle and
 * shares no code with the daemon under test. */
#ifndef MW_STATUS_H
#define MW_STATUS_H

#define MW_OK         0
#define MW_ERR       -1
#define MW_EAGAIN    -2
#define MW_EOF       -3
#define MW_EFULL     -4
#define MW_ENOTFOUND -5
#define MW_EINVAL    -6

/* Exit statuses of the program itself (see README.md). */
#define MW_EXIT_OK     0
#define MW_EXIT_USAGE  2
#define MW_EXIT_IO     3

#endif
