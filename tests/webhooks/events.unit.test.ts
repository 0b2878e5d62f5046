import { describe, expect, it } from 'vitest';
import { deliverJobId } from '../../apps/application/webhook-delivery.ts';
import {
  articleMessageData,
  backlinkMessageData,
  messageOf,
  reportMessageData,
  sourceTypesOf,
  WEBHOOK_SOURCE_TYPES,
  type WebhookSource,
  webhookTypeOf,
} from '../../apps/application/webhook-events.ts';
import { decideAttempt } from '../../apps/application/webhook-recording.ts';
import { messageBody } from '../../apps/application/webhook-sending.ts';
import type { ArticleEvent } from '../../domain/article/events.ts';
import type { Actor } from '../../domain/event.ts';
import { WEBHOOK_EVENT_TYPES } from '../../domain/vocabulary.ts';

const at = '2026-11-02T09:30:00.123Z';
const actor: Actor = { type: 'api_key', id: 'key_1', name: 'Publishing key' };
const who = { origin: 'api' as const, actor, reason: null };

const created: ArticleEvent = {
  type: 'ArticleCreated',
  data: {
    ...who,
    articleId: 'art_1',
    revision: 1,
    siteId: 'site_1',
    accountId: 'acc_1',
    title: 'Fixing a leaking tap',
    body: '<p>Turn off the water first.</p>',
    url: 'https://northside.example/leaking-tap',
    status: 'draft',
    publishedAt: null,
    targetKeyword: 'leaking tap',
    featuredImage: null,
  },
  metadata: { at },
};
const statusTo = (status: 'draft' | 'scheduled' | 'published' | 'archived'): ArticleEvent => ({
  type: 'ArticleStatusChanged',
  data: { ...who, articleId: 'art_1', revision: 2, status, publishedAt: null },
  metadata: { at },
});
const image = { url: 'https://cdn.example/tap.jpg', alt: 'A tap', width: 800, height: 600 };
const backlink: WebhookSource = {
  type: 'BacklinkAcquired',
  data: {
    backlinkId: 'bl_1',
    siteId: 'site_1',
    accountId: 'acc_1',
    acquiredOn: '2026-11-01',
    sourceDomain: 'citylocalnews.example',
    sourceUrl: 'https://citylocalnews.example/business',
    targetUrl: 'https://northside.example/',
    anchorText: 'Northside Plumbing',
    anchorType: 'branded',
    category: 'local',
  },
  metadata: { at },
};
const report: WebhookSource = {
  type: 'MonthlyReportReady',
  data: {
    siteId: 'site_1',
    accountId: 'acc_1',
    period: '2026-10',
    from: '2026-10-01',
    to: '2026-10-31',
    articlesPublished: 12,
    backlinksIndustry: 18,
    backlinksLocal: 12,
  },
  metadata: { at },
};

describe('which event makes which message', () => {
  it('maps every source event to its type', () => {
    const cases: [WebhookSource, string][] = [
      [created, 'article.created'],
      [
        {
          type: 'ArticleEdited',
          data: { ...who, articleId: 'art_1', revision: 2, title: 'T', sanitized: [] },
          metadata: { at },
        },
        'article.updated',
      ],
      [
        {
          type: 'ArticleRestored',
          data: {
            ...who,
            articleId: 'art_1',
            revision: 3,
            restoredFrom: 1,
            title: 'T',
            body: '',
            featuredImage: null,
          },
          metadata: { at },
        },
        'article.updated',
      ],
      [statusTo('published'), 'article.published'],
      [statusTo('archived'), 'article.updated'],
      [statusTo('scheduled'), 'article.updated'],
      [statusTo('draft'), 'article.updated'],
      [
        {
          type: 'FeaturedImageReplaced',
          data: { ...who, articleId: 'art_1', revision: 2, featuredImage: image },
          metadata: { at },
        },
        'article.featured_image_replaced',
      ],
      [backlink, 'backlink.acquired'],
      [report, 'report.ready'],
    ];
    for (const [event, type] of cases) expect(webhookTypeOf(event), event.type).toBe(type);
  });

  it('every message type is made by some event, and a replay reads only the events of the types asked for', () => {
    for (const type of WEBHOOK_EVENT_TYPES) expect(sourceTypesOf([type]).length, type).toBeGreaterThan(0);
    expect(sourceTypesOf(['article.published'])).toEqual(['ArticleStatusChanged']);
    expect(sourceTypesOf(['article.updated'])).toEqual([
      'ArticleEdited',
      'ArticleRestored',
      'ArticleStatusChanged',
    ]);
    expect(sourceTypesOf(['backlink.acquired', 'report.ready'])).toEqual([
      'BacklinkAcquired',
      'MonthlyReportReady',
    ]);
    expect(sourceTypesOf([...WEBHOOK_EVENT_TYPES])).toEqual([...WEBHOOK_SOURCE_TYPES]);
    expect(sourceTypesOf(['no.such.type'])).toEqual([]);
  });
});

describe('the message body', () => {
  const stored = { ...created, eventId: '0196f1c2-8a4b-7c3d-9e5f-0123456789ab' };

  it('is {id, type, created_at, data}: the event id, its type, its time in RFC 3339 (seconds, UTC)', () => {
    const message = messageOf(stored, { hello: 'world' } as never);
    expect(message).toEqual({
      id: '0196f1c2-8a4b-7c3d-9e5f-0123456789ab',
      type: 'article.created',
      created_at: '2026-11-02T09:30:00Z',
      data: { hello: 'world' },
    });
  });

  it("an article's data: the list item with the revision's origin and actor", () => {
    const item = {
      id: 'art_1',
      site_id: 'site_1',
      title: 'Fixing a leaking tap',
      url: 'https://northside.example/leaking-tap',
      status: 'draft' as const,
      published_at: null,
      target_keyword: 'leaking tap',
      word_count: 5,
      featured_image: null,
      revision: 1,
      updated_at: '2026-11-02T09:30:00Z',
    };
    expect(articleMessageData(item, created)).toEqual({ ...item, origin: 'api', actor });
  });

  it("a backlink's data: the backlink as the API shows it (no account)", () => {
    expect(
      backlinkMessageData(backlink.type === 'BacklinkAcquired' ? backlink.data : (undefined as never)),
    ).toEqual({
      id: 'bl_1',
      site_id: 'site_1',
      acquired_on: '2026-11-01',
      source_domain: 'citylocalnews.example',
      source_url: 'https://citylocalnews.example/business',
      target_url: 'https://northside.example/',
      anchor_text: 'Northside Plumbing',
      anchor_type: 'branded',
      category: 'local',
    });
  });

  it("a report's data: the month's stats and the report page under the public URL", () => {
    const data = report.type === 'MonthlyReportReady' ? report.data : (undefined as never);
    expect(reportMessageData(data, 'https://content.example/')).toEqual({
      site_id: 'site_1',
      period: { key: '2026-10', from: '2026-10-01', to: '2026-10-31' },
      articles: { published: 12 },
      backlinks: { total: 30, industry: 18, local: 12 },
      report_url: 'https://content.example/sites/site_1/report?period=2026-10',
    });
  });

  it('is sent with its fields in the documented order, whatever order the database kept them in', () => {
    const fromJsonb = { data: { b: 1 }, id: 'e1', type: 'report.ready', created_at: '2026-11-02T09:30:00Z' };
    expect(messageBody(fromJsonb)).toBe(
      '{"id":"e1","type":"report.ready","created_at":"2026-11-02T09:30:00Z","data":{"b":1}}',
    );
    // jsonb keeps keys shortest first: an article's data comes back as the API orders it.
    const article = {
      id: 'e2',
      type: 'article.updated',
      created_at: '2026-11-02T09:30:00Z',
      data: {
        id: 'art_1',
        url: 'https://northside.example/x',
        actor: { id: 'key_1', name: 'Key', type: 'api_key' },
        title: 'T',
        origin: 'api',
        status: 'draft',
        site_id: 'site_1',
        revision: 2,
        updated_at: '2026-11-02T09:30:00Z',
        word_count: 3,
        published_at: null,
        featured_image: { alt: 'A', url: 'https://cdn.example/a.jpg', width: 1, height: 1 },
        target_keyword: null,
      },
    };
    const sent = JSON.parse(messageBody(article));
    expect(Object.keys(sent.data)).toEqual([
      'id',
      'site_id',
      'title',
      'url',
      'status',
      'published_at',
      'target_keyword',
      'word_count',
      'featured_image',
      'revision',
      'updated_at',
      'origin',
      'actor',
    ]);
    expect(Object.keys(sent.data.featured_image)).toEqual(['url', 'alt', 'width', 'height']);
    expect(Object.keys(sent.data.actor)).toEqual(['type', 'id', 'name']);
    expect(sent).toEqual(article);
    const report = JSON.parse(
      messageBody({
        id: 'e3',
        type: 'report.ready',
        created_at: '2026-11-02T09:30:00Z',
        data: {
          period: { to: '2026-10-31', key: '2026-10', from: '2026-10-01' },
          site_id: 's',
          articles: { published: 1 },
          backlinks: { local: 1, total: 2, industry: 1 },
          report_url: 'https://content.example/sites/s/report?period=2026-10',
        },
      }),
    );
    expect(Object.keys(report.data)).toEqual(['site_id', 'period', 'articles', 'backlinks', 'report_url']);
    expect(Object.keys(report.data.period)).toEqual(['key', 'from', 'to']);
    expect(Object.keys(report.data.backlinks)).toEqual(['total', 'industry', 'local']);
  });
});

describe('what an attempt decides', () => {
  const now = new Date('2026-11-02T09:30:00Z');
  const decide = (over: Partial<Parameters<typeof decideAttempt>[0]>) =>
    decideAttempt({
      statusCode: 500,
      attemptsBefore: 0,
      retrySchedule: [5, 300, 1800],
      failingSince: null,
      now,
      random: () => 0,
      ...over,
    });

  it('a 2xx succeeds and clears the failing state', () => {
    for (const statusCode of [200, 201, 204, 299]) {
      expect(decide({ statusCode, failingSince: new Date(0) })).toEqual({
        delivery: { status: 'succeeded', nextAttemptAt: null, deliveredAt: now },
        endpoint: { ok: true, disable: null },
      });
    }
  });

  it('anything else is a failure retried after the schedule delay of that retry', () => {
    for (const statusCode of [null, 199, 301, 400, 404, 429, 500]) {
      expect(decide({ statusCode }).delivery.status, String(statusCode)).toBe('pending');
    }
    expect(decide({ attemptsBefore: 0 }).delivery.nextAttemptAt).toEqual(new Date(now.getTime() + 5_000));
    expect(decide({ attemptsBefore: 1 }).delivery.nextAttemptAt).toEqual(new Date(now.getTime() + 300_000));
    expect(decide({ attemptsBefore: 2 }).delivery.nextAttemptAt).toEqual(new Date(now.getTime() + 1_800_000));
  });

  it('takes off up to 10 % of the delay at random', () => {
    const late = decide({ attemptsBefore: 1, random: () => 0 }).delivery.nextAttemptAt?.getTime() ?? 0;
    const early =
      decide({ attemptsBefore: 1, random: () => 0.999999 }).delivery.nextAttemptAt?.getTime() ?? 0;
    expect(late - now.getTime()).toBe(300_000);
    expect(early - now.getTime()).toBeGreaterThanOrEqual(270_000);
    expect(early - now.getTime()).toBeLessThan(270_001);
  });

  it('fails for good once the schedule is used up (attempts = schedule + 1)', () => {
    expect(decide({ attemptsBefore: 3 }).delivery).toEqual({
      status: 'failed',
      nextAttemptAt: null,
      deliveredAt: null,
    });
    expect(decide({ attemptsBefore: 0, retrySchedule: [] }).delivery.status).toBe('failed');
  });

  it('a 410 disables the endpoint at once', () => {
    expect(decide({ statusCode: 410 }).endpoint).toEqual({ ok: false, disable: 'gone' });
  });

  it('a failure 3 days after the failures began disables the endpoint; earlier ones do not', () => {
    const since = (ms: number): Date => new Date(now.getTime() - ms);
    expect(decide({ failingSince: since(3 * 86_400_000) }).endpoint.disable).toBe('failing');
    expect(decide({ failingSince: since(3 * 86_400_000 - 1) }).endpoint.disable).toBeNull();
    expect(decide({ failingSince: null }).endpoint.disable).toBeNull();
  });
});

describe('deliver job ids', () => {
  it('are one per delivery, attempt and version of the endpoint, as both queues accept them', () => {
    const v1 = new Date('2026-11-02T09:30:00.000Z');
    const v2 = new Date('2026-11-02T09:31:00.000Z');
    expect(deliverJobId('wh_1', 'dlv_2', 3, v1)).toBe(`webhook.wh_1.dlv_2.3.${v1.getTime()}`);
    expect(deliverJobId('wh_1', 'dlv_2', 3, v1)).not.toBe(deliverJobId('wh_1', 'dlv_2', 4, v1));
    // Enabled again (the endpoint changed): a new job, whatever the queue remembers of the old one.
    expect(deliverJobId('wh_1', 'dlv_2', 3, v1)).not.toBe(deliverJobId('wh_1', 'dlv_2', 3, v2));
  });
});
