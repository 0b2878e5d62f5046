import type { ActivitySource } from '../domain/activity/events.ts';
import type { ActorJson } from '../infra/db/read-model-tables.ts';
import type { Db } from '../infra/db/schema.ts';
import { offsetOf, type Page, type PageQuery, type Projector } from './projector.ts';

const operationOf = {
  ArticleCreated: 'create_article',
  ArticleEdited: 'update_article',
  FeaturedImageReplaced: 'replace_featured_image',
  ArticleRestored: 'restore_revision',
  ArticleStatusChanged: 'change_article_status',
} as const;

/**
 * The activity log: every call through a face of the service (`CallRecorded`), and the changes the
 * service's own pipeline makes (article events with origin `rewrite`), which arrive through no call.
 */
export const activityProjector: Projector = {
  name: 'activity@1',
  mode: 'async',
  handles: ['CallRecorded', ...(Object.keys(operationOf) as (keyof typeof operationOf)[])],
  tables: ['activity'],
  async apply(event, trx) {
    if (event.type === 'CallRecorded') {
      const d = event.data;
      await trx
        .insertInto('activity')
        .values({
          id: d.activityId,
          account_id: d.accountId,
          at: event.metadata.at,
          source: d.source,
          actor: JSON.stringify(d.actor),
          operation: d.operation,
          site_id: d.siteId,
          article_id: d.articleId,
          status: d.status,
          request_id: d.requestId,
          duration_ms: d.durationMs,
        })
        .onConflict((oc) => oc.column('id').doNothing())
        .execute();
      return;
    }
    if (!(event.type in operationOf) || !('origin' in event.data) || event.data.origin !== 'rewrite') return;
    const d = event.data;
    // The owner of an article never changes, so reading it from the (inline, current) article rows is
    // as good as reading it at the event's time, and a rebuild comes out the same.
    const article = await trx
      .selectFrom('articles')
      .select(['account_id', 'site_id'])
      .where('id', '=', d.articleId)
      .executeTakeFirst();
    const accountId = event.type === 'ArticleCreated' ? event.data.accountId : article?.account_id;
    const siteId = event.type === 'ArticleCreated' ? event.data.siteId : (article?.site_id ?? null);
    if (!accountId) return;
    await trx
      .insertInto('activity')
      .values({
        id: `act_${event.eventId}`,
        account_id: accountId,
        at: event.metadata.at,
        source: 'rewrite',
        actor: JSON.stringify(d.actor),
        operation: operationOf[event.type as keyof typeof operationOf],
        site_id: siteId,
        article_id: d.articleId,
        status: 200,
        request_id: event.metadata.requestId ?? null,
        duration_ms: 0,
      })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
  },
};

export type ActivityRow = {
  id: string;
  at: Date;
  source: ActivitySource;
  actor: ActorJson;
  operation: string;
  site_id: string | null;
  article_id: string | null;
  status: number;
  request_id: string | null;
  duration_ms: number;
};
export type ActivityQuery = PageQuery & {
  from?: string | undefined;
  to?: string | undefined;
  source?: ActivitySource | undefined;
  siteId?: string | undefined;
  articleId?: string | undefined;
};

/** The account's activity, newest first, ties by id. */
export async function listActivity(db: Db, accountId: string, q: ActivityQuery): Promise<Page<ActivityRow>> {
  let base = db.selectFrom('activity').where('account_id', '=', accountId);
  if (q.source) base = base.where('source', '=', q.source);
  if (q.siteId) base = base.where('site_id', '=', q.siteId);
  if (q.articleId) base = base.where('article_id', '=', q.articleId);
  if (q.from) base = base.where('at', '>=', new Date(`${q.from}T00:00:00Z`));
  if (q.to) base = base.where('at', '<', new Date(new Date(`${q.to}T00:00:00Z`).getTime() + 86_400_000));
  const [rows, count] = await Promise.all([
    base
      .select([
        'id',
        'at',
        'source',
        'actor',
        'operation',
        'site_id',
        'article_id',
        'status',
        'request_id',
        'duration_ms',
      ])
      .orderBy('at', 'desc')
      .orderBy('id', 'desc')
      .limit(q.perPage)
      .offset(offsetOf(q))
      .execute(),
    base.select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows: rows as ActivityRow[], total: Number(count.n) };
}
