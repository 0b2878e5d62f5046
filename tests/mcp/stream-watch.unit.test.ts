import { describe, expect, it } from 'vitest';
import type { RequestPrincipal } from '../../apps/server/http/auth.ts';
import {
  SESSION_ENDED,
  streamWatch,
  TOKEN_ENDED,
  type WatchedStream,
} from '../../apps/server/mcp/stream-watch.ts';

/*
 * The watch over open notification streams (apps/server/mcp/stream-watch.ts), one round at a time
 * through `check()`: what is refused ends, what cannot be looked up stays. The timer and the real token
 * check are exercised in tests/mcp/stream-lifetime.int.test.ts.
 */

const principal: RequestPrincipal = {
  accountId: 'acc_1',
  scope: 'read',
  actor: { type: 'oauth_client', id: 'client_1', name: 'Assistant' },
};

function setUp(opts: { valid: Set<string>; live: Set<string>; down?: 'tokens' | 'sessions' }) {
  const ended: Array<{ name: string; why: string }> = [];
  const errors: unknown[] = [];
  let verified = 0;
  const watch = streamWatch({
    verify: async (token) => {
      verified += 1;
      if (opts.down === 'tokens') throw new Error('database away');
      return opts.valid.has(token) ? principal : null;
    },
    keepSessions: async (ids) => {
      if (opts.down === 'sessions') throw new Error('database away');
      return new Set(ids.filter((id) => opts.live.has(id)));
    },
    everyMs: 3_600_000,
    onError: (error) => errors.push(error),
  });
  const stream = (name: string, token: string, session: string | null): WatchedStream => ({
    token,
    session,
    end: (why) => ended.push({ name, why }),
  });
  return { watch, stream, ended, errors, verified: () => verified };
}

describe('the watch over open notification streams', () => {
  it('ends the streams of a refused token and of an ended session, and only those', async () => {
    const { watch, stream, ended, verified } = setUp({ valid: new Set(['good']), live: new Set(['s1']) });
    const releases = [
      watch.hold(stream('refused token', 'bad', 's1')),
      watch.hold(stream('refused listen', 'bad', null)),
      watch.hold(stream('ended session', 'good', 's2')),
      watch.hold(stream('kept', 'good', 's1')),
      watch.hold(stream('kept listen', 'good', null)),
    ];
    await watch.check();
    expect(ended).toEqual([
      { name: 'refused token', why: TOKEN_ENDED },
      { name: 'refused listen', why: TOKEN_ENDED },
      { name: 'ended session', why: SESSION_ENDED },
    ]);
    // One check per token, however many streams it opened.
    expect(verified()).toBe(2);
    expect(watch.size).toBe(2);
    // Ended once: a second round ends nothing more.
    await watch.check();
    expect(ended).toHaveLength(3);
    for (const release of releases) release();
    expect(watch.size).toBe(0);
    watch.stop();
  });

  it('keeps every stream while the database cannot answer, saying so once a round', async () => {
    for (const down of ['tokens', 'sessions'] as const) {
      const { watch, stream, ended, errors } = setUp({ valid: new Set(['a', 'b']), live: new Set(), down });
      watch.hold(stream('one', 'a', 's1'));
      watch.hold(stream('two', 'b', 's2'));
      await watch.check();
      expect(ended, down).toEqual([]);
      expect(errors, down).toHaveLength(1);
      watch.stop();
    }
  });

  it('a check asked for during a round waits for one more round', async () => {
    const valid = new Set(['t']);
    const { watch, stream, ended } = setUp({ valid, live: new Set() });
    watch.hold(stream('listen', 't', null));
    const first = watch.check();
    valid.delete('t');
    const second = watch.check();
    await Promise.all([first, second]);
    expect(ended).toEqual([{ name: 'listen', why: TOKEN_ENDED }]);
    watch.stop();
  });
});
