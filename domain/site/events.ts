import { z } from 'zod';
import { type Event, eventSchema } from '../event.ts';
import { DOMAIN_NAME_MAX, NAME_MAX, WebUrl } from '../input.ts';

export const SiteAddedData = z.object({
  siteId: z.string().min(1),
  accountId: z.string().min(1),
  name: z.string().min(1).max(NAME_MAX),
  domain: z.string().min(1).max(DOMAIN_NAME_MAX),
  url: WebUrl,
});

export const SiteEventSchemas = { SiteAdded: eventSchema('SiteAdded', SiteAddedData) } as const;
export type SiteAdded = Event<'SiteAdded', z.infer<typeof SiteAddedData>>;
export type SiteEvent = SiteAdded;

export const siteStream = (siteId: string): string => `site-${siteId}`;
