/* mock_worker: a scriptable stdio Bus worker, used as a test oracle by the
 * e2e and conformance suites (one program with modes, like libuv's test
 * helpers). It shares no code with the daemon: its own JSON handling
 * (cJSON plus raw.c) must not inherit the daemon's bugs. See README.md. */
#include <stdio.h>

#include "common/diag.h"
#include "loop.h"
#include "opts.h"
#include "status.h"
#include "worker.h"

int main(int argc, char **argv) {
    mc_diag_init("mock_worker", MW_EXIT_IO);
    mw_opts opts;
    int rc = mw_opts_parse(&opts, argc, argv);
    if (rc == 1)
        return MW_EXIT_OK;
    if (rc < 0)
        return MW_EXIT_USAGE;

    mw_worker w;
    int status = MW_EXIT_IO;
    if (mw_worker_init(&w, &opts, argc, argv) == MC_OK)
        status = mw_loop_run(&w);
    mw_worker_fini(&w);
    return status;
}
