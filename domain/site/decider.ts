import { DomainError } from '../errors.ts';
import type { Command } from '../event.ts';
import type { SiteAdded, SiteEvent } from './events.ts';

/** A site as its events leave it: whose it is. */
export type SiteState =
  | { readonly exists: false }
  | { readonly exists: true; readonly siteId: string; readonly accountId: string };

export const initialSiteState: SiteState = { exists: false };

export function evolveSite(_state: SiteState, event: SiteEvent): SiteState {
  switch (event.type) {
    case 'SiteAdded':
      return { exists: true, siteId: event.data.siteId, accountId: event.data.accountId };
    default: {
      const unknown: never = event.type;
      throw new Error(`unknown site event ${JSON.stringify(unknown)}`);
    }
  }
}

/**
 * Adds a site to an account (the handler has checked the account). Its name, domain and URL are held
 * to the event's schema when it is appended, as ingestion and the CLI have always had them.
 */
export type AddSite = Command<'AddSite', SiteAdded['data']>;
export type SiteCommand = AddSite;

export function decideSite(command: SiteCommand, state: SiteState): SiteEvent[] {
  switch (command.type) {
    case 'AddSite': {
      const { siteId, accountId, name, domain, url } = command.data;
      if (state.exists) throw new DomainError('conflict', `Site ${siteId} exists already`);
      return [
        { type: 'SiteAdded', data: { siteId, accountId, name, domain, url }, metadata: command.metadata },
      ];
    }
    default: {
      const unknown: never = command.type;
      throw new Error(`unknown site command ${JSON.stringify(unknown)}`);
    }
  }
}
