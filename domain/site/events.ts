import { z } from 'zod';
import { type Event, eventSchema } from '../event.ts';
import { WebUrl } from '../input.ts';

export const SiteAddedData = z.object({
  siteId: z.string().min(1),
  accountId: z.string().min(1),
  name: z.string().min(1).max(200),
  domain: z.string().min(1).max(253),
  url: WebUrl,
});

export const SiteEventSchemas = { SiteAdded: eventSchema('SiteAdded', SiteAddedData) } as const;
export type SiteAdded = Event<'SiteAdded', z.infer<typeof SiteAddedData>>;
export type SiteEvent = SiteAdded;

export const siteStream = (siteId: string): string => `site-${siteId}`;
