/* Exit statuses of ref_worker (README.md, "ref_worker"); its return codes
 * are the common ones (common/status.h). */
#ifndef REF_STATUS_H
#define REF_STATUS_H

#include "common/status.h"

#define REF_EXIT_OK    0
#define REF_EXIT_IO    1 /* stdout or stdin failed, or out of memory */
#define REF_EXIT_USAGE 2

#endif
