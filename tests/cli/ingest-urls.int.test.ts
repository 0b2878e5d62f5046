import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ingestFile } from '../../apps/cli/ingest.ts';
import type { Runtime } from '../../apps/runtime.ts';
import { EventValidationError } from '../../infra/event-store.ts';
import { createTestRuntime, setUpAccount } from '../support/runtime.ts';

/*
 * Every web address that ingestion takes (a site's, an article's, a featured image's, a backlink's
 * source and target) is an absolute http(s) URL: anything else is refused with its line number and
 * applies nothing, the other lines going on.
 */

/** Addresses a browser would run, read otherwise than they look, or take as another site's. */
const REFUSED = [
  'javascript:alert(1)',
  'data:text/html,<script>alert(1)</script>',
  'vbscript:msgbox(1)',
  ' JaVaScRiPt:alert(1)',
  'java\tscript:alert(1)',
  '\u0001javascript:alert(1)',
  'jav\nascript:alert(1)',
  ' https://ok.example/',
  'https://ok.example/\u0000',
  '//evil.example/',
  'https:evil.example',
  'ftp://files.example/',
  '/relative/path',
];
const ACCEPTED = ['http://plain.example/', 'https://secure.example/a?b=c#d', 'HTTPS://UPPER.EXAMPLE/'];

describe('ingestion takes http(s) addresses only', () => {
  let runtime: Runtime;
  let drop: () => Promise<void>;
  let dir: string;
  let accountId: string;
  let siteId: string;

  beforeAll(async () => {
    ({ runtime, drop } = await createTestRuntime('postgres'));
    ({ accountId, siteId } = await setUpAccount(runtime));
    dir = await mkdtemp(join(tmpdir(), 'cs-ingest-urls-'));
  });
  afterAll(async () => {
    await drop?.();
    await rm(dir, { recursive: true, force: true });
  });

  /** Ingests one line per value (made by `line`), the refused ones first. */
  async function ingest(kind: 'sites' | 'articles' | 'backlinks', line: (url: string, n: number) => object) {
    const file = join(dir, `${kind}-${Math.random().toString(36).slice(2)}.jsonl`);
    const values = [...REFUSED, ...ACCEPTED];
    await writeFile(file, values.map((url, n) => JSON.stringify(line(url, n))).join('\n'));
    return ingestFile(runtime.commands, kind, file, { account: accountId, quiet: true });
  }

  const refusedLines = REFUSED.map((_, n) => n + 1);

  it('sites: url', async () => {
    const report = await ingest('sites', (url, n) => ({
      id: `site_url_${n}`,
      name: `Site ${n}`,
      domain: `site${n}.example`,
      url,
    }));
    expect(report.failed.map((f) => f.line)).toEqual(refusedLines);
    for (const failure of report.failed)
      expect(failure.error).toMatch(/^url: must be an absolute http or https URL/);
    expect(report.applied).toBe(ACCEPTED.length);
    const stored = await runtime.db
      .selectFrom('sites')
      .select('url')
      .where('account_id', '=', accountId)
      .execute();
    expect(stored.map((s) => s.url)).toEqual(expect.arrayContaining(ACCEPTED));
    expect(stored.filter((s) => !/^https?:\/\//i.test(s.url))).toEqual([]);
  });

  it('articles: url and featured_image.url', async () => {
    const article = (n: number) => ({
      id: `art_url_${n}`,
      site_id: siteId,
      title: `Article ${n}`,
      body: '<p>Text.</p>',
      status: 'draft',
    });
    const byUrl = await ingest('articles', (url, n) => ({ ...article(n), url }));
    expect(byUrl.failed.map((f) => f.line)).toEqual(refusedLines);
    for (const failure of byUrl.failed)
      expect(failure.error).toMatch(/^url: must be an absolute http or https URL/);
    expect(byUrl.applied).toBe(ACCEPTED.length);

    const byImage = await ingest('articles', (url, n) => ({
      ...article(100 + n),
      url: 'https://northside.example/a',
      featured_image: { url, alt: 'An image' },
    }));
    expect(byImage.failed.map((f) => f.line)).toEqual(refusedLines);
    for (const failure of byImage.failed)
      expect(failure.error).toMatch(/^featured_image\.url: must be an absolute/);
    expect(byImage.applied).toBe(ACCEPTED.length);
  });

  it('backlinks: source_url and target_url', async () => {
    const backlink = (n: number) => ({
      site_id: siteId,
      acquired_on: '2026-11-03',
      source_domain: 'news.example',
      anchor_text: 'plumbers',
      anchor_type: 'branded',
      category: 'local',
      id: `bl_url_${n}`,
    });
    const bySource = await ingest('backlinks', (url, n) => ({
      ...backlink(n),
      source_url: url,
      target_url: 'https://northside.example/',
    }));
    expect(bySource.failed.map((f) => f.line)).toEqual(refusedLines);
    for (const failure of bySource.failed) expect(failure.error).toMatch(/^source_url: must be an absolute/);
    const byTarget = await ingest('backlinks', (url, n) => ({
      ...backlink(100 + n),
      source_url: 'https://news.example/a',
      target_url: url,
    }));
    expect(byTarget.failed.map((f) => f.line)).toEqual(refusedLines);
    for (const failure of byTarget.failed) expect(failure.error).toMatch(/^target_url: must be an absolute/);
    expect(bySource.applied + byTarget.applied).toBe(2 * ACCEPTED.length);
  });

  it('refuses such an address from any other entry too: the events hold the same rule', async () => {
    for (const url of REFUSED) {
      await expect(
        runtime.commands.addSite(accountId, { name: 'Direct', domain: 'direct.example', url }),
      ).rejects.toBeInstanceOf(EventValidationError);
    }
  });
});
