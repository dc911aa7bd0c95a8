/* Command-line parsing (see opts.h and README.md). */
#include "opts.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "signals.h"

static const char usage[] =
    "usage: mock_worker [--mode echo|crash|flood|spam|bad] [--log FILE] [--pidfile FILE]\n"
    "  crash:  --exit-status N --signal NAME --crash-after-ms MS\n"
    "  any:    --after N --exit-on METHOD --ignore-sigterm --die-on-sigterm --term-delay-ms MS\n"
    "          --strict-members\n"
    "          --on-eof drain|stay --delay-ms MS --sleep-ms MS --split K --split-pause-ms MS\n"
    "          --coalesce N --stall read|write --stall-after N --trigger start|first\n"
    "          --spawn-child setsid|double-fork|group\n"
    "  flood:  --rate PER_SEC --count N --session SID\n"
    "  spam:   --spam-bytes N\n"
    "  bad:    --bad nonjson|truncated|nonewline|binary|badutf8|longline|unknown-id|\n"
    "                unknown-session|unroutable  --bytes N (longline)\n"
    "See mock_workers/README.md.\n";

static const char *const bad_names[] = {
    [MW_BAD_NONJSON] = "nonjson",       [MW_BAD_TRUNCATED] = "truncated",
    [MW_BAD_NONEWLINE] = "nonewline",   [MW_BAD_BINARY] = "binary",
    [MW_BAD_BADUTF8] = "badutf8",       [MW_BAD_LONGLINE] = "longline",
    [MW_BAD_UNKNOWN_ID] = "unknown-id", [MW_BAD_UNKNOWN_SESSION] = "unknown-session",
    [MW_BAD_UNROUTABLE] = "unroutable",
};

enum {
    OPT_MODE = 256,
    OPT_LOG,
    OPT_PIDFILE,
    OPT_EXIT_STATUS,
    OPT_SIGNAL,
    OPT_CRASH_AFTER,
    OPT_AFTER,
    OPT_EXIT_ON,
    OPT_IGNORE_TERM,
    OPT_TERM_DELAY,
    OPT_ON_EOF,
    OPT_TRIGGER,
    OPT_RATE,
    OPT_COUNT,
    OPT_SESSION,
    OPT_SPAM_BYTES,
    OPT_BAD,
    OPT_BYTES,
    OPT_SPLIT,
    OPT_SPLIT_PAUSE,
    OPT_COALESCE,
    OPT_STALL,
    OPT_STALL_AFTER,
    OPT_DELAY,
    OPT_SLEEP,
    OPT_DIE_TERM,
    OPT_STRICT,
    OPT_CHILD,
    OPT_HELP,
};

static const struct option longopts[] = {
    {"mode", required_argument, NULL, OPT_MODE},
    {"log", required_argument, NULL, OPT_LOG},
    {"pidfile", required_argument, NULL, OPT_PIDFILE},
    {"exit-status", required_argument, NULL, OPT_EXIT_STATUS},
    {"signal", required_argument, NULL, OPT_SIGNAL},
    {"crash-after-ms", required_argument, NULL, OPT_CRASH_AFTER},
    {"after", required_argument, NULL, OPT_AFTER},
    {"exit-on", required_argument, NULL, OPT_EXIT_ON},
    {"ignore-sigterm", no_argument, NULL, OPT_IGNORE_TERM},
    {"die-on-sigterm", no_argument, NULL, OPT_DIE_TERM},
    {"strict-members", no_argument, NULL, OPT_STRICT},
    {"term-delay-ms", required_argument, NULL, OPT_TERM_DELAY},
    {"on-eof", required_argument, NULL, OPT_ON_EOF},
    {"trigger", required_argument, NULL, OPT_TRIGGER},
    {"rate", required_argument, NULL, OPT_RATE},
    {"count", required_argument, NULL, OPT_COUNT},
    {"session", required_argument, NULL, OPT_SESSION},
    {"spam-bytes", required_argument, NULL, OPT_SPAM_BYTES},
    {"bad", required_argument, NULL, OPT_BAD},
    {"bytes", required_argument, NULL, OPT_BYTES},
    {"split", required_argument, NULL, OPT_SPLIT},
    {"split-pause-ms", required_argument, NULL, OPT_SPLIT_PAUSE},
    {"coalesce", required_argument, NULL, OPT_COALESCE},
    {"stall", required_argument, NULL, OPT_STALL},
    {"stall-after", required_argument, NULL, OPT_STALL_AFTER},
    {"delay-ms", required_argument, NULL, OPT_DELAY},
    {"sleep-ms", required_argument, NULL, OPT_SLEEP},
    {"spawn-child", required_argument, NULL, OPT_CHILD},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Whole-string decimal in [lo, hi]. */
static int parse_long(const char *name, const char *s, long lo, long hi, long *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        fprintf(stderr, "mock_worker: --%s wants an integer in [%ld, %ld], got '%s'\n", name, lo,
                hi, s);
        return MC_EINVAL;
    }
    *out = v;
    return MC_OK;
}

static int parse_mode(const char *s, mw_mode *out) {
    static const char *const modes[] = {"echo", "crash", "flood", "spam", "bad"};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        if (strcmp(s, modes[i]) == 0) {
            *out = (mw_mode)i;
            return MC_OK;
        }
    }
    fprintf(stderr, "mock_worker: unknown mode '%s'\n", s);
    return MC_EINVAL;
}

static int parse_bad(const char *s, mw_bad_kind *out) {
    for (size_t i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
        if (strcmp(s, bad_names[i]) == 0) {
            *out = (mw_bad_kind)i;
            return MC_OK;
        }
    }
    fprintf(stderr, "mock_worker: unknown --bad kind '%s'\n", s);
    return MC_EINVAL;
}

static int parse_choice(const char *name, const char *s, const char *a, const char *b, bool *is_b) {
    if (strcmp(s, a) == 0 || strcmp(s, b) == 0) {
        *is_b = strcmp(s, b) == 0;
        return MC_OK;
    }
    fprintf(stderr, "mock_worker: --%s wants %s or %s, got '%s'\n", name, a, b, s);
    return MC_EINVAL;
}

static int parse_one(mw_opts *o, int c, const char *arg) {
    const long big = 1L << 30;
    long v;
    bool b;
    int rc = MC_OK;
    switch (c) {
    case OPT_MODE:
        return parse_mode(arg, &o->mode);
    case OPT_LOG:
        o->log_path = arg;
        return MC_OK;
    case OPT_PIDFILE:
        o->pidfile = arg;
        return MC_OK;
    case OPT_EXIT_STATUS:
        rc = parse_long("exit-status", arg, 0, 255, &v);
        o->exit_status = (int)v;
        return rc;
    case OPT_SIGNAL:
        o->signo = mw_signals_parse(arg);
        if (o->signo > 0)
            return MC_OK;
        fprintf(stderr, "mock_worker: unknown signal '%s'\n", arg);
        return MC_EINVAL;
    case OPT_CRASH_AFTER:
        return parse_long("crash-after-ms", arg, 0, big, &o->crash_after_ms);
    case OPT_AFTER:
        return parse_long("after", arg, 1, big, &o->after);
    case OPT_EXIT_ON:
        o->exit_on = arg;
        return MC_OK;
    case OPT_IGNORE_TERM:
        o->ignore_sigterm = true;
        return MC_OK;
    case OPT_DIE_TERM:
        o->die_on_sigterm = true;
        return MC_OK;
    case OPT_STRICT:
        o->strict_members = true;
        return MC_OK;
    case OPT_TERM_DELAY:
        return parse_long("term-delay-ms", arg, 0, big, &o->term_delay_ms);
    case OPT_ON_EOF:
        return parse_choice("on-eof", arg, "drain", "stay", &o->eof_stay);
    case OPT_TRIGGER:
        rc = parse_choice("trigger", arg, "first", "start", &b);
        o->trigger_start = b;
        return rc;
    case OPT_RATE: {
        char *end;
        o->rate = strtod(arg, &end);
        if (*arg && !*end && o->rate >= 0 && o->rate <= 1e6)
            return MC_OK;
        fprintf(stderr, "mock_worker: --rate wants a number in [0, 1e6], got '%s'\n", arg);
        return MC_EINVAL;
    }
    case OPT_COUNT:
        return parse_long("count", arg, 0, big, &o->count);
    case OPT_SESSION:
        o->session = arg;
        return MC_OK;
    case OPT_SPAM_BYTES:
        return parse_long("spam-bytes", arg, 0, big, &o->spam_bytes);
    case OPT_BAD:
        return parse_bad(arg, &o->bad);
    case OPT_BYTES:
        return parse_long("bytes", arg, 1, big, &o->bytes);
    case OPT_SPLIT:
        return parse_long("split", arg, 1, 1L << 20, &o->split);
    case OPT_SPLIT_PAUSE:
        return parse_long("split-pause-ms", arg, 0, big, &o->split_pause_ms);
    case OPT_COALESCE:
        return parse_long("coalesce", arg, 1, 1L << 20, &o->coalesce);
    case OPT_STALL:
        rc = parse_choice("stall", arg, "read", "write", &b);
        o->stall = b ? MW_STALL_WRITE : MW_STALL_READ;
        return rc;
    case OPT_STALL_AFTER:
        return parse_long("stall-after", arg, 0, big, &o->stall_after);
    case OPT_DELAY:
        return parse_long("delay-ms", arg, 0, big, &o->delay_ms);
    case OPT_SLEEP:
        return parse_long("sleep-ms", arg, 0, big, &o->sleep_ms);
    case OPT_CHILD:
        if (strcmp(arg, "group") == 0) { /* stays in the worker's group (SB-X-18) */
            o->child = MW_CHILD_GROUP;
            return MC_OK;
        }
        rc = parse_choice("spawn-child", arg, "setsid", "double-fork", &b);
        o->child = b ? MW_CHILD_DOUBLE_FORK : MW_CHILD_SETSID;
        return rc;
    default:
        return MC_EINVAL;
    }
}

int mw_opts_parse(mw_opts *o, int argc, char **argv) {
    memset(o, 0, sizeof *o);
    o->mode = MW_MODE_ECHO;
    o->exit_status = 1;
    o->bad = MW_BAD_NONJSON;
    o->bytes = 2 * 1024 * 1024;
    o->spam_bytes = 65536;
    o->split = 1;

    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (c == OPT_HELP) {
            fputs(usage, stdout);
            return 1;
        }
        if (c == '?' || c == ':') {
            fprintf(stderr, "mock_worker: bad option '%s'\n%s", argv[optind - 1], usage);
            return MC_EINVAL;
        }
        if (parse_one(o, c, optarg) < 0)
            return MC_EINVAL;
    }
    if (optind < argc) {
        fprintf(stderr, "mock_worker: unexpected argument '%s'\n%s", argv[optind], usage);
        return MC_EINVAL;
    }
    return MC_OK;
}
