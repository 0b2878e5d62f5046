import { appendFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { isMainThread } from 'node:worker_threads';

/*
 * Loaded into the server process by the soak scenario (NODE_OPTIONS=--import), never by the service
 * itself: once a second it appends one JSON line to SOAK_PROBE_FILE with the process's memory, the
 * event loop's delay over that second and the CPU it used, and the delay over the window since the
 * probe started or was last sent SIGUSR2 (`eld_window_*`: the canary scenario marks its load so).
 * Main thread only (the sanitiser's worker threads load it too).
 */

const file = process.env.SOAK_PROBE_FILE;
if (file && isMainThread) {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  const window = monitorEventLoopDelay({ resolution: 10 });
  window.enable();
  process.on('SIGUSR2', () => window.reset());
  let cpu = process.cpuUsage();
  const ms = (ns: number): number => Math.round(ns / 1e4) / 100;
  const timer = setInterval(() => {
    const memory = process.memoryUsage();
    const used = process.cpuUsage(cpu);
    cpu = process.cpuUsage();
    const line = {
      t: Date.now(),
      rss: memory.rss,
      heap_used: memory.heapUsed,
      heap_total: memory.heapTotal,
      external: memory.external,
      eld_p50_ms: ms(delay.percentile(50)),
      eld_p99_ms: ms(delay.percentile(99)),
      eld_max_ms: ms(delay.max),
      eld_window_p99_ms: ms(window.percentile(99)),
      eld_window_max_ms: ms(window.max),
      eld_window_count: window.count,
      cpu_ms: Math.round((used.user + used.system) / 1000),
    };
    delay.reset();
    appendFileSync(file, `${JSON.stringify(line)}\n`);
  }, 1_000);
  timer.unref();
}
