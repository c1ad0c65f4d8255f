// The CPU time spent making samples: a thread's own, and that of the processes it waits
// on (a Python dataset's or a python() step's processes), which the thread's clock does
// not see. The batch maker measures a batch by the difference of work_cpu_seconds(), so
// `tandem plan`'s per-thread rate counts every CPU that made the batch.
#pragma once

#include "tandem/common/clock.h"

namespace tandem {

// This thread's CPU time (CLOCK_THREAD_CPUTIME_ID), in seconds.
double thread_cpu_seconds();

// Adds `seconds` of CPU another process spent on this thread's behalf (what a Python
// process reports for one request). Thread-local.
void add_helper_cpu_seconds(double seconds);

// thread_cpu_seconds() plus every helper's seconds added on this thread so far.
double work_cpu_seconds();

// Seconds since this process started (/proc/self/stat against /proc/uptime); 0 when
// they cannot be read. A run's start-up (process start to its first step) is this at
// the first step: what a restart after an interruption costs beyond provisioning.
double process_age_seconds();

// Simulations only (--emulate-slowdown): after work that took `cpu_seconds` of CPU,
// sleeps (slowdown - 1) times that, so the work takes as long as on a processor
// `slowdown` times slower while leaving the CPU to others, as a slower host of its own
// would. Nothing when slowdown <= 1.
void emulate_slower(double cpu_seconds, double slowdown);

// Simulations only (--emulate-step-ms): sleeps until `ms` milliseconds after `started`,
// so a training step takes at least that long, as one whose accelerator takes that long
// would, while the host's CPU stays free. Nothing when ms <= 0 or that time has passed.
void pad_step(Clock::time_point started, double ms);

}  // namespace tandem
