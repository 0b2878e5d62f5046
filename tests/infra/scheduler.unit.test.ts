import { describe, expect, it } from 'vitest';
import { type Job, startJobs } from '../../infra/jobs/scheduler.ts';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function recordingLogger() {
  const lines: { level: string; obj: Record<string, unknown>; msg: string }[] = [];
  return {
    lines,
    logger: {
      info: (obj: object, msg: string) =>
        lines.push({ level: 'info', obj: obj as Record<string, unknown>, msg }),
      error: (obj: object, msg: string) =>
        lines.push({ level: 'error', obj: obj as Record<string, unknown>, msg }),
    },
  };
}

describe('the job scheduler', () => {
  it('runs each job every interval, one run at a time, logging summaries and failures without throwing', async () => {
    const { lines, logger } = recordingLogger();
    let active = 0;
    let maxActive = 0;
    let slowRuns = 0;
    let failures = 0;
    const slow: Job = {
      name: 'slow',
      everyMs: 20,
      run: async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        await sleep(30);
        active--;
        slowRuns++;
        return { removed: slowRuns };
      },
    };
    const failing: Job = {
      name: 'failing',
      everyMs: 20,
      run: async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        active--;
        failures++;
        throw new Error('database unreachable');
      },
    };
    const scheduler = startJobs([slow, failing], { logger, firstRunAfterMs: 0 });
    await sleep(400);
    await scheduler.stop();
    const afterStop = slowRuns + failures;
    expect(slowRuns).toBeGreaterThanOrEqual(2);
    expect(failures).toBeGreaterThanOrEqual(2);
    expect(maxActive).toBe(1);
    expect(lines.find((l) => l.obj.job === 'slow')).toMatchObject({
      level: 'info',
      msg: 'job done',
      obj: { summary: { removed: 1 } },
    });
    expect(lines.find((l) => l.obj.job === 'failing')).toMatchObject({ level: 'error' });
    // Stopped: nothing runs any more.
    await sleep(100);
    expect(slowRuns + failures).toBe(afterStop);
  });

  it('waits for the run under way when stopped, and starts nothing before the first delay', async () => {
    const { logger } = recordingLogger();
    let finished = false;
    let started = 0;
    const job: Job = {
      name: 'long',
      everyMs: 1000,
      run: async () => {
        started++;
        await sleep(80);
        finished = true;
      },
    };
    const idle = startJobs([job], { logger, firstRunAfterMs: 10_000 });
    await sleep(30);
    await idle.stop();
    expect(started).toBe(0);

    const busy = startJobs([job], { logger, firstRunAfterMs: 0 });
    await sleep(40);
    expect(started).toBe(1);
    await busy.stop();
    expect(finished).toBe(true);
  });
});
