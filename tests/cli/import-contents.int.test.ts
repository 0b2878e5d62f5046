import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { createGzip, gunzipSync, gzipSync } from 'node:zlib';
import { hash as argon2Hash } from '@node-rs/argon2';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LINE_MAX } from '../../infra/archive/lines.ts';
import {
  appendEvents,
  archiveEntries,
  type Entry,
  editRows,
  type Row,
  rowsOf,
  sealed,
  tarHeader,
} from '../support/archive.ts';
import { mediaFiles } from '../support/media.ts';
import { cli } from '../support/process.ts';

/*
 * `import` loads only what the service itself could have written (docs/operations.md, "Export and
 * import"): archives edited by hand, every checksum and count recomputed, whose rows say what no write
 * makes, are refused before anything is written, in one line naming the part and the line. So are a
 * line longer than any an export writes and a gzip stream that goes on far past its tar's end. The
 * target here is the embedded default: a refused import does not even make its folder.
 */

const HEAVY = 240_000;

let dir: string;
let good: Buffer;
let targets = 0;

/** A new target (each import its own, so that one cannot affect the next). */
function newTarget(): { dataDir: string; env: Record<string, string> } {
  targets += 1;
  const dataDir = join(dir, `target-${targets}`);
  return { dataDir, env: { DATA_DIR: dataDir, MEDIA_DIR: join(dir, `target-media-${targets}`) } };
}

const events = (entries: readonly Entry[]): Row[] => rowsOf(entries, 'events/000001.ndjson');
const ofType = (entries: readonly Entry[], type: string): Row[] =>
  events(entries).filter((r) => r.type === type);
const data = (row: Row | undefined): Record<string, unknown> => (row?.data ?? {}) as Record<string, unknown>;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'cs-contents-'));
  const source = { DATA_DIR: join(dir, 'source'), MEDIA_DIR: join(dir, 'source-media') };
  const seeded = await cli(['seed-demo', '--sites', '1', '--articles', '2', '--backlinks', '1'], source);
  expect(seeded.code, seeded.stderr).toBe(0);
  const exported = await cli(['export', '--to', join(dir, 'good.tar.gz')], source);
  expect(exported.code, exported.stderr).toBe(0);
  good = await readFile(join(dir, 'good.tar.gz'));
}, HEAVY);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function write(name: string, bytes: Buffer): Promise<string> {
  const file = join(dir, name);
  await writeFile(file, bytes);
  return file;
}

/** Runs the import and checks the refusal: one line matching `why`, exit 1, nothing written anywhere. */
async function refused(file: string, why: RegExp): Promise<void> {
  const { dataDir, env } = newTarget();
  const r = await cli(['import', '--from', file], env);
  expect(r.code, r.stderr).toBe(1);
  const lines = r.stderr.split('\n').filter((l) => l.trim() !== '' && !/^(verify|load|replay)\b/.test(l));
  expect(lines, r.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(why);
  expect(r.stdout).toBe('');
  expect(existsSync(dataDir), 'the target folder was made').toBe(false);
  expect(await mediaFiles(env.MEDIA_DIR as string)).toEqual([]);
}

/** The article of the archive whose body holds a protected block, and its creation. */
function protectedArticle(entries: readonly Entry[]): { id: string; body: string } {
  const created = ofType(entries, 'ArticleCreated').find((r) =>
    String(data(r).body).includes('data-service-protected'),
  );
  if (!created) throw new Error('seed-demo made no article with a protected block');
  return { id: String(data(created).articleId), body: String(data(created).body) };
}

const revisionFields = (articleId: string, revision: number) => ({
  articleId,
  revision,
  origin: 'api',
  actor: { type: 'api_key', id: 'key_x', name: 'Key' },
  reason: null,
});

it(
  'refuses an event the event store would refuse on append: an unknown type, a malformed payload',
  async () => {
    const entries = archiveEntries(good);
    const account = data(ofType(entries, 'AccountOpened')[0]).accountId as string;
    const unknown = appendEvents(entries, [
      { type: 'AccountDeleted', data: { accountId: account }, stream: `account-${account}` },
    ]);
    const line = events(unknown).length;
    await refused(
      await write('unknown-type.tar.gz', sealed(unknown)),
      new RegExp(`^events/000001\\.ndjson line ${line}: Unknown event type AccountDeleted`),
    );

    // A title that is not text: today's replay would stop on it with a TypeError.
    const malformed = editRows(entries, 'events/000001.ndjson', (rows) =>
      rows.map((r) => (r.type === 'ArticleCreated' ? { ...r, data: { ...data(r), title: 42 } } : r)),
    );
    await refused(
      await write('malformed.tar.gz', sealed(malformed)),
      /^events\/000001\.ndjson line \d+: Invalid ArticleCreated: data\.title: .*no write makes this event/,
    );
  },
  HEAVY,
);

it(
  'refuses article bodies, titles and image addresses that no write stores',
  async () => {
    const entries = archiveEntries(good);
    const hostile =
      '<p>hi</p><script>alert(1)</script><img src="x" onerror="alert(1)"><a href="javascript:alert(1)">x</a>';
    const scripted = editRows(entries, 'events/000001.ndjson', (rows) =>
      rows.map((r) =>
        r.type === 'ArticleCreated' ? { ...r, data: { ...data(r), body: `${hostile}${data(r).body}` } } : r,
      ),
    );
    await refused(
      await write('script.tar.gz', sealed(scripted)),
      /^events\/000001\.ndjson line \d+: ArticleCreated: The body is not one the sanitiser stores: it holds <script> at script\[1\]/,
    );

    const article = protectedArticle(entries);
    const image = appendEvents(entries, [
      {
        type: 'FeaturedImageReplaced',
        data: {
          ...revisionFields(article.id, 2),
          featuredImage: { url: 'javascript:alert(1)', alt: '', width: null, height: null },
        },
        stream: `article-${article.id}`,
      },
    ]);
    await refused(
      await write('image-url.tar.gz', sealed(image)),
      /line \d+: Invalid FeaturedImageReplaced: data\.featuredImage\.url: must be an absolute http or https URL/,
    );

    const title = appendEvents(entries, [
      {
        type: 'ArticleEdited',
        data: { ...revisionFields(article.id, 2), title: 'Ring\u0007', sanitized: [] },
        stream: `article-${article.id}`,
      },
    ]);
    await refused(
      await write('title.tar.gz', sealed(title)),
      /line \d+: ArticleEdited: The title contains the control character U\+0007/,
    );

    // An edit through the API that drops the protected blocks.
    const unprotected = appendEvents(entries, [
      {
        type: 'ArticleEdited',
        data: { ...revisionFields(article.id, 2), body: '<p>no links left</p>', sanitized: [] },
        stream: `article-${article.id}`,
      },
    ]);
    await refused(
      await write('protected.tar.gz', sealed(unprotected)),
      /line \d+: ArticleEdited: Protected blocks must stay as they are .*removed/,
    );
  },
  HEAVY,
);

it(
  'takes staff members and credentials only from events and rows a write makes',
  async () => {
    const entries = archiveEntries(good);
    const credentials = rowsOf(entries, 'tables/credentials/000001.ndjson');
    const accountHash = credentials.find((c) => c.kind === 'password');
    if (!accountHash) throw new Error('the demo account has no password');
    const staffId = 'stf_intruder';
    const withStaff = appendEvents(entries, [
      {
        type: 'StaffMemberAdded',
        data: { staffId, email: 'intruder@example.com', name: 'Intruder' },
        stream: `staff-${staffId}`,
      },
      { type: 'PasswordSet', data: { holder: 'staff', holderId: staffId }, stream: `staff-${staffId}` },
    ]);
    const credential = (secret: unknown, holder = staffId): Row => ({
      kind: 'password',
      secret,
      holder_id: holder,
      updated_at: new Date().toISOString(),
    });

    // Another person's password hash: a copy (argon2 hashes are salted, so two are never alike).
    const copied = editRows(withStaff, 'tables/credentials/000001.ndjson', (rows) => [
      ...rows,
      credential(accountHash.secret),
    ]);
    await refused(
      await write('copied-hash.tar.gz', sealed(copied)),
      new RegExp(
        `^tables/credentials/000001\\.ndjson line 3: the password of ${staffId} is the same hash as ${accountHash.holder_id}'s`,
      ),
    );

    // A password for someone no event gave one to.
    const fresh = await argon2Hash('a password of the intruder');
    const ghost = editRows(entries, 'tables/credentials/000001.ndjson', (rows) => [
      ...rows,
      credential(fresh, 'stf_ghost'),
    ]);
    await refused(
      await write('ghost.tar.gz', sealed(ghost)),
      /^tables\/credentials\/000001\.ndjson line 3: a password for stf_ghost, but no event of the log sets one/,
    );

    // A hash the service never makes (weaker parameters than its own).
    const weak = editRows(withStaff, 'tables/credentials/000001.ndjson', (rows) => [
      ...rows,
      credential(fresh.replace('m=19456,t=2,p=1', 'm=8,t=1,p=1')),
    ]);
    await refused(
      await write('weak.tar.gz', sealed(weak)),
      /line 3: the password of stf_intruder is not an argon2id password hash as the service makes it/,
    );

    // A staff member on an account's stream: not how the CLI makes one.
    const account = data(ofType(entries, 'AccountOpened')[0]).accountId as string;
    const misplaced = appendEvents(entries, [
      {
        type: 'StaffMemberAdded',
        data: { staffId, email: 'intruder@example.com', name: 'Intruder' },
        stream: `account-${account}`,
      },
    ]);
    await refused(
      await write('misplaced.tar.gz', sealed(misplaced)),
      new RegExp(
        `line \\d+: a StaffMemberAdded is on stream account-${account}, but its data puts it on staff-${staffId}`,
      ),
    );

    // Made as the CLI makes one (its own hash): imported, and named to the operator.
    const made = editRows(withStaff, 'tables/credentials/000001.ndjson', (rows) => [
      ...rows,
      credential(fresh),
    ]);
    const r = await cli(['import', '--from', await write('staff.tar.gz', sealed(made))], newTarget().env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^support staff: 1 \(intruder@example\.com\)$/m);
    expect((JSON.parse(r.stdout) as { staff: unknown }).staff).toEqual([
      { id: staffId, email: 'intruder@example.com', name: 'Intruder', password: true },
    ]);
  },
  HEAVY,
);

it(
  "refuses a gzip stream that goes on far past its tar's end, as soon as it does",
  async () => {
    // 64 MiB of zeros after the end blocks (3 GiB took minutes to be accepted).
    const tar = gunzipSync(good);
    await refused(
      await write(
        'zeros.tar.gz',
        gzipSync(Buffer.concat([tar, Buffer.alloc(64 * 1024 * 1024)]), { level: 1 }),
      ),
      /more than 1048576 zero bytes follow the end of its tar/,
    );
  },
  HEAVY,
);

it(
  'refuses a line longer than any an export writes, naming it, without reading it whole',
  async () => {
    // One line of LINE_MAX + 1 bytes in a part of its own, every checksum and count right.
    const entries = archiveEntries(good);
    const path = 'tables/sign_in_failures/000001.ndjson';
    const size = LINE_MAX + 2;
    const piece = Buffer.alloc(1024 * 1024, 0x61);
    const hash = createHash('sha256');
    for (let left = size - 1; left > 0; left -= piece.length)
      hash.update(piece.subarray(0, Math.min(left, piece.length)));
    hash.update('\n');
    const manifestEntry = entries.find((e) => e.path === 'manifest.json') as Entry;
    const manifest = JSON.parse(manifestEntry.bytes.toString()) as {
      counts: Record<string, number>;
      parts: Array<Record<string, unknown>>;
    };
    manifest.parts.push({
      path,
      kind: 'table',
      table: 'sign_in_failures',
      rows: 1,
      bytes: size,
      sha256: hash.digest('hex'),
    });
    manifest.counts.sign_in_failures = 1;
    const file = join(dir, 'long-line.tar.gz');
    await pipeline(
      (async function* () {
        for (const e of entries.filter((x) => x.path !== 'manifest.json')) {
          yield tarHeader(e.path, e.bytes.length);
          yield e.bytes;
          yield Buffer.alloc((512 - (e.bytes.length % 512)) % 512);
        }
        yield tarHeader(path, size);
        for (let left = size - 1; left > 0; left -= piece.length)
          yield piece.subarray(0, Math.min(left, piece.length));
        yield Buffer.from('\n');
        yield Buffer.alloc((512 - (size % 512)) % 512);
        const text = Buffer.from(JSON.stringify(manifest));
        yield tarHeader('manifest.json', text.length);
        yield text;
        yield Buffer.alloc((512 - (text.length % 512)) % 512);
        yield Buffer.alloc(1024);
      })(),
      createGzip({ level: 1 }),
      createWriteStream(file),
    );
    await refused(
      file,
      new RegExp(`^${path.replaceAll('/', '\\/')} line 1 is longer than ${LINE_MAX} bytes`),
    );
  },
  HEAVY,
);
