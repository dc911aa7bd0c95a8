/* Logging (spec Appendix C): levels, UTC timestamps and a context tag, on
 * stderr only. stdout belongs to forwarded messages (SB-C-1). */
#ifndef SB_LOG_H
#define SB_LOG_H

typedef enum { SB_LOG_DEBUG = 0, SB_LOG_INFO, SB_LOG_WARN, SB_LOG_ERROR } sb_log_level;

/* Messages below `level` are dropped. Default: SB_LOG_INFO. */
void sb_log_set_level(sb_log_level level);
/* Parses "debug", "info", "warn" or "error"; returns 0 or STDIO_BUS_EINVAL. */
int sb_log_parse_level(const char *name, sb_log_level *out);
/* Inline: the per-message path asks it before formatting debug lines. */
extern sb_log_level sb_log_threshold;
static inline int sb_log_enabled(sb_log_level level) {
    return level >= sb_log_threshold;
}

/* Writes one line: `<time> <LEVEL> [<ctx>] <message>\n` with a single
 * write(2), so lines from one process never interleave. ctx may be NULL.
 * Never blocks: a line stderr cannot take now is dropped and counted. */
void sb_log(sb_log_level level, const char *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True while lines were dropped (or one was cut short) and stderr has not
 * been told yet: the caller may wait for stderr to be writable and call
 * sb_log_flush, which writes the count ("N log line(s) dropped") when it
 * can. sb_log_flush returns 1 when all is told, 0 when stderr is still
 * full, STDIO_BUS_ERR when writing to it fails (waiting would not help). */
extern int sb_log_owing;       /* read through sb_log_backlog: checked every loop turn */
extern unsigned sb_log_clears; /* how many times a backlog was cleared */
static inline int sb_log_backlog(void) {
    return sb_log_owing;
}
int sb_log_flush(void);

#define sb_debug(ctx, ...)                                                                         \
    do {                                                                                           \
        if (sb_log_enabled(SB_LOG_DEBUG))                                                          \
            sb_log(SB_LOG_DEBUG, ctx, __VA_ARGS__);                                                \
    } while (0)
#define sb_info(ctx, ...)  sb_log(SB_LOG_INFO, ctx, __VA_ARGS__)
#define sb_warn(ctx, ...)  sb_log(SB_LOG_WARN, ctx, __VA_ARGS__)
#define sb_error(ctx, ...) sb_log(SB_LOG_ERROR, ctx, __VA_ARGS__)

#endif
