import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { z } from 'zod';
import {
  ALT_MAX,
  ArticleStatus,
  FeaturedImage,
  KEYWORD_MAX,
  REASON_MAX,
  TITLE_MAX,
} from '../../domain/article/events.ts';
import { ANCHOR_TEXT_MAX, AnchorType, BacklinkCategory } from '../../domain/backlink/events.ts';
import { isDomainError } from '../../domain/errors.ts';
import type { Actor } from '../../domain/event.ts';
import { DOMAIN_NAME_MAX, ID_MAX_LENGTH, ID_PATTERN, ID_RULE, NAME_MAX, WebUrl } from '../../domain/input.ts';
import { EventValidationError } from '../../infra/event-store.ts';
import type { Commands } from '../application/commands/index.ts';
import { progressBar } from './progress.ts';

export const ingestKinds = ['sites', 'articles', 'backlinks', 'rewrites'] as const;
export type IngestKind = (typeof ingestKinds)[number];

const id = z.string().min(1).max(ID_MAX_LENGTH).regex(ID_PATTERN, ID_RULE);
const datetime = z.iso.datetime({ offset: true });
const featuredImage = z
  .object({
    url: WebUrl,
    alt: z.string().max(ALT_MAX).default(''),
    width: z.number().int().positive().nullable().default(null),
    height: z.number().int().positive().nullable().default(null),
  })
  .pipe(FeaturedImage);

/** One JSON object per line; `account_id` may be left out when `--account` is given. */
const IngestLines = {
  sites: z.strictObject({
    id: id.optional(),
    account_id: id,
    name: z.string().min(1).max(NAME_MAX),
    domain: z.string().min(1).max(DOMAIN_NAME_MAX),
    url: WebUrl,
  }),
  articles: z.strictObject({
    id: id.optional(),
    account_id: id,
    site_id: id,
    title: z.string().min(1).max(TITLE_MAX),
    body: z.string(),
    url: WebUrl,
    status: ArticleStatus,
    published_at: datetime.nullable().default(null),
    target_keyword: z.string().max(KEYWORD_MAX).nullable().default(null),
    featured_image: featuredImage.nullable().default(null),
    reason: z.string().max(REASON_MAX).nullable().optional(),
  }),
  backlinks: z.strictObject({
    id: id.optional(),
    account_id: id,
    site_id: id,
    acquired_on: z.iso.date(),
    source_domain: z.string().min(1).max(DOMAIN_NAME_MAX),
    source_url: WebUrl,
    target_url: WebUrl,
    anchor_text: z.string().max(ANCHOR_TEXT_MAX),
    anchor_type: AnchorType,
    category: BacklinkCategory,
  }),
  /** A change the service's own pipeline made to an existing article: a revision with origin `rewrite`. */
  rewrites: z
    .strictObject({
      account_id: id,
      article_id: id,
      title: z.string().min(1).max(TITLE_MAX).optional(),
      body: z.string().optional(),
      status: ArticleStatus.optional(),
      published_at: datetime.nullable().optional(),
      reason: z.string().max(REASON_MAX).nullable().optional(),
    })
    .refine((r) => r.title !== undefined || r.body !== undefined || r.status !== undefined, {
      message: 'a rewrite needs title, body or status',
    }),
} as const;

type IngestReport = {
  kind: IngestKind;
  applied: number;
  unchanged: number;
  failed: { line: number; error: string }[];
};

const pipeline: Actor = { type: 'system', id: 'ingest', name: 'Content pipeline' };

async function applyLine(commands: Commands, kind: IngestKind, value: unknown): Promise<boolean> {
  const caller = { origin: 'rewrite' as const, actor: pipeline };
  switch (kind) {
    case 'sites': {
      const l = IngestLines.sites.parse(value);
      await commands.addSite(l.account_id, {
        ...(l.id ? { siteId: l.id } : {}),
        name: l.name,
        domain: l.domain,
        url: l.url,
      });
      return true;
    }
    case 'articles': {
      const l = IngestLines.articles.parse(value);
      await commands.createArticle(
        l.account_id,
        {
          ...(l.id ? { articleId: l.id } : {}),
          siteId: l.site_id,
          title: l.title,
          body: l.body,
          url: l.url,
          status: l.status,
          publishedAt: l.published_at,
          targetKeyword: l.target_keyword,
          featuredImage: l.featured_image,
          reason: l.reason ?? null,
        },
        caller,
      );
      return true;
    }
    case 'backlinks': {
      const l = IngestLines.backlinks.parse(value);
      await commands.acquireBacklink(l.account_id, {
        ...(l.id ? { backlinkId: l.id } : {}),
        siteId: l.site_id,
        acquiredOn: l.acquired_on,
        sourceDomain: l.source_domain,
        sourceUrl: l.source_url,
        targetUrl: l.target_url,
        anchorText: l.anchor_text,
        anchorType: l.anchor_type,
        category: l.category,
      });
      return true;
    }
    case 'rewrites': {
      const l = IngestLines.rewrites.parse(value);
      let changed = false;
      if (l.title !== undefined || l.body !== undefined) {
        const r = await commands.editArticle(
          l.account_id,
          l.article_id,
          { title: l.title, body: l.body, reason: l.reason ?? null },
          caller,
        );
        changed ||= r.changed;
      }
      if (l.status !== undefined) {
        const r = await commands.changeArticleStatus(
          l.account_id,
          l.article_id,
          { status: l.status, publishedAt: l.published_at, reason: l.reason ?? null },
          caller,
        );
        changed ||= r.changed;
      }
      return changed;
    }
    default: {
      const unknown: never = kind;
      throw new Error(`unknown ingest kind ${String(unknown)}`);
    }
  }
}

function describeError(error: unknown): string {
  if (error instanceof z.ZodError) {
    return error.issues.map((i) => `${i.path.length ? i.path.join('.') : 'line'}: ${i.message}`).join('; ');
  }
  if (isDomainError(error)) return `${error.code}: ${error.message}`;
  if (error instanceof SyntaxError) return `not valid JSON: ${error.message}`;
  if (error instanceof EventValidationError) return `invalid_request: ${error.message}`;
  throw error;
}

async function countLines(file: string): Promise<number> {
  let lines = 0;
  for await (const chunk of createReadStream(file)) {
    for (const byte of chunk as Buffer) if (byte === 10) lines++;
  }
  return lines + 1;
}

/**
 * Feeds a JSONL file through the command handlers, one line at a time. A bad line is reported with its
 * number and applies nothing of itself (each line is one command, one atomic append); the others go on.
 */
export async function ingestFile(
  commands: Commands,
  kind: IngestKind,
  file: string,
  opts: { account?: string | undefined; quiet?: boolean } = {},
): Promise<IngestReport> {
  // Standard input (`--file -`) or a pipe can be read once only: their lines are counted as they come.
  const stdin = file === '-';
  const regular = !stdin && (await stat(file)).isFile();
  const total = opts.quiet || !regular ? 0 : await countLines(file);
  const bar = opts.quiet ? null : progressBar(`ingest ${kind}`, total);
  const report: IngestReport = { kind, applied: 0, unchanged: 0, failed: [] };
  const reader = createInterface({
    input: stdin ? process.stdin.setEncoding('utf8') : createReadStream(file, 'utf8'),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  let lineNumber = 0;
  for await (const raw of reader) {
    lineNumber++;
    bar?.update(lineNumber, regular ? undefined : lineNumber);
    const line = raw.trim();
    if (line === '') continue;
    try {
      const parsed: unknown = JSON.parse(line);
      const value =
        opts.account &&
        parsed &&
        typeof parsed === 'object' &&
        !Array.isArray(parsed) &&
        !('account_id' in parsed)
          ? { ...parsed, account_id: opts.account }
          : parsed;
      if (await applyLine(commands, kind, value)) report.applied++;
      else report.unchanged++;
    } catch (error) {
      report.failed.push({ line: lineNumber, error: describeError(error) });
    }
  }
  bar?.update(lineNumber, lineNumber);
  bar?.stop();
  return report;
}
