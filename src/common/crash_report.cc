#include "tandem/common/crash_report.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

namespace tandem {
namespace {

constexpr size_t kSignalStack = 64 * 1024;

void say(const char* text, int n) {
  if (n > 0 && write(STDERR_FILENO, text, static_cast<size_t>(std::min(n, 511)))) {
  }
}

void print_frame(int i, void* frame) {
  char line[512];
  Dl_info info{};
  const auto at = reinterpret_cast<uintptr_t>(frame);
  if (dladdr(frame, &info) && info.dli_fname) {
    say(line, std::snprintf(line, sizeof line, "  #%d %s +0x%lx %s\n", i, info.dli_fname,
                            static_cast<unsigned long>(at - reinterpret_cast<uintptr_t>(info.dli_fbase)),
                            info.dli_sname ? info.dli_sname : ""));
  } else {
    say(line, std::snprintf(line, sizeof line, "  #%d 0x%lx\n", i, static_cast<unsigned long>(at)));
  }
}

void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  char line[512];
  unsigned long ip = 0, sp = 0;
#if defined(__x86_64__)
  const auto* uc = static_cast<ucontext_t*>(context);
  ip = static_cast<unsigned long>(uc->uc_mcontext.gregs[REG_RIP]);
  sp = static_cast<unsigned long>(uc->uc_mcontext.gregs[REG_RSP]);
#else
  (void)context;
#endif
  say(line, std::snprintf(line, sizeof line, "tandem: fatal signal %d (%s) at address %p, ip 0x%lx, sp 0x%lx\n", sig,
                          strsignal(sig), info ? info->si_addr : nullptr, ip, sp));
  if (ip) {
    say(line, std::snprintf(line, sizeof line, "  faulting instruction:\n"));
    print_frame(-1, reinterpret_cast<void*>(ip + 1));  // +1: print_frame's readers subtract one
  }
  say(line, std::snprintf(line, sizeof line, "  backtrace (object +offset):\n"));
  void* frames[48];
  const int count = backtrace(frames, 48);
  for (int i = 0; i < count; ++i) print_frame(i, frames[i]);
  signal(sig, SIG_DFL);
  raise(sig);
}

void give_signal_stack() {
  thread_local std::unique_ptr<char[]> memory;
  if (memory) return;
  memory = std::make_unique<char[]>(kSignalStack);
  stack_t stack{};
  stack.ss_sp = memory.get();
  stack.ss_size = kSignalStack;
  sigaltstack(&stack, nullptr);
}

}  // namespace

void install_crash_report() {
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  give_signal_stack();
  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &action, nullptr);
}

void crash_report_this_thread() { give_signal_stack(); }

}  // namespace tandem
