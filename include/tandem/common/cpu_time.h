// The CPU time spent making samples: a thread's own, and that of the processes it waits
// on (a Python dataset's or a python() step's processes), which the thread's clock does
// not see. The batch maker measures a batch by the difference of work_cpu_seconds(), so
// `tandem plan`'s per-thread rate counts every CPU that made the batch.
#pragma once

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

}  // namespace tandem
