#include "cli.h"
#include "status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char sb_cli_usage[] =
    "usage: stdio_bus --config <path> [--stdio | --unix <path> | --tcp <host:port>]\n"
    "                 [--log-level debug|info|warn|error]\n"
    "       stdio_bus --help | --version\n";

static int set_mode(sb_options *opt, int *mode_seen, sb_mode mode, const char *address,
                    const char *flag, char *err, size_t err_size) {
    if (*mode_seen) {
        snprintf(err, err_size, "%s: only one of --stdio, --unix, --tcp may be given", flag);
        return STDIO_BUS_EINVAL;
    }
    *mode_seen = 1;
    opt->mode = mode;
    opt->address = address;
    return STDIO_BUS_OK;
}

int sb_cli_parse(int argc, char **argv, sb_options *opt, char *err, size_t err_size) {
    memset(opt, 0, sizeof *opt);
    opt->mode = SB_MODE_STDIO; /* SB-4.1.1: stdio is the default mode */
    opt->log_level = SB_LOG_INFO;
    int mode_seen = 0;

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        int takes_value = strcmp(arg, "--config") == 0 || strcmp(arg, "--unix") == 0 ||
                          strcmp(arg, "--tcp") == 0 || strcmp(arg, "--log-level") == 0;
        /* "--config --stdio" is a forgotten value, not a file named --stdio */
        if (takes_value && (!value || value[0] == '\0' || strncmp(value, "--", 2) == 0)) {
            snprintf(err, err_size, "%s: missing value", arg);
            return STDIO_BUS_EINVAL;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            opt->action = SB_CLI_HELP;
            return STDIO_BUS_OK;
        } else if (strcmp(arg, "--version") == 0) {
            opt->action = SB_CLI_VERSION;
            return STDIO_BUS_OK;
        } else if (strcmp(arg, "--config") == 0) {
            opt->config_path = value;
            i++;
        } else if (strcmp(arg, "--stdio") == 0) {
            if (set_mode(opt, &mode_seen, SB_MODE_STDIO, NULL, arg, err, err_size) < 0)
                return STDIO_BUS_EINVAL;
        } else if (strcmp(arg, "--unix") == 0) {
            if (set_mode(opt, &mode_seen, SB_MODE_UNIX, value, arg, err, err_size) < 0)
                return STDIO_BUS_EINVAL;
            i++;
        } else if (strcmp(arg, "--tcp") == 0) {
            char host[256], port[16];
            if (sb_cli_split_host_port(value, host, sizeof host, port, sizeof port) < 0) {
                snprintf(err, err_size, "--tcp: \"%.100s\" is not host:port or [v6]:port", value);
                return STDIO_BUS_EINVAL;
            }
            if (set_mode(opt, &mode_seen, SB_MODE_TCP, value, arg, err, err_size) < 0)
                return STDIO_BUS_EINVAL;
            i++;
        } else if (strcmp(arg, "--log-level") == 0) {
            if (sb_log_parse_level(value, &opt->log_level) < 0) {
                snprintf(err, err_size, "--log-level: \"%.40s\" is not debug, info, warn or error",
                         value);
                return STDIO_BUS_EINVAL;
            }
            i++;
        } else {
            snprintf(err, err_size, "%.100s: unknown option", arg);
            return STDIO_BUS_EINVAL;
        }
    }
    if (!opt->config_path) {
        snprintf(err, err_size, "--config <path> is required");
        return STDIO_BUS_EINVAL;
    }
    return STDIO_BUS_OK;
}

int sb_cli_split_host_port(const char *address, char *host, size_t host_size, char *port,
                           size_t port_size) {
    const char *host_start = address, *host_end, *colon;
    if (address[0] == '[') {
        host_start = address + 1;
        host_end = strchr(host_start, ']');
        if (!host_end || host_end[1] != ':')
            return STDIO_BUS_EINVAL;
        colon = host_end + 1;
    } else {
        colon = strrchr(address, ':');
        if (!colon || strchr(address, ':') != colon) /* bare v6 needs brackets */
            return STDIO_BUS_EINVAL;
        host_end = colon;
    }
    size_t host_len = (size_t)(host_end - host_start);
    const char *port_text = colon + 1;
    size_t port_len = strlen(port_text);
    if (host_len == 0 || host_len >= host_size || port_len == 0 || port_len >= port_size)
        return STDIO_BUS_EINVAL;
    if (strspn(port_text, "0123456789") != port_len) /* strtol would skip spaces */
        return STDIO_BUS_EINVAL;
    char *end;
    long number = strtol(port_text, &end, 10);
    if (*end != '\0' || number > 65535)
        return STDIO_BUS_EINVAL;
    memcpy(host, host_start, host_len);
    host[host_len] = '\0';
    memcpy(port, port_text, port_len + 1);
    return STDIO_BUS_OK;
}
