/* Command line (spec 4.1.1, 9.1):
 *   stdio_bus --config <path> [--stdio | --unix <path> | --tcp <host:port>]
 *             [--log-level debug|info|warn|error] | --help | --version */
#ifndef SB_CLI_H
#define SB_CLI_H

#include "log.h"

#include <stddef.h>

typedef enum { SB_MODE_STDIO = 0, SB_MODE_UNIX, SB_MODE_TCP } sb_mode;

typedef enum { SB_CLI_RUN = 0, SB_CLI_HELP, SB_CLI_VERSION } sb_cli_action;

typedef struct {
    sb_cli_action action;
    const char *config_path;
    sb_mode mode;
    const char *address; /* unix path or host:port; points into argv */
    sb_log_level log_level;
} sb_options;

/* Parses argv. Returns 0 and fills *opt, or STDIO_BUS_EINVAL with a one-line
 * reason in err (the caller prints it with the usage line). */
int sb_cli_parse(int argc, char **argv, sb_options *opt, char *err, size_t err_size);

/* Splits "host:port", "[v6]:port" into host (without brackets) and port.
 * Returns 0, or STDIO_BUS_EINVAL when the form or the port is invalid. */
int sb_cli_split_host_port(const char *address, char *host, size_t host_size, char *port,
                           size_t port_size);

extern const char sb_cli_usage[];

#endif
