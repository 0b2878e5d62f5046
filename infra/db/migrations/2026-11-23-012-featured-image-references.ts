import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are written against an untyped Kysely by design
type AnyDb = Kysely<any>;

/**
 * Which stored images the article history refers to, for the media collector
 * (infra/jobs/housekeeping.ts): the `<sha256>.<ext>` key at the end of a featured image URL
 * (`.../media/<key>`), indexed for the events that carry a featured image. Partial, on the event type:
 * the hot edits (ArticleEdited) neither pay for it nor have their bodies read for it. The expression
 * must stay exactly the one the collector queries with.
 */
export async function up(db: AnyDb): Promise<void> {
  await sql`
    create index events_featured_image_key on events (
      (substring(data -> 'featuredImage' ->> 'url' from '/media/([0-9a-f]{64}\\.[a-z]+)$'))
    )
    where type in ('ArticleCreated', 'FeaturedImageReplaced', 'ArticleRestored')`.execute(db);
}

export async function down(db: AnyDb): Promise<void> {
  await db.schema.dropIndex('events_featured_image_key').ifExists().execute();
}
