/* What one step of host-access validation costs on this machine, piece by piece (issue 35):
 * a page shared by two watched sub-allocations is opened for one instruction and closed by the
 * single-step trap after it (layer/src/profile/watch/step.rs). Run:
 *   cc -O2 bench/trap_cost.c -o /tmp/trap_cost && /tmp/trap_cost
 * Prints microseconds per operation: an mprotect pair on one page of a 48 MiB shared mapping,
 * a signal round trip (raise), an int3 trap, a TF single-step trap, a fault that opens the
 * page, and the whole step (fault, open, TF trap, close) as echo does it. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}
static char *page;
static int stepping;
static void on_usr1(int s) { (void)s; }
static void on_segv(int s, siginfo_t *i, void *c) {
  (void)s; (void)i;
  mprotect(page, 4096, PROT_READ | PROT_WRITE);
  if (stepping) ((ucontext_t *)c)->uc_mcontext.gregs[REG_EFL] |= 0x100;
}
static void on_trap(int s, siginfo_t *i, void *c) {
  (void)s; (void)i;
  if (stepping) mprotect(page, 4096, PROT_NONE);
  ((ucontext_t *)c)->uc_mcontext.gregs[REG_EFL] &= ~0x100;
}
int main(void) {
  const int n = 20000;
  size_t sz = 48 << 20;
  char *m = mmap(0, sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  for (size_t i = 0; i < sz; i += 4096) m[i] = 1;
  page = m + sz / 2;
  volatile char *q = page;
  struct sigaction sa = {0};
  sa.sa_flags = SA_SIGINFO;
  sa.sa_sigaction = on_segv;
  sigaction(SIGSEGV, &sa, 0);
  sa.sa_sigaction = on_trap;
  sigaction(SIGTRAP, &sa, 0);
  signal(SIGUSR1, on_usr1);
  double t[7];
  t[0] = now();
  for (int i = 0; i < n; i++) {
    mprotect(page, 4096, PROT_NONE);
    mprotect(page, 4096, PROT_READ | PROT_WRITE);
  }
  t[1] = now();
  for (int i = 0; i < n; i++) raise(SIGUSR1);
  t[2] = now();
  for (int i = 0; i < n; i++) __asm__ volatile("int3");
  t[3] = now();
  for (int i = 0; i < n; i++) __asm__ volatile("pushf; orl $0x100,(%%rsp); popf; nop" ::: "memory", "cc");
  t[4] = now();
  for (int i = 0; i < n; i++) {
    mprotect(page, 4096, PROT_NONE);
    (void)q[i % 4096];
  }
  t[5] = now();
  stepping = 1;
  mprotect(page, 4096, PROT_NONE);
  for (int i = 0; i < n; i++) (void)q[i % 4096];
  t[6] = now();
  const char *what[] = {"mprotect pair", "signal round trip", "int3 trap", "TF single-step trap",
                        "mprotect + fault + open", "step (fault, open, TF trap, close)"};
  for (int k = 0; k < 6; k++) printf("%-36s %6.2f us\n", what[k], (t[k + 1] - t[k]) / n);
  return 0;
}
