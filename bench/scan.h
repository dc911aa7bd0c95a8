/* A raw-token scanner for the simple lines the benchmark tools exchange.
 *
 * It walks the top level of one JSON object and reports where the few keys
 * the tools care about sit in the caller's buffer: nothing is copied,
 * decoded or validated beyond what finding the value boundaries needs. It
 * is not a JSON validator (the daemon has one); it is fast on large string
 * values, which it skips with memchr. */
#ifndef BENCH_SCAN_H
#define BENCH_SCAN_H

#include <stddef.h>

typedef struct {
    const char *p; /* NULL when the key is absent */
    size_t n;      /* raw token length: a string keeps its quotes */
} bench_span;

typedef struct {
    bench_span id;
    bench_span session_id; /* key "sessionId" */
    bench_span params;
    bench_span result;
} bench_fields;

/* Scans line[0..len) (a trailing newline is allowed). Keys are compared
 * raw, without unescaping. Returns 0 and fills *out, or -1 when the line is
 * not an object the scanner can walk. */
int bench_scan_fields(const char *line, size_t len, bench_fields *out);

#endif
