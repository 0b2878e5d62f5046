import { accountStream } from '../../../domain/account/events.ts';
import { DomainError } from '../../../domain/errors.ts';
import { decideSite, evolveSite, initialSiteState } from '../../../domain/site/decider.ts';
import { siteStream } from '../../../domain/site/events.ts';
import type { EventStore } from '../../../infra/event-store.ts';
import { newId } from '../../../infra/ids.ts';
import type { CommandContext } from './handler.ts';

/* Sites: adding one to an existing account; `requireSite` for the commands of a site's content. */

const siteFold = { initial: initialSiteState, evolve: evolveSite };

export function siteCommands({ run, meta, store }: CommandContext) {
  return {
    async addSite(
      accountId: string,
      input: { siteId?: string; name: string; domain: string; url: string },
    ): Promise<{ siteId: string }> {
      const account = await store.readStream(accountStream(accountId), { to: 1 });
      if (account.length === 0) throw new DomainError('not_found', `No account ${accountId}`);
      const siteId = input.siteId ?? newId('site');
      const { name, domain, url } = input;
      await run(siteStream(siteId), siteFold, (state) =>
        decideSite(
          { type: 'AddSite', data: { siteId, accountId, name, domain, url }, metadata: meta() },
          state,
        ),
      );
      return { siteId };
    },
  };
}

/** Refuses, as `not_found`, a site that does not exist or is another account's. */
export async function requireSite(store: EventStore, accountId: string, siteId: string): Promise<void> {
  const site = await store.readStream(siteStream(siteId), { to: 1 });
  const added = site[0]?.data as { accountId?: string } | undefined;
  if (!added || added.accountId !== accountId) throw new DomainError('not_found', `No site ${siteId}`);
}
