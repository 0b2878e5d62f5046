import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { access, lstat, mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verify as argon2Verify } from '@node-rs/argon2';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminSocketPath } from '../../infra/admin-socket.ts';
import { openDatabase } from '../../infra/db/open.ts';
import { findAccountByEmail } from '../../projections/accounts.ts';
import { listActivity } from '../../projections/activity.ts';
import { cli, NODE } from '../support/process.ts';
import { type ServerProcess, startServer } from '../support/server.ts';

/*
 * On the embedded database the running server holds DATA_DIR; the CLI's accounts, keys and staff
 * commands, finding it locked, are run by that server over its admin socket (DATA_DIR/admin.sock):
 * the same output and exit codes as on their own, results the server sees at once, the same activity
 * records. Where no server answers on the socket, the lock's one-line refusal as before.
 */

const HEAVY = 180_000;

type Run = Awaited<ReturnType<typeof cli>>;
/** What a run said, for comparing two runs of one command. */
const said = (r: Run): { code: number | null; stdout: string; stderr: string } => ({
  code: r.code,
  stdout: r.stdout,
  stderr: r.stderr,
});

describe('the CLI beside a running server on the embedded database', () => {
  let dataDir: string;
  let env: Record<string, string>;
  let server: ServerProcess | null = null;
  beforeAll(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'cs-through-'));
    env = { DATA_DIR: dataDir, DEMO_ON_FIRST_START: 'false' };
  });
  afterAll(async () => {
    await server?.stop();
    await rm(dataDir, { recursive: true, force: true });
  });

  it(
    'runs accounts, keys and staff through the server: the server sees the results, recorded as the CLI records them',
    async () => {
      server = await startServer(env);
      const socket = await stat(adminSocketPath(dataDir));
      expect(socket.isSocket()).toBe(true);
      expect(socket.mode & 0o777).toBe(0o600);

      const account = await cli(
        ['accounts', 'create', '--name', 'Acme', '--email', 'owner@acme.example'],
        env,
      );
      expect(account.code, account.stderr).toBe(0);
      expect(account.stderr).toBe('');
      const opened = JSON.parse(account.stdout) as { account_id: string; email: string; password: string };
      expect(opened).toEqual({
        account_id: expect.stringMatching(/^acc_/),
        email: 'owner@acme.example',
        password: expect.any(String),
      });
      const accountId = opened.account_id;

      const created = await cli(
        ['keys', 'create', '--account', accountId, '--name', 'Feed', '--scope', 'read'],
        env,
      );
      expect(created.code, created.stderr).toBe(0);
      expect(created.stderr).toBe('The key is shown this once: store it now. Only its hash is kept.\n');
      const key = JSON.parse(created.stdout) as { key_id: string; api_key: string; scope: string };
      expect(key.scope).toBe('read');
      // The server answers the new key at once.
      const sites = (k: string): Promise<Response> =>
        fetch(`${server?.url}/api/v1/sites`, { headers: { authorization: `Bearer ${k}` } });
      expect((await sites(key.api_key)).status).toBe(200);

      const listed = await cli(['keys', 'list', '--account', accountId], env);
      expect(listed.code, listed.stderr).toBe(0);
      // One row (its last use may or may not be stored yet: that is written in the background).
      const { last_used_at: _used, ...row } = JSON.parse(listed.stdout) as Record<string, unknown>;
      expect(row).toEqual({
        key_id: key.key_id,
        name: 'Feed',
        prefix: key.api_key.slice(0, 14),
        scope: 'read',
        created_at: expect.any(String),
        revoked_at: null,
      });
      expect(listed.stdout).not.toContain(key.api_key);

      const revoked = await cli(['keys', 'revoke', '--account', accountId, '--key', key.key_id], env);
      expect(said(revoked)).toEqual({ code: 0, stdout: '', stderr: 'key revoked\n' });
      expect((await sites(key.api_key)).status).toBe(401);

      // A password piped in reaches the server as the CLI read it.
      const piped = await cli(
        ['accounts', 'set-password', '--email', 'OWNER@acme.example', '--password-stdin'],
        env,
        'a piped password here\nsecond line ignored\n',
      );
      expect(said(piped)).toEqual({
        code: 0,
        stdout: `${JSON.stringify({ account_id: accountId, email: 'owner@acme.example' })}\n`,
        stderr: '',
      });

      const staff = await cli(['staff', 'create', '--name', 'Sam', '--email', 'sam@support.example'], env);
      expect(staff.code, staff.stderr).toBe(0);
      expect(JSON.parse(staff.stdout)).toMatchObject({ staff_id: expect.stringMatching(/^stf_/) });

      // Each ran in the server, not beside it: its log names them (never their arguments).
      const lines = (await server.logsNow()).filter((l) => l.includes('"admin socket command"'));
      const logged = lines.map((l) => JSON.parse(l) as { command: string; exit_code: number });
      expect(logged.map((l) => [l.command, l.exit_code])).toEqual([
        ['accounts create', 0],
        ['keys create', 0],
        ['keys list', 0],
        ['keys revoke', 0],
        ['accounts set-password', 0],
        ['staff create', 0],
      ]);
      expect(lines.join('\n')).not.toContain('owner@acme.example');

      // Stopped, the server takes its socket away and lets go of the folder.
      expect(await server.stop()).toBe(0);
      server = null;
      await expect(lstat(adminSocketPath(dataDir))).rejects.toMatchObject({ code: 'ENOENT' });
      const handle = await openDatabase({ dataDir });
      try {
        const hash = (await findAccountByEmail(handle.db, 'owner@acme.example'))?.password_hash ?? '';
        expect(await argon2Verify(hash, 'a piped password here')).toBe(true);
        // The records the CLI makes on its own (tests/cli/cli.int.test.ts), made by the server's run.
        const log = await listActivity(handle.db, accountId, { page: 1, perPage: 20, source: 'system' });
        expect(
          log.rows.map((r) => [r.operation, r.actor, r.status, r.site_id, r.article_id]).reverse(),
        ).toEqual([
          ['open_account', { type: 'system', id: 'cli', name: 'Operator (CLI)' }, 200, null, null],
          ['create_api_key', { type: 'system', id: 'cli', name: 'Operator (CLI)' }, 200, null, null],
          ['revoke_api_key', { type: 'system', id: 'cli', name: 'Operator (CLI)' }, 200, null, null],
          ['change_password', { type: 'system', id: 'cli', name: 'Operator (CLI)' }, 200, null, null],
        ]);
      } finally {
        await handle.close();
      }
    },
    HEAVY,
  );

  it(
    'says a refused command and a usage error as the CLI on its own says them',
    async () => {
      const refusals = [
        ['keys', 'revoke', '--account', 'acc_nobody', '--key', 'key_nope'],
        ['accounts', 'set-password', '--email', 'nobody@acme.example'],
        ['accounts', 'create', '--name', 'Again', '--email', 'OWNER@acme.example'],
        ['staff', 'create', '--name', 'Sam again', '--email', 'sam@support.example'],
        ['keys', 'create', '--account', 'acc_nobody'],
      ];
      const usage = [
        ['keys', 'list'],
        ['keys', 'revoke', '--account', 'acc_1'],
        ['keys', 'create', '--account', 'acc_1', '--scope', 'admin'],
        ['accounts', 'create', '--name', 'Short', '--email', 'short@acme.example', '--password', 'short'],
        ['staff', 'create', '--email', 'no-name@acme.example'],
        ['accounts', 'rename'],
      ];
      server = await startServer(env);
      const through: Run[] = [];
      for (const args of [...refusals, ...usage]) through.push(await cli(args, env));
      const logged = (await server.logsNow()).filter((l) => l.includes('"admin socket command"'));
      expect(await server.stop()).toBe(0);
      server = null;

      // The same commands with the folder free: run by the CLI itself.
      for (const [i, args] of [...refusals, ...usage].entries()) {
        const alone = await cli(args, env);
        expect(said(through[i] as Run), args.join(' ')).toEqual(said(alone));
      }
      expect(through.map((r) => r.code)).toEqual([1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]);
      expect(through[0]?.stderr).toBe('not_found: No account acc_nobody\n');
      expect(through[2]?.stderr).toBe('conflict: An account with this email exists already\n');
      expect(through[5]?.stderr).toMatch(/^--account is required\n\nUsage: npm run cli -- <command>/);
      // The usage errors were said before anything was sent: only the refusals reached the server.
      expect(logged).toHaveLength(refusals.length);
    },
    HEAVY,
  );

  it('reads every argument before the database: a usage error opens nothing in DATA_DIR', async () => {
    const nowhere = join(dataDir, 'not-made');
    for (const args of [
      ['keys', 'list'],
      ['keys', 'revoke', '--account', 'acc_1'],
      ['staff', 'create', '--email', 'no-name@acme.example'],
      ['projections', 'rebuild', 'no_such_read_model'],
      ['projections', 'frobnicate'],
    ]) {
      const r = await cli(args, { DATA_DIR: nowhere });
      expect(r.code, r.stderr).toBe(2);
    }
    await expect(access(nowhere)).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it(
    'refuses in one line, as before, where the folder is locked and no server answers on the socket',
    async () => {
      const holder = await openDatabase({ dataDir, holder: 'the server (npm start)' });
      const refusal = new RegExp(
        `^DATA_DIR="${dataDir}" is in use by the server \\(npm start\\) \\(pid ${process.pid}, since [^)]+\\): .*Stop that process first, or set DATABASE_URL[^\\n]*\\n$`,
      );
      const command = ['keys', 'list', '--account', 'acc_1'];
      try {
        // No socket (a server of a release without one).
        const absent = await cli(command, env);
        expect(absent.code).toBe(1);
        expect(absent.stdout).toBe('');
        expect(absent.stderr).toMatch(refusal);

        // A socket file left by a listener that was killed: nobody answers on it.
        const path = adminSocketPath(dataDir);
        const child = spawn(
          NODE,
          [
            '-e',
            "require('node:net').createServer().listen(process.argv[1], () => console.log('ready'))",
            path,
          ],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        );
        await once(child.stdout, 'data');
        child.kill('SIGKILL');
        await once(child, 'exit');
        expect((await lstat(path)).isSocket()).toBe(true);
        const stale = await cli(
          ['accounts', 'set-password', '--email', 'a@b.example', '--password-stdin'],
          env,
          'long enough password\n',
        );
        expect(stale.code).toBe(1);
        expect(stale.stdout).toBe('');
        expect(stale.stderr).toMatch(refusal);
      } finally {
        await holder.close();
      }
      // A server started on the folder replaces that file with its own socket, and answers on it.
      server = await startServer(env);
      const revoked = await cli(['keys', 'revoke', '--account', 'acc_1', '--key', 'key_1'], env);
      expect(said(revoked)).toEqual({ code: 1, stdout: '', stderr: 'not_found: No account acc_1\n' });
      expect((await server.logsNow()).some((l) => l.includes('"admin socket command"'))).toBe(true);
      expect(await server.stop()).toBe(0);
      server = null;
    },
    HEAVY,
  );
});
