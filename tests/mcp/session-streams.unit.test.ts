import { describe, expect, it } from 'vitest';
import { sessionStreams } from '../../apps/server/mcp/notifications.ts';

/** A promise and the functions that settle it. */
function deferred<T>(): { promise: Promise<T>; resolve(value: T): void; reject(error: unknown): void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** The SSE event ids written on a stream so far. */
function idsOn(written: string[]): string[] {
  return written.flatMap((chunk) => [...chunk.matchAll(/^id: (.*)$/gm)].map((m) => m[1] as string));
}

describe('the GET streams of 2025-era sessions', () => {
  it('sends the notifications of revisions in their order, whichever lookup answers first', async () => {
    const lookups: Array<ReturnType<typeof deferred<Set<string>>>> = [];
    const errors: unknown[] = [];
    const streams = sessionStreams(
      () => {
        const lookup = deferred<Set<string>>();
        lookups.push(lookup);
        return lookup.promise;
      },
      (error) => errors.push(error),
    );
    const stream = streams.open('session-1');
    if (!stream) throw new Error('the stream did not open');
    const written: string[] = [];
    stream.on('data', (chunk: Buffer) => written.push(chunk.toString()));

    const sent = [
      streams.publish('content-service://articles/a', '10-1'),
      streams.publish('content-service://articles/b', '11-2'),
      streams.publish('content-service://articles/a', '12-3'),
    ];
    // The newest revision's lookup answers first, then one refused, then the oldest.
    lookups[2]?.resolve(new Set(['session-1']));
    lookups[1]?.reject(new Error('database away'));
    await new Promise((resolve) => setImmediate(resolve));
    expect(idsOn(written)).toEqual([]);
    lookups[0]?.resolve(new Set(['session-1']));
    await Promise.all(sent);
    expect(idsOn(written)).toEqual(['10-1', '12-3']);
    expect(errors).toEqual([new Error('database away')]);
    streams.endAll();
  });
});
