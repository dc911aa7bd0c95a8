/* Exit statuses of mock_worker (see README.md); its return codes are the
 * common ones (common/status.h). */
#ifndef MW_STATUS_H
#define MW_STATUS_H

#include "common/status.h"

#define MW_EXIT_OK    0
#define MW_EXIT_USAGE 2
#define MW_EXIT_IO    3

#endif
