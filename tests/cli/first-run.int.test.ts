import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { HEARTBEAT_MS, LOCK_FILE, type LockHolder } from '../../infra/db/data-dir-lock.ts';
import { openDatabase } from '../../infra/db/open.ts';
import { freePort } from '../oauth/helpers.ts';
import { createTestDatabase, type TestDatabase } from '../support/db.ts';
import { cli, NODE, run } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';
import { PATIENCE } from '../support/wait.ts';

/*
 * A newcomer's first run on the embedded database: `npm start` beside `npm run cli -- ...` in another
 * terminal, a server killed and started again, the login printed by the first start.
 */

const HEAVY = 180_000;

/** Signs in on the sign-in form over HTTP, as a browser without JavaScript does; true when it worked. */
async function signsIn(base: string, login: { email: string; password: string }): Promise<boolean> {
  const form = await fetch(`${base}/sign-in`);
  const cookies = (response: Response): string[] =>
    response.headers.getSetCookie().map((c) => c.split(';')[0] as string);
  const csrf = /name="csrf" value="([^"]+)"/.exec(await form.text())?.[1] ?? '';
  const posted = await fetch(`${base}/sign-in`, {
    method: 'POST',
    redirect: 'manual',
    headers: {
      cookie: cookies(form).join('; '),
      origin: base,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({ csrf, email: login.email, password: login.password }),
  });
  if (posted.status !== 303) return false;
  const page = await fetch(`${base}/sign-in`, { headers: { cookie: cookies(posted).join('; ') } });
  return (await page.text()).includes(`(${login.email})`);
}

/** The email and password the first start printed, once it has. */
async function printedLogin(server: ServerProcess): Promise<{ email: string; password: string }> {
  return vi.waitFor(() => {
    const text = server.logs().join('\n');
    const email = /^ {2}email {5}(\S+)$/m.exec(text)?.[1];
    const password = /^ {2}password {2}(\S+)$/m.exec(text)?.[1];
    if (!email || !password) throw new Error(`no login printed yet:\n${text}`);
    return { email, password };
  }, PATIENCE);
}

/** The accounts in an embedded database no process holds. */
async function accountsIn(dataDir: string): Promise<string[]> {
  const handle = await openDatabase({ dataDir });
  try {
    return (await handle.db.selectFrom('accounts').select('email').execute()).map((a) => a.email);
  } finally {
    await handle.close();
  }
}

/** A real server on a free port whose PUBLIC_URL is its own address (the sign-in form checks it). */
async function serve(env: Record<string, string>): Promise<ServerProcess> {
  const port = await freePort();
  return startServer({ ...env, PORT: String(port), PUBLIC_URL: `http://127.0.0.1:${port}` });
}

describe('DATA_DIR belongs to one process', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'cs-lock-'));
  });
  afterAll(async () => rm(dataDir, { recursive: true, force: true }));

  it(
    'refuses `seed-demo` beside a running server with one line naming it, and loses nothing across a restart',
    async () => {
      const env = { DATA_DIR: dataDir, DEMO_ON_FIRST_START: 'false' };
      let server = await serve(env);
      const holder = server.child.pid;
      let seeded: Awaited<ReturnType<typeof cli>>;
      try {
        seeded = await cli(
          ['seed-demo', '--json', '--sites', '1', '--articles', '2', '--backlinks', '2'],
          env,
        );
        // A worker is refused the same way, and names the server too.
        const worker = await run(NODE, ['apps/worker/main.js'], env);
        expect(worker.code).toBe(1);
        expect(worker.stderr).toContain(`is in use by the server (npm start) (pid ${holder},`);
      } finally {
        expect(await server.stop()).toBe(0);
      }
      server = await serve(env);
      try {
        // Whatever seed-demo said it made is there after the restart (without the lock it was not).
        if (seeded.code === 0) {
          const made = JSON.parse(seeded.stdout) as { email: string; password: string };
          expect(await signsIn(server.url, made), 'the account seed-demo printed signs in').toBe(true);
        }
        expect(seeded.code).toBe(1);
        expect(seeded.stdout).toBe('');
        expect(seeded.stderr.trim().split('\n')).toHaveLength(1);
        expect(seeded.stderr).toMatch(
          new RegExp(
            `^DATA_DIR="${dataDir}" is in use by the server \\(npm start\\) \\(pid ${holder}, since [^)]+\\): .*Stop that process first, or set DATABASE_URL`,
          ),
        );
      } finally {
        expect(await server.stop()).toBe(0);
      }
      // Stopped, the server let go: the CLI opens the folder, which holds no account.
      expect(await accountsIn(dataDir)).toEqual([]);
      const listed = await cli(['projections', 'status'], env);
      expect(listed.code, listed.stderr).toBe(0);
    },
    HEAVY,
  );

  it(
    'is taken over from a holder that was killed (kill -9), and a CLI command names itself to a server',
    async () => {
      const env = { DATA_DIR: dataDir, DEMO_ON_FIRST_START: 'false' };
      const killed = await serve(env);
      killed.child.kill('SIGKILL');
      await new Promise((resolve) => killed.child.once('exit', resolve));
      const server = await serve(env);
      expect(await server.stop()).toBe(0);

      // The other way round: a server started while a CLI command holds the folder is refused.
      const holding = await openDatabase({ dataDir, holder: 'the CLI command ingest sites (npm run cli)' });
      try {
        const refused = await run(NODE, ['apps/server/main.js'], { ...env, PORT: '0' });
        expect(refused.code).toBe(1);
        expect(refused.stderr.trim()).toMatch(
          new RegExp(
            `^DATA_DIR="${dataDir}" is in use by the CLI command ingest sites \\(npm run cli\\) \\(pid ${process.pid},`,
          ),
        );
      } finally {
        await holding.close();
      }
    },
    HEAVY,
  );

  it(
    'stops a server at once, exit 1, when its lock was taken over (it stalled longer than the watch)',
    async () => {
      const env = { DATA_DIR: dataDir, DEMO_ON_FIRST_START: 'false' };
      const server = await serve(env);
      const code = new Promise<number | null>((r) => server.child.once('exit', (c) => r(c)));
      const lock = join(dataDir, LOCK_FILE);
      const mine = JSON.parse(await readFile(lock, 'utf8')) as LockHolder;
      expect(mine).toMatchObject({ pid: server.child.pid, heartbeat_ms: HEARTBEAT_MS });
      // What a process on another host writes once it has watched this one's lock stay still.
      const taker = { ...mine, pid: 1, host: 'next-container.example', token: 'taker' };
      await writeFile(`${lock}.taker`, JSON.stringify(taker));
      await rename(`${lock}.taker`, lock);
      expect(await code).toBe(1);
      expect(server.logs().join('\n')).toContain(
        `this process's lock was taken over by the server (npm start) (pid 1 on next-container.example, since ${mine.since})`,
      );
      // It left the taker's lock alone.
      expect(JSON.parse(await readFile(lock, 'utf8'))).toMatchObject({ token: 'taker' });
      await rm(lock);
    },
    HEAVY,
  );
});

describe('the first start on an empty embedded database', () => {
  let dataDir: string;
  let test: TestDatabase;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'cs-first-'));
    test = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
    await test.drop();
  });

  it(
    'prints the address and a demo login that signs in, once: a second start makes and prints nothing',
    async () => {
      const env = { DATA_DIR: join(dataDir, 'data') };
      let server = await serve(env);
      let login: { email: string; password: string };
      try {
        login = await printedLogin(server);
        const text = server.logs().join('\n');
        expect(text).toContain(`Open ${server.url} in a browser and sign in with:`);
        expect(await signsIn(server.url, login)).toBe(true);
        expect(await signsIn(server.url, { ...login, password: 'not the password' })).toBe(false);
      } finally {
        expect(await server.stop()).toBe(0);
      }
      expect(await accountsIn(env.DATA_DIR)).toEqual([login.email]);

      server = await serve(env);
      try {
        expect(await signsIn(server.url, login)).toBe(true);
      } finally {
        expect(await server.stop()).toBe(0);
      }
      expect(server.logs().join('\n')).not.toContain('sign in with');
      expect(await accountsIn(env.DATA_DIR)).toEqual([login.email]);
    },
    HEAVY,
  );

  it(
    'makes nothing with DEMO_ON_FIRST_START=false, nor on a DATABASE_URL unless it asks, and then once',
    async () => {
      const off = { DATA_DIR: join(dataDir, 'off'), DEMO_ON_FIRST_START: 'false' };
      const server = await serve(off);
      expect(await server.stop()).toBe(0);
      expect(server.logs().join('\n')).not.toContain('sign in with');
      expect(await accountsIn(off.DATA_DIR)).toEqual([]);

      const postgres = { DATABASE_URL: test.databaseUrl as string, DATA_DIR: join(dataDir, 'unused') };
      const onPostgres = await serve(postgres);
      expect(await onPostgres.stop()).toBe(0);
      expect(onPostgres.logs().join('\n')).not.toContain('sign in with');
      expect(await test.handle.db.selectFrom('accounts').select('id').execute()).toEqual([]);

      // Asked, on a PostgreSQL server two replicas start on at once: one account, printed by one of them.
      const asked = await Promise.all([
        serve({ ...postgres, DEMO_ON_FIRST_START: 'true' }),
        serve({ ...postgres, DEMO_ON_FIRST_START: 'true' }),
      ]);
      try {
        const printing = await vi.waitFor(() => {
          const found = asked.find((server) => server.logs().join('\n').includes('sign in with'));
          if (!found) throw new Error('no login printed yet');
          return found;
        }, PATIENCE);
        expect(await signsIn(printing.url, await printedLogin(printing))).toBe(true);
      } finally {
        for (const server of asked) expect(await server.stop()).toBe(0);
      }
      expect(asked.filter((server) => server.logs().join('\n').includes('sign in with'))).toHaveLength(1);
      expect(await test.handle.db.selectFrom('accounts').select('id').execute()).toHaveLength(1);
    },
    HEAVY,
  );
});
