// Keeping freed memory for the next step. Every training step and every batch allocates
// and frees the same large buffers (activations, gradients, batches of tens of MB).
// glibc's defaults give them back to the kernel at once: buffers above its mmap threshold
// are unmapped when freed, and a thread's arena is trimmed as soon as its top is free, so
// the next step faults every page in again. On a CPU trainer (resnet18, 32 px, batch 16,
// one thread) that was a quarter of the time in page faults and 62 samples/s against 254
// with the memory kept (docs/benchmarks.md).
#pragma once

namespace tandem {

// Raises glibc's mmap threshold to its largest (32 MiB) and its trim threshold to 1 GiB,
// so freed buffers stay in the process for reuse, unless the user set either already
// (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, or GLIBC_TUNABLES naming glibc.malloc):
// theirs wins. Once, early in main, before any thread starts.
void keep_freed_memory();

}  // namespace tandem
