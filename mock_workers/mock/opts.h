/* Command line of mock_worker (every option is documented in README.md). */
#ifndef MW_OPTS_H
#define MW_OPTS_H

#include <stdbool.h>

typedef enum { MW_MODE_ECHO, MW_MODE_CRASH, MW_MODE_FLOOD, MW_MODE_SPAM, MW_MODE_BAD } mw_mode;

typedef enum {
    MW_BAD_NONJSON,
    MW_BAD_TRUNCATED,
    MW_BAD_NONEWLINE,
    MW_BAD_BINARY,
    MW_BAD_BADUTF8,
    MW_BAD_LONGLINE,
    MW_BAD_UNKNOWN_ID,
    MW_BAD_UNKNOWN_SESSION,
    MW_BAD_UNROUTABLE,
} mw_bad_kind;

typedef enum { MW_STALL_NONE, MW_STALL_READ, MW_STALL_WRITE } mw_stall;

typedef enum { MW_CHILD_NONE, MW_CHILD_SETSID, MW_CHILD_DOUBLE_FORK, MW_CHILD_GROUP } mw_child_kind;

typedef struct mw_opts {
    mw_mode mode;
    const char *log_path; /* --log */
    const char *pidfile;  /* --pidfile */
    int exit_status;      /* --exit-status: crash, --after, --exit-on (default 1) */
    int signo;            /* --signal: die of it instead of exiting (0: none) */
    long crash_after_ms;  /* --crash-after-ms (crash mode) */
    long after;           /* --after N messages (0: off) */
    const char *exit_on;  /* --exit-on METHOD */
    bool ignore_sigterm;  /* --ignore-sigterm */
    bool die_on_sigterm;  /* --die-on-sigterm */
    bool strict_members;  /* --strict-members */
    long term_delay_ms;   /* --term-delay-ms */
    bool eof_stay;        /* --on-eof stay */
    bool trigger_start;   /* --trigger start|first (default first) */
    double rate;          /* --rate (flood, per second, 0: as fast as possible) */
    long count;           /* --count (flood, 0: unlimited) */
    const char *session;  /* --session (flood) */
    long spam_bytes;      /* --spam-bytes (spam) */
    mw_bad_kind bad;      /* --bad KIND (bad) */
    long bytes;           /* --bytes N (bad longline) */
    long split;           /* --split K (answers) */
    long split_pause_ms;  /* --split-pause-ms */
    long coalesce;        /* --coalesce N */
    mw_stall stall;       /* --stall read|write */
    long stall_after;     /* --stall-after N messages (0: from start) */
    long delay_ms;        /* --delay-ms: default delay of every answer */
    long sleep_ms;        /* --sleep-ms: blocking sleep before each answer */
    mw_child_kind child;  /* --spawn-child setsid|double-fork */
} mw_opts;

/* Parses argv into o (o's strings borrow from argv). Returns MC_OK, 1 when
 * --help was printed, or MC_EINVAL after a message on stderr. */
int mw_opts_parse(mw_opts *o, int argc, char **argv);

#endif
