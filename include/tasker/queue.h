/* tasker: queues (DESIGN §19, docs/config.md, docs/cli.md).
 *
 * A queue names a kind of work: a step names one with queue = "NAME" (a
 * worker step's is its handler's). [queues.NAME] in the configuration
 * limits how many of its steps are in progress anywhere (concurrency) and
 * how fast they start (rate, a token bucket of burst tokens). The store
 * keeps the limits and every claim obeys them, across every orchestrator
 * and outside worker; tk_queue_sync gives the store the configuration's.
 */
#ifndef TASKER_QUEUE_H
#define TASKER_QUEUE_H

#include <stdint.h>

#include <tasker/config.h>
#include <tasker/error.h>
#include <tasker/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Make the store's queue limits the configuration's whole set, in one
 * transaction: each [queues.NAME] gets its limits, every other queue none.
 * Orchestrators (tasker run) and tasker serve call it at start, as the
 * configuration is the source of the limits. TK_EUNSUPPORTED when the
 * store keeps no limits and cfg configures some (nothing would enforce
 * them); 0 without any to keep. */
int tk_queue_sync(tk_store *s, const tk_config *cfg, tk_err *err);

/* JSON text (malloc'd) of every queue the store knows (one a stored step
 * names, or one with limits), by name, counted at `now` (ms):
 *   [{"name", "ready", "scheduled", "in_progress", "concurrency", "rate",
 *     "rate_per_second", "burst", "tokens", "oldest_ready_at",
 *     "oldest_ready_age_ms", "workers_seen", "worker"}]
 * ready: steps a claim could take now but for the limits; scheduled:
 * waiting for a retry or a delayed start; concurrency, rate ("50/s"),
 * rate_per_second, burst and tokens are null without that limit;
 * oldest_ready_at (ms) and its age at now are null with none ready;
 * workers_seen: workers that polled the queue in the last minute; worker:
 * whether outside workers run its steps. What `tasker queues --json`,
 * GET /api/v1/queues and the dashboard show (docs/api.md). */
int tk_queues_json(tk_store *s, int64_t now, char **json, tk_err *err);

#ifdef __cplusplus
}
#endif
#endif
