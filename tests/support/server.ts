import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { baseEnv, NODE, ROOT } from './process.ts';
import { PATIENCE } from './wait.ts';

export type ServerProcess = {
  url: string;
  child: ChildProcess;
  logs: () => string[];
  /**
   * The log lines up to now: the server writes its lines in batches (infra/log-destination.ts), so
   * this asks it for a marked `GET /healthz` and resolves once that request's access-log line has
   * arrived, and with it every line written before.
   */
  logsNow(): Promise<string[]>;
  /** Sends SIGTERM and resolves with the exit code, once its output has all been read. */
  stop(): Promise<number | null>;
};

/** Starts the real server (`node apps/server/main.js`) on a free port and waits until it listens. */
export function startServer(
  env: Record<string, string | undefined>,
  timeoutMs = 60_000,
  /** How many of the last log lines `logs()` keeps (a long run at info level writes millions). */
  keepLines = Number.POSITIVE_INFINITY,
  /** The checkout whose server is started (another one: a benchmark's baseline). */
  root = ROOT,
): Promise<ServerProcess> {
  return new Promise((resolve, reject) => {
    const child = spawn(NODE, ['apps/server/main.js'], {
      cwd: root,
      env: { ...baseEnv(), PORT: '0', LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    let buffer = '';
    // 'close', not 'exit': the lines written as it exits are read by then.
    const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not start in time:\n${lines.join('\n')}`));
    }, timeoutMs);
    const onData = (d: Buffer): void => {
      buffer += d.toString();
      let i = buffer.indexOf('\n');
      while (i >= 0) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 1);
        lines.push(line);
        if (lines.length > keepLines) lines.splice(0, lines.length - keepLines);
        const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(line);
        if (match?.[1]) {
          clearTimeout(timer);
          const url = match[1];
          resolve({
            url,
            child,
            logs: () => lines,
            logsNow: async () => {
              const mark = randomUUID();
              await fetch(`${url}/healthz?log-mark=${mark}`).then((r) => r.arrayBuffer());
              // A plain loop, not vi.waitFor: the benchmarks and the reliability suite start servers too.
              const deadline = Date.now() + PATIENCE.timeout;
              while (!lines.some((line) => line.includes(mark))) {
                if (Date.now() > deadline)
                  throw new Error(`the marked request's log line never came:\n${lines.join('\n')}`);
                await new Promise((r) => setTimeout(r, PATIENCE.interval));
              }
              return lines;
            },
            stop: async () => {
              child.kill('SIGTERM');
              return exited;
            },
          });
        }
        i = buffer.indexOf('\n');
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${lines.join('\n')}`));
    });
  });
}

/**
 * The address of a server's metrics listener (started with METRICS_PORT), where its detailed `/readyz`
 * is: `http://127.0.0.1:<port>`, read from its log line `metrics listening at ...`.
 */
export function metricsBaseOf(server: Pick<ServerProcess, 'logs'>): string {
  for (const line of server.logs()) {
    const match = /metrics listening at (http:\/\/\S+)\/metrics/.exec(line);
    if (match?.[1]) return match[1];
  }
  throw new Error(
    `no metrics listener in the server's log (METRICS_PORT unset?):\n${server.logs().join('\n')}`,
  );
}

/** The metrics address (`.../metrics`) a server started with METRICS_PORT announced in its log. */
export function announcedMetricsUrl(server: Pick<ServerProcess, 'logs'>): string {
  return `${metricsBaseOf(server)}/metrics`;
}
