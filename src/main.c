/* stdio_bus: the reference daemon of the stdio Bus specification. */
#include "cli.h"
#include "config.h"
#include "daemon.h"
#include "log.h"

#include <fcntl.h>
#include <stdio.h>

static void warn_unknown_key(void *ctx, const char *path) {
    (void)ctx;
    sb_warn(NULL, "config: %s: unknown key, ignored", path);
}

/* A descriptor 0, 1 or 2 that was closed at start would be handed out to
 * the first socket or pipe opened, and logs would go there. */
static void open_std_fds(void) {
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0)
            return;
}

int main(int argc, char **argv) {
    open_std_fds();
    sb_options opt;
    char err[512];
    if (sb_cli_parse(argc, argv, &opt, err, sizeof err) < 0) {
        fprintf(stderr, "stdio_bus: %s\n%s", err, sb_cli_usage);
        return 2;
    }
    if (opt.action == SB_CLI_HELP) {
        fputs(sb_cli_usage, stdout);
        return 0;
    }
    if (opt.action == SB_CLI_VERSION) {
        puts("stdio_bus " SB_VERSION " (stdio Bus spec v" SB_SPEC_VERSION ")"); /* SB-X-2 */
        return 0;
    }
    sb_log_set_level(opt.log_level);

    sb_config cfg;
    if (sb_config_load(opt.config_path, &cfg, err, sizeof err, warn_unknown_key, NULL) < 0) {
        sb_error(NULL, "config: %s", err); /* SB-I-20: one line naming the field */
        return 1;
    }
    int code = sb_daemon_run(&cfg, &opt);
    sb_config_fini(&cfg);
    return code;
}
