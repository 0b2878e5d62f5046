import { z } from 'zod';
import { type Event, eventSchema } from '../event.ts';
import { DOMAIN_NAME_MAX, WebUrl } from '../input.ts';

export const BacklinkCategory = z.enum(['industry', 'local']);
export type BacklinkCategory = z.infer<typeof BacklinkCategory>;
export const AnchorType = z.enum(['exact', 'partial', 'branded', 'naked_url', 'generic', 'image']);
export type AnchorType = z.infer<typeof AnchorType>;

/** Length, in characters, of a backlink's anchor text. */
export const ANCHOR_TEXT_MAX = 1000;

export const BacklinkAcquiredData = z.object({
  backlinkId: z.string().min(1),
  siteId: z.string().min(1),
  accountId: z.string().min(1),
  acquiredOn: z.iso.date(),
  sourceDomain: z.string().min(1).max(DOMAIN_NAME_MAX),
  sourceUrl: WebUrl,
  targetUrl: WebUrl,
  anchorText: z.string().max(ANCHOR_TEXT_MAX),
  anchorType: AnchorType,
  category: BacklinkCategory,
});

export const BacklinkEventSchemas = {
  BacklinkAcquired: eventSchema('BacklinkAcquired', BacklinkAcquiredData),
} as const;
export type BacklinkAcquired = Event<'BacklinkAcquired', z.infer<typeof BacklinkAcquiredData>>;
export type BacklinkEvent = BacklinkAcquired;

/** One stream per backlink: acquiring the same id twice is a conflict, which makes ingestion idempotent. */
export const backlinkStream = (backlinkId: string): string => `backlink-${backlinkId}`;
