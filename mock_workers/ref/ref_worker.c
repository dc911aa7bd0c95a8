/* ref_worker: a reference worker for stdio Bus, an MCP tool server over
 * JSON-RPC 2.0 on NDJSON stdio that meets every clause of WORKER_SPEC.md.
 * Single-threaded, non-blocking, cJSON only. See README.md, "ref_worker".
 *
 * Modules, each using only those after it: ref_loop (poll loop, stdin
 * lines, shutdown), ref_recv (JSON-RPC reading: lines, envelopes,
 * batches), ref_mcp (lifecycle, dispatch), ref_tools (tools, progress,
 * cancellation, sampling), ref_rpc (outcomes: answers, errors, batches'
 * answers, the worker's own messages), ref_call (requests in flight),
 * ref_out (stdout queue), ref_json (strict JSON, raw tokens); and from
 * mock_workers/common: stdin lines, stdio and signals, clock, buffers,
 * stderr notes, status codes. */
#include <stdio.h>
#include <string.h>

#include "common/diag.h"
#include "ref_loop.h"
#include "ref_mcp.h"
#include "ref_status.h"

static const char usage[] =
    "usage: ref_worker [--verbose]\n"
    "       ref_worker --help | --version\n"
    "\n"
    "An MCP tool server on stdin/stdout (JSON-RPC 2.0, one message per line).\n"
    "Methods: initialize, ping, tools/list, tools/call (echo, add, slow, sample);\n"
    "notifications/initialized, notifications/cancelled. Diagnostics on stderr.\n"
    "Exits 0 after answering what is in flight, at end of input or on SIGTERM.\n"
    "\n"
    "  --verbose   note every message handled on stderr\n";

int main(int argc, char **argv) {
    mc_diag_init("ref_worker", REF_EXIT_IO);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage, stdout);
            return REF_EXIT_OK;
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("%s %s\n", REF_MCP_SERVER_NAME, REF_MCP_SERVER_VERSION);
            return REF_EXIT_OK;
        }
        if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) {
            mc_diag_set_verbose(true);
            continue;
        }
        fprintf(stderr, "ref_worker: unknown argument '%s'\n%s", argv[i], usage);
        return REF_EXIT_USAGE;
    }
    return ref_loop_run();
}
