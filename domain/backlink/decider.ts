import { DomainError } from '../errors.ts';
import type { Command } from '../event.ts';
import type { BacklinkAcquired, BacklinkEvent } from './events.ts';

/** A backlink as its events leave it: which site of which account it points to. */
export type BacklinkState =
  | { readonly exists: false }
  | {
      readonly exists: true;
      readonly backlinkId: string;
      readonly siteId: string;
      readonly accountId: string;
    };

export const initialBacklinkState: BacklinkState = { exists: false };

export function evolveBacklink(_state: BacklinkState, event: BacklinkEvent): BacklinkState {
  switch (event.type) {
    case 'BacklinkAcquired': {
      const { backlinkId, siteId, accountId } = event.data;
      return { exists: true, backlinkId, siteId, accountId };
    }
    default: {
      const unknown: never = event.type;
      throw new Error(`unknown backlink event ${JSON.stringify(unknown)}`);
    }
  }
}

/**
 * Records a backlink of a site (the handler has checked the site is the account's). Acquiring the
 * same id twice is a conflict, which makes ingestion idempotent. Its domain, URLs and anchor text are
 * held to the event's schema when it is appended, as ingestion has always had them.
 */
export type AcquireBacklink = Command<'AcquireBacklink', BacklinkAcquired['data']>;
export type BacklinkCommand = AcquireBacklink;

export function decideBacklink(command: BacklinkCommand, state: BacklinkState): BacklinkEvent[] {
  switch (command.type) {
    case 'AcquireBacklink': {
      const d = command.data;
      if (state.exists) throw new DomainError('conflict', `Backlink ${d.backlinkId} exists already`);
      return [
        {
          type: 'BacklinkAcquired',
          data: {
            backlinkId: d.backlinkId,
            siteId: d.siteId,
            accountId: d.accountId,
            acquiredOn: d.acquiredOn,
            sourceDomain: d.sourceDomain,
            sourceUrl: d.sourceUrl,
            targetUrl: d.targetUrl,
            anchorText: d.anchorText,
            anchorType: d.anchorType,
            category: d.category,
          },
          metadata: command.metadata,
        },
      ];
    }
    default: {
      const unknown: never = command.type;
      throw new Error(`unknown backlink command ${JSON.stringify(unknown)}`);
    }
  }
}
