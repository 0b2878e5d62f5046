import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogDestination, LOG_BATCH_BYTES } from '../../infra/log-destination.ts';
import { PATIENCE } from '../support/wait.ts';

const lines = async (path: string): Promise<string[]> =>
  (await readFile(path, 'utf8').catch(() => '')).split('\n').filter((line) => line !== '');

/**
 * The file's lines now, read in the calling tick: no timer (the batch delay's flush) can run between a
 * log call and this read, however busy the machine.
 */
const linesNow = (path: string): string[] => {
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    // Not created yet: nothing written.
  }
  return text.split('\n').filter((line) => line !== '');
};

describe('the batched log destination', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cs-log-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('holds lines back until a batch is full, then writes them together, whole and in order', async () => {
    const path = join(dir, 'app.log');
    const log = pino(createLogDestination(path).stream);
    log.info({ n: 0 }, 'first');
    // Read within the same tick as the line (before the batch delay can have run): nothing has gone to
    // the file yet.
    expect(linesNow(path)).toEqual([]);
    const long = 'x'.repeat(200);
    const count = Math.ceil(LOG_BATCH_BYTES / 200) + 1;
    for (let n = 1; n <= count; n++) log.info({ n, long }, 'more');
    // A batch's worth went out at once, as whole lines, in the same tick; the lines after the last full
    // batch are still held back.
    const written = linesNow(path);
    expect(written.length).toBeGreaterThan(1);
    expect(written.length).toBeLessThan(count + 1);
    expect(written.map((line) => JSON.parse(line).n)).toEqual(written.map((_, n) => n));
  });

  it('writes a lone line within the batch delay, without more lines coming', async () => {
    const path = join(dir, 'quiet.log');
    const log = pino(createLogDestination(path).stream);
    log.info('alone');
    await vi.waitFor(async () => expect(await lines(path)).toHaveLength(1), PATIENCE);
    expect(JSON.parse((await lines(path))[0] ?? '{}').msg).toBe('alone');
  });

  it('flush writes what is waiting at once', async () => {
    const path = join(dir, 'flushed.log');
    const destination = createLogDestination(path);
    pino(destination.stream).info('waiting');
    destination.flush();
    expect((await lines(path)).map((line) => JSON.parse(line).msg)).toEqual(['waiting']);
  });

  it('writes what is waiting when the process exits, on an uncaught error too', async () => {
    const path = join(dir, 'exit.log');
    const module = resolve(import.meta.dirname, '../../infra/log-destination.ts');
    const script = `
      import pino from 'pino';
      import { createLogDestination } from ${JSON.stringify(module)};
      const log = pino(createLogDestination(${JSON.stringify(path)}).stream);
      log.info('before');
      setTimeout(() => { log.error('crashing'); throw new Error('boom'); }, 0);
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: resolve(import.meta.dirname, '../..'),
      encoding: 'utf8',
    });
    expect(child.status).toBe(1);
    expect(child.stderr).toContain('boom');
    expect((await lines(path)).map((line) => JSON.parse(line).msg)).toEqual(['before', 'crashing']);
  });
});
