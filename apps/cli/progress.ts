import { createRequire } from 'node:module';

/** cli-progress (and the text-width packages it loads), read only by a bar drawn on a terminal. */
const load = createRequire(import.meta.url);

type ProgressBar = { update(done: number, total?: number): void; stop(): void };

/**
 * A progress bar on stderr when it is a terminal; otherwise a line every few seconds, so logs of a
 * long run in CI or a pipe still say how far it got. stdout stays free for results (`--json`).
 */
export function progressBar(label: string, total: number): ProgressBar {
  if (process.stderr.isTTY) {
    const cliProgress = load('cli-progress') as typeof import('cli-progress');
    const bar = new cliProgress.SingleBar(
      {
        format: `${label} [{bar}] {percentage}% {value}/{total} eta {eta_formatted}`,
        stream: process.stderr,
        hideCursor: true,
        etaBuffer: 200,
      },
      cliProgress.Presets.shades_classic,
    );
    bar.start(total, 0);
    return {
      update(done, newTotal) {
        if (newTotal !== undefined) bar.setTotal(newTotal);
        bar.update(done);
      },
      stop: () => bar.stop(),
    };
  }
  let last = 0;
  let current = 0;
  let max = total;
  const started = Date.now();
  return {
    update(done, newTotal) {
      current = done;
      if (newTotal !== undefined) max = newTotal;
      if (Date.now() - last > 5000) {
        last = Date.now();
        process.stderr.write(`${label}: ${done}/${max}\n`);
      }
    },
    stop() {
      process.stderr.write(
        `${label}: ${current}/${max} in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
      );
    },
  };
}
