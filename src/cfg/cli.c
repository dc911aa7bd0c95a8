#include "cli.h"
#include "status.h"

#include <getopt.h>
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

static const struct option long_options[] = {
    {"config", required_argument, NULL, 'c'},    {"stdio", no_argument, NULL, 's'},
    {"unix", required_argument, NULL, 'u'},      {"tcp", required_argument, NULL, 't'},
    {"log-level", required_argument, NULL, 'l'}, {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},         {NULL, 0, NULL, 0},
};

/* The long option whose value getopt just took, for error messages. */
static const char *option_name(int code) {
    for (const struct option *o = long_options; o->name; o++)
        if (o->val == code)
            return o->name;
    return "?";
}

/* getopt_long takes the next word as the value even when it is another
 * flag: "--config --stdio" is a forgotten value, not a file named
 * --stdio. "--config=--odd" says what it means and is kept. */
static int missing_value(char **argv, const char *value) {
    if (value[0] == '\0')
        return 1;
    return value == argv[optind - 1] && strncmp(value, "--", 2) == 0;
}

int sb_cli_parse(int argc, char **argv, sb_options *opt, char *err, size_t err_size) {
    memset(opt, 0, sizeof *opt);
    opt->mode = SB_MODE_STDIO; /* SB-4.1.1: stdio is the default mode */
    opt->log_level = SB_LOG_INFO;
    int mode_seen = 0;

    /* '+': stop at the first word that is not an option (no permuting),
     * ':': report a missing value as ':' rather than printing. */
    optind = 0; /* glibc: start over (the unit tests parse many times) */
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+:h", long_options, NULL)) != -1) {
        const char *flag = argv[optind - 1];
        if (c == '?') {
            snprintf(err, err_size, "%.100s: unknown option", flag);
            return STDIO_BUS_EINVAL;
        }
        if (c == ':') {
            snprintf(err, err_size, "--%s: missing value", option_name(optopt));
            return STDIO_BUS_EINVAL;
        }
        if (optarg && missing_value(argv, optarg)) {
            snprintf(err, err_size, "--%s: missing value", option_name(c));
            return STDIO_BUS_EINVAL;
        }
        switch (c) {
        case 'h':
            opt->action = SB_CLI_HELP;
            return STDIO_BUS_OK;
        case 'V':
            opt->action = SB_CLI_VERSION;
            return STDIO_BUS_OK;
        case 'c':
            opt->config_path = optarg; /* the last one wins */
            break;
        case 's':
            if (set_mode(opt, &mode_seen, SB_MODE_STDIO, NULL, "--stdio", err, err_size) < 0)
                return STDIO_BUS_EINVAL;
            break;
        case 'u':
            if (set_mode(opt, &mode_seen, SB_MODE_UNIX, optarg, "--unix", err, err_size) < 0)
                return STDIO_BUS_EINVAL;
            break;
        case 't': {
            char host[256], port[16];
            if (sb_cli_split_host_port(optarg, host, sizeof host, port, sizeof port) < 0) {
                snprintf(err, err_size, "--tcp: \"%.100s\" is not host:port or [v6]:port", optarg);
                return STDIO_BUS_EINVAL;
            }
            if (set_mode(opt, &mode_seen, SB_MODE_TCP, optarg, "--tcp", err, err_size) < 0)
                return STDIO_BUS_EINVAL;
            break;
        }
        case 'l':
            if (sb_log_parse_level(optarg, &opt->log_level) < 0) {
                snprintf(err, err_size, "--log-level: \"%.40s\" is not debug, info, warn or error",
                         optarg);
                return STDIO_BUS_EINVAL;
            }
            break;
        }
    }
    if (optind < argc) {
        snprintf(err, err_size, "%.100s: unknown option", argv[optind]);
        return STDIO_BUS_EINVAL;
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
