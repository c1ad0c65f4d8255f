/* libtandem_feed.so: tandem's feed for Python as a plain C ABI, loaded by the pure-Python
 * layer python/tandem/_tandem.py through ctypes. It never links libpython or Torch, so one
 * build serves every CPython (3.9 on) and every torch version: the wheel's module.
 *
 * Requests and answers are JSON text; a batch is an opaque handle whose memory numpy views
 * directly (tandem_batch_json gives each array's address, dtype and shape) until
 * tandem_batch_free. ctypes releases the GIL for every call, so waits take a `seconds`
 * slice and return; Python loops, and Ctrl-C lands between slices.
 *
 * Errors: a call that fails returns a negative number or NULL and records the error for
 * the calling thread: tandem_error_kind() (TANDEM_VALUE_ERROR: a bad setting, raised as
 * ValueError; TANDEM_RUNTIME_ERROR: the feed cannot go on) and tandem_error_message().
 * Strings returned are the calling thread's, valid until its next call into the library. */
#ifndef TANDEM_PYTHON_CAPI_H_
#define TANDEM_PYTHON_CAPI_H_

#ifdef __cplusplus
extern "C" {
#endif

#define TANDEM_CAPI_VERSION 4

enum { TANDEM_VALUE_ERROR = 1, TANDEM_RUNTIME_ERROR = 2 };
/* tandem_feed_next's answers. */
enum { TANDEM_NEXT_ERROR = -1, TANDEM_NEXT_WAIT = 0, TANDEM_NEXT_BATCH = 1, TANDEM_NEXT_END = 2 };

int tandem_capi_version(void);
const char* tandem_version(void);
int tandem_error_kind(void);
const char* tandem_error_message(void);

/* Log lines to stderr in tandem's format; TANDEM_DATASET_WORKER set beside the library. */
void tandem_init(void);
/* JSON list of the settings tandem.Feed accepts. */
const char* tandem_setting_names(void);
int tandem_set_log_level(const char* level);
/* {"workers": [...], "reason": "...", "settings": [[key, [values]], ...]} -> acknowledgements. */
int tandem_shutdown_workers(const char* request);

/* A feed request: {"workers": [...] or null, "rank": n or null, "world": n or null,
 * "local_threads": n, "start_step": n, "epoch": n or null, "release_workers": bool,
 * "state": a tandem_feed_state() or null (its step is the start step),
 * "settings": [[key, [values]], ...]}. */
void* tandem_plan_begin(const char* request); /* a task: what a Feed would deliver */
int tandem_task_wait(void* task, double seconds); /* 1 done, 0 not yet */
const char* tandem_task_result(void* task);       /* the plan as JSON; NULL: its error */
void tandem_task_free(void* task);                /* stops it if it runs, then frees it */

void* tandem_feed_open(const char* request);
int tandem_feed_wait_started(void* feed, double seconds); /* 1 started, 0 not yet, -1 error */
const char* tandem_feed_info(void* feed);                 /* length, batch_size, batches_per_epoch, dataset */
int tandem_feed_next(void* feed, double seconds, void** batch);
int tandem_feed_close(void* feed);
/* Closes the feed as the script ends: `why` reaches the workers it releases ("training
 * script crashed: ..."), and `interrupted` (a signal stopped the script) its summary. */
int tandem_feed_end(void* feed, const char* why, int interrupted);
// What the script reports (feed.log): name "loss" or "lr", a finite value; rank 0 puts it
// in its metric lines, metrics.jsonl and summary. 0, or -1 with the error set.
int tandem_feed_log(void* feed, const char* name, double value);
int tandem_feed_shutdown(void* feed);
const char* tandem_feed_stats(void* feed);
/* The feed's state before step `step` (state_dict): {"version", "step", "data": the place
 * in the epoch's order and the geometry, "fingerprint"}; NULL before it started. */
const char* tandem_feed_state(void* feed, unsigned long long step);
/* The feed will not release its workers when it ends (its place is taken by a new feed:
 * load_state_dict). */
void tandem_feed_keep_workers(void* feed);
void tandem_feed_free(void* feed);

const char* tandem_batch_json(void* batch); /* one line, tab-separated: capi.cc describe() */
/* Batch memory comes from a pool of reused blocks (buffer_pool.h; on from tandem_init),
 * which Python page-locks once each (pin_memory); 0: the heap, for measuring. The pool's
 * counts as JSON. */
void tandem_use_buffer_pool(int on);
const char* tandem_buffer_pool_stats(void);
void tandem_batch_free(void* batch);

#ifdef __cplusplus
}
#endif

#endif /* TANDEM_PYTHON_CAPI_H_ */
