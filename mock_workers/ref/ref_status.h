/* Return codes and exit statuses of ref_worker. The values mirror the
 * spec's Appendix A; the reference worker keeps its own copy because it
 * shares no code with the daemon (or with mock_worker). */
#ifndef REF_STATUS_H
#define REF_STATUS_H

#define REF_OK         0
#define REF_ERR       -1
#define REF_EAGAIN    -2
#define REF_EOF       -3
#define REF_ENOTFOUND -5
#define REF_EINVAL    -6

/* Exit statuses (README.md, "ref_worker"). */
#define REF_EXIT_OK    0
#define REF_EXIT_IO    1 /* stdout or stdin failed, or out of memory */
#define REF_EXIT_USAGE 2

#endif
