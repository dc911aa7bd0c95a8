/* Return codes shared by every module (spec Appendix A).
 * Negative means error, 0 means OK, positive means a count. */
#ifndef SB_STATUS_H
#define SB_STATUS_H

#define STDIO_BUS_OK        0
#define STDIO_BUS_ERR       -1
#define STDIO_BUS_EAGAIN    -2
#define STDIO_BUS_EOF       -3
#define STDIO_BUS_EFULL     -4
#define STDIO_BUS_ENOTFOUND -5
#define STDIO_BUS_EINVAL    -6

#endif
