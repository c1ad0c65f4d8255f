// What a crash says before it dies: the signal, the faulting address, the instruction and
// stack pointers, and a backtrace (each frame as object +offset, which
// `addr2line -f -C -e OBJECT OFFSET` reads). The handler runs on a stack of its own, so a
// stack overflow or a corrupted stack pointer is reported too. After the report the
// process dies of the same signal: exit status and core dumps stay what they would be.
#pragma once

namespace tandem {

// Installs the handler for SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT, and a signal stack
// for the calling thread. Once, early in main.
void install_crash_report();

// A signal stack for the calling thread (signal stacks are per thread): for threads that
// run decoders and other native code. Freed when the thread ends.
void crash_report_this_thread();

}  // namespace tandem
