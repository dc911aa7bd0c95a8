/* Resource limits (spec 8): the configurable defaults of 8.1 and the
 * hard-coded limits of 8.2. */
#ifndef SB_LIMITS_H
#define SB_LIMITS_H

#include <stddef.h>

#define STDIO_BUS_MAX_CONNECTIONS      1024
#define STDIO_BUS_MAX_SESSIONS         1024
#define STDIO_BUS_MAX_PENDING_REQUESTS 4096
#define STDIO_BUS_MAX_SESSION_ID_LEN   256
#define STDIO_BUS_MAX_REQUEST_ID_LEN   128

#define SB_DEFAULT_MAX_INPUT_BUFFER         1048576
#define SB_DEFAULT_MAX_OUTPUT_QUEUE         4194304
#define SB_DEFAULT_MAX_RESTARTS             5
#define SB_DEFAULT_RESTART_WINDOW_SEC       60
#define SB_DEFAULT_DRAIN_TIMEOUT_SEC        30
#define SB_DEFAULT_BACKPRESSURE_TIMEOUT_SEC 60
/* Extensions (SPEC.md, Extensions): the restart backoff schedule. */
#define SB_DEFAULT_RESTART_BACKOFF_MS     1000
#define SB_DEFAULT_RESTART_BACKOFF_MAX_MS 30000
/* SB-X-19: how long a worker whose client left may take to exit on its own
 * after its stdin is closed, before SIGTERM. */
#define SB_DEFAULT_STOP_GRACE_MS 2000

typedef struct {
    size_t max_input_buffer;
    size_t max_output_queue;
    int max_restarts;
    int restart_window_sec;
    int drain_timeout_sec;
    int backpressure_timeout_sec;
    long restart_backoff_ms;
    long restart_backoff_max_ms;
    size_t max_client_memory; /* SB-X-17: all clients' buffers together; 0 = no budget */
    long stop_grace_ms;       /* SB-X-19: stdin closed -> SIGTERM for a worker whose client left */
} sb_limits;

#endif
