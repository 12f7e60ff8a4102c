// The timing clock's lead-in: one thread waits `ns` nanoseconds of the global timer, so the
// stream is busy while the host submits a sample's launches and the start event fires with
// them already queued (no host submission latency inside the timed region).
extern "C" __global__ void vnni_delay(unsigned long long ns) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(1000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}
