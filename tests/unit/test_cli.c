/* Unit tests for the command line (src/cfg/cli.c; spec 4.1.1, 9.1). */
#include <criterion/criterion.h>

#include <string.h>

#include "cli.h"
#include "status.h"

static char err[256];
static sb_options opt;

/* Parses the NULL-terminated argument list after the program name. */
#define PARSE(...) parse((char *[]){"stdio_bus", __VA_ARGS__, NULL})

static int parse(char **argv) {
    int argc = 0;
    while (argv[argc])
        argc++;
    memset(err, 0, sizeof err);
    memset(&opt, 0xa5, sizeof opt); /* every field must be set by the parser */
    return sb_cli_parse(argc, argv, &opt, err, sizeof err);
}

static void expect_error(int rc, const char *words) {
    cr_assert_eq(rc, STDIO_BUS_EINVAL, "rc %d, expected EINVAL", rc);
    cr_assert(strstr(err, words), "error \"%s\" does not say \"%s\"", err, words);
    cr_assert_null(strchr(err, '\n'), "error is not one line: \"%s\"", err);
}

/* ---- modes ------------------------------------------------------------ */

Test(cli, stdio_is_the_default_mode) {
    cr_assert_eq(PARSE("--config", "c.json"), STDIO_BUS_OK, "%s", err);
    cr_assert_eq(opt.action, SB_CLI_RUN);
    cr_assert_str_eq(opt.config_path, "c.json");
    cr_assert_eq(opt.mode, SB_MODE_STDIO);
    cr_assert_null(opt.address);
    cr_assert_eq(opt.log_level, SB_LOG_INFO);
}

Test(cli, stdio_flag_selects_stdio) {
    cr_assert_eq(PARSE("--stdio", "--config", "c.json"), STDIO_BUS_OK, "%s", err);
    cr_assert_eq(opt.mode, SB_MODE_STDIO);
    cr_assert_null(opt.address);
}

Test(cli, unix_flag_takes_a_path) {
    cr_assert_eq(PARSE("--config", "c.json", "--unix", "/tmp/bus.sock"), STDIO_BUS_OK, "%s", err);
    cr_assert_eq(opt.mode, SB_MODE_UNIX);
    cr_assert_str_eq(opt.address, "/tmp/bus.sock");
}

Test(cli, tcp_flag_takes_host_and_port) {
    cr_assert_eq(PARSE("--tcp", "127.0.0.1:9000", "--config", "c.json"), STDIO_BUS_OK, "%s", err);
    cr_assert_eq(opt.mode, SB_MODE_TCP);
    cr_assert_str_eq(opt.address, "127.0.0.1:9000");
}

Test(cli, tcp_accepts_bracketed_v6) {
    cr_assert_eq(PARSE("--config", "c.json", "--tcp", "[::1]:8080"), STDIO_BUS_OK, "%s", err);
    cr_assert_eq(opt.mode, SB_MODE_TCP);
    cr_assert_str_eq(opt.address, "[::1]:8080");
}

Test(cli, tcp_accepts_port_zero) {
    cr_assert_eq(PARSE("--config", "c.json", "--tcp", "127.0.0.1:0"), STDIO_BUS_OK, "%s", err);
    cr_assert_str_eq(opt.address, "127.0.0.1:0");
}

Test(cli, tcp_rejects_a_bad_address) {
    expect_error(PARSE("--config", "c.json", "--tcp", "localhost"), "--tcp");
    expect_error(PARSE("--config", "c.json", "--tcp", "localhost:http"), "--tcp");
    expect_error(PARSE("--config", "c.json", "--tcp", "::1:80"), "--tcp");
    expect_error(PARSE("--config", "c.json", "--tcp", "127.0.0.1:65536"), "--tcp");
}

Test(cli, two_modes_conflict) {
    expect_error(PARSE("--config", "c.json", "--unix", "/tmp/s", "--tcp", "127.0.0.1:1"),
                 "only one of");
    expect_error(PARSE("--config", "c.json", "--tcp", "127.0.0.1:1", "--stdio"), "only one of");
    expect_error(PARSE("--stdio", "--config", "c.json", "--unix", "/tmp/s"), "only one of");
}

Test(cli, the_same_mode_twice_conflicts) {
    expect_error(PARSE("--config", "c.json", "--unix", "/tmp/a", "--unix", "/tmp/b"),
                 "only one of");
}

/* ---- values ----------------------------------------------------------- */

Test(cli, config_is_required) {
    expect_error(PARSE("--stdio"), "--config");
    expect_error(parse((char *[]){"stdio_bus", NULL}), "--config");
}

Test(cli, last_config_wins) {
    cr_assert_eq(PARSE("--config", "a.json", "--config", "b.json"), STDIO_BUS_OK, "%s", err);
    cr_assert_str_eq(opt.config_path, "b.json");
}

Test(cli, flags_that_take_a_value_report_it_missing) {
    expect_error(PARSE("--config"), "--config: missing value");
    expect_error(PARSE("--config", "c.json", "--unix"), "--unix: missing value");
    expect_error(PARSE("--config", "c.json", "--tcp"), "--tcp: missing value");
    expect_error(PARSE("--config", "c.json", "--log-level"), "--log-level: missing value");
}

Test(cli, empty_values_are_missing_values) {
    expect_error(PARSE("--config", ""), "--config: missing value");
    expect_error(PARSE("--config", "c.json", "--unix", ""), "--unix: missing value");
    expect_error(PARSE("--config", "c.json", "--tcp", ""), "--tcp: missing value");
}

Test(cli, unknown_flags_are_named) {
    expect_error(PARSE("--config", "c.json", "--verbose"), "--verbose: unknown option");
    expect_error(PARSE("--config", "c.json", "stray"), "stray: unknown option");
    expect_error(PARSE("-c", "c.json"), "-c: unknown option");
}

Test(cli, values_may_follow_an_equals_sign) {
    /* getopt_long, as every GNU tool: --config=PATH and --config PATH */
    cr_assert_eq(PARSE("--config=c.json", "--unix=/run/b.sock"), STDIO_BUS_OK, "%s", err);
    cr_assert_str_eq(opt.config_path, "c.json");
    cr_assert_eq(opt.mode, SB_MODE_UNIX);
    cr_assert_str_eq(opt.address, "/run/b.sock");
    cr_assert_eq(PARSE("--config=c.json", "--tcp=127.0.0.1:7070", "--log-level=warn"), STDIO_BUS_OK,
                 "%s", err);
    cr_assert_eq(opt.log_level, SB_LOG_WARN);
    /* spelled out, a value that starts with -- is meant */
    cr_assert_eq(PARSE("--config=--odd.json"), STDIO_BUS_OK, "%s", err);
    cr_assert_str_eq(opt.config_path, "--odd.json");
    expect_error(PARSE("--config="), "--config: missing value");
    expect_error(PARSE("--config=c.json", "--stdio=yes"), "--stdio=yes: unknown option");
}

/* ---- --help, --version ------------------------------------------------ */

Test(cli, help_needs_no_config) {
    cr_assert_eq(PARSE("--help"), STDIO_BUS_OK);
    cr_assert_eq(opt.action, SB_CLI_HELP);
    cr_assert_eq(PARSE("-h"), STDIO_BUS_OK);
    cr_assert_eq(opt.action, SB_CLI_HELP);
}

Test(cli, help_wins_over_later_arguments) {
    cr_assert_eq(PARSE("--config", "c.json", "--help", "--bogus"), STDIO_BUS_OK);
    cr_assert_eq(opt.action, SB_CLI_HELP);
}

Test(cli, version_needs_no_config) {
    cr_assert_eq(PARSE("--version"), STDIO_BUS_OK);
    cr_assert_eq(opt.action, SB_CLI_VERSION);
}

Test(cli, usage_names_every_flag) {
    const char *flags[] = {"--config",    "--stdio", "--unix",   "--tcp",
                           "--log-level", "--help",  "--version"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        cr_assert(strstr(sb_cli_usage, flags[i]), "usage lacks %s", flags[i]);
}

/* ---- --log-level ------------------------------------------------------ */

Test(cli, log_level_accepts_the_four_levels) {
    const struct {
        const char *name;
        sb_log_level level;
    } levels[] = {{"debug", SB_LOG_DEBUG},
                  {"info", SB_LOG_INFO},
                  {"warn", SB_LOG_WARN},
                  {"error", SB_LOG_ERROR}};
    for (size_t i = 0; i < 4; i++) {
        cr_assert_eq(PARSE("--log-level", (char *)levels[i].name, "--config", "c.json"),
                     STDIO_BUS_OK, "%s: %s", levels[i].name, err);
        cr_assert_eq(opt.log_level, levels[i].level, "%s", levels[i].name);
    }
}

Test(cli, log_level_rejects_other_names) {
    expect_error(PARSE("--config", "c.json", "--log-level", "verbose"), "--log-level");
    expect_error(PARSE("--config", "c.json", "--log-level", "DEBUG"), "--log-level");
    expect_error(PARSE("--config", "c.json", "--log-level", "warning"), "--log-level");
    expect_error(PARSE("--config", "c.json", "--log-level", "3"), "--log-level");
}

/* ---- sb_cli_split_host_port ------------------------------------------- */

static char host[64], port[16];

static int split(const char *address) {
    memset(host, 'x', sizeof host);
    memset(port, 'x', sizeof port);
    return sb_cli_split_host_port(address, host, sizeof host, port, sizeof port);
}

Test(cli, split_v4_host_and_port) {
    cr_assert_eq(split("127.0.0.1:8080"), STDIO_BUS_OK);
    cr_assert_str_eq(host, "127.0.0.1");
    cr_assert_str_eq(port, "8080");
}

Test(cli, split_hostname_and_port) {
    cr_assert_eq(split("localhost:65535"), STDIO_BUS_OK);
    cr_assert_str_eq(host, "localhost");
    cr_assert_str_eq(port, "65535");
}

Test(cli, split_port_zero) {
    cr_assert_eq(split("127.0.0.1:0"), STDIO_BUS_OK);
    cr_assert_str_eq(port, "0");
}

Test(cli, split_bracketed_v6_drops_the_brackets) {
    cr_assert_eq(split("[::1]:8080"), STDIO_BUS_OK);
    cr_assert_str_eq(host, "::1");
    cr_assert_str_eq(port, "8080");
    cr_assert_eq(split("[fe80::1%lo]:1"), STDIO_BUS_OK);
    cr_assert_str_eq(host, "fe80::1%lo");
}

Test(cli, split_rejects_malformed_forms) {
    const char *bad[] = {
        "",          "localhost", ":8080", "host:",   "::1:8080", "[::1]",
        "[::1]8080", "[::1]:",    "[]:80", "[::1:80", "a:b:80",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_expect_eq(split(bad[i]), STDIO_BUS_EINVAL, "accepted \"%s\"", bad[i]);
}

Test(cli, split_rejects_bad_ports) {
    const char *bad[] = {
        "h:65536", "h:-1",   "h:+80", "h:80x", "h:0x50", "h:http", "h:99999999999999999999",
        "h: 80",   "h:\t80", "h:8 0",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        cr_expect_eq(split(bad[i]), STDIO_BUS_EINVAL, "accepted \"%s\"", bad[i]);
}

Test(cli, split_rejects_a_host_longer_than_its_buffer) {
    char address[128];
    memset(address, 'a', 64);
    strcpy(address + 64, ":80");
    cr_assert_eq(split(address), STDIO_BUS_EINVAL);
    address[63] = '\0';
    strcat(address, ":80"); /* 63 bytes + NUL fit */
    cr_assert_eq(split(address), STDIO_BUS_OK);
    cr_assert_eq(strlen(host), 63);
}
