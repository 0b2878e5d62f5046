import { spawnSync } from 'node:child_process';
import { GenericContainer, getContainerRuntimeClient, Wait } from 'testcontainers';
import { describe, expect, it } from 'vitest';
import { containersMode, DEFAULT_REDIS_IMAGE, removeLeftovers, runLabels } from './services.ts';

/*
 * The test runs' containers (tests/support/services.ts): a run killed before its teardown leaves its
 * containers behind, and the next run on the host removes them, never those of a run still going.
 */

describe('TEST_CONTAINERS', () => {
  it('is auto, off or require, and nothing else', () => {
    expect([undefined, '', 'auto', 'off', 'require'].map(containersMode)).toEqual([
      'auto',
      'auto',
      'auto',
      'off',
      'require',
    ]);
    expect(() => containersMode('yes')).toThrow('TEST_CONTAINERS=yes: expected auto, off or require');
  });
});

const mode = containersMode(process.env.TEST_CONTAINERS);
const client = mode === 'off' ? undefined : await getContainerRuntimeClient().catch(() => undefined);
if (!client && mode === 'require')
  throw new Error('TEST_CONTAINERS=require, and no container engine answers');

describe.skipIf(!client)('leftover containers', () => {
  it("removes the containers of a run whose process is gone, and keeps a live run's", async () => {
    const engine = (client as NonNullable<typeof client>).container.dockerode;
    // A pid that was a process a moment ago and is none now.
    const gone = spawnSync(process.execPath, [
      '-e',
      'process.stdout.write(String(process.pid))',
    ]).stdout.toString();
    const image = process.env.TEST_REDIS_IMAGE || DEFAULT_REDIS_IMAGE;
    const start = (pid: number) =>
      new GenericContainer(image)
        .withLabels(runLabels(pid))
        .withCommand(['--save', ''])
        .withExposedPorts(6379)
        .withWaitStrategy(Wait.forSuccessfulCommand('redis-cli ping'))
        .start();
    const dead = await start(Number(gone));
    const live = await start(process.pid).catch(async (err: unknown) => {
      await engine.getContainer(dead.getId()).remove({ force: true });
      throw err;
    });
    try {
      const removed = await removeLeftovers(engine);
      expect(removed).toContain(dead.getId());
      expect(removed).not.toContain(live.getId());
      const ids = (await engine.listContainers({ all: true })).map((c) => c.Id);
      expect(ids).not.toContain(dead.getId());
      expect(ids).toContain(live.getId());
    } finally {
      await live.stop({ remove: true, removeVolumes: true });
      await engine
        .getContainer(dead.getId())
        .remove({ force: true })
        .catch(() => {});
    }
  });
});
