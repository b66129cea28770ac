/* Shared by the in-process retry helpers; not part of the public API. */
#ifndef TASKER_RETRY_INTERNAL_H
#define TASKER_RETRY_INTERNAL_H

#include <tasker/retry.h>

/* Check what every helper needs: a valid policy, and a random source
 * unless the policy has no jitter. 0, or TK_EINVAL / the policy's
 * validation code with a message in err. */
int tk__retry_check(const tk_backoff_policy *policy, const tk_rand *rng, tk_err *err);

#endif
