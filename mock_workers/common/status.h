/* Return codes of both test workers and of the plumbing they share
 * (mock_common). The values mirror the spec's Appendix A, but the workers
 * keep their own copy: they are test oracles and share no code with the
 * daemon under test. Negative means error, 0 OK. Each program's exit
 * statuses are its own (mock/status.h, ref/ref_status.h). */
#ifndef MC_STATUS_H
#define MC_STATUS_H

#define MC_OK        0
#define MC_ERR       -1
#define MC_EAGAIN    -2
#define MC_EOF       -3
#define MC_EFULL     -4
#define MC_ENOTFOUND -5
#define MC_EINVAL    -6

#endif
