import { decideBacklink, evolveBacklink, initialBacklinkState } from '../../../domain/backlink/decider.ts';
import { type BacklinkAcquired, backlinkStream } from '../../../domain/backlink/events.ts';
import { newId } from '../../../infra/ids.ts';
import type { CommandContext } from './handler.ts';
import { requireSite } from './sites.ts';

/* Backlinks: one acquired for a site of the account, in its own stream. */

const backlinkFold = { initial: initialBacklinkState, evolve: evolveBacklink };

export function backlinkCommands({ run, meta, store }: CommandContext) {
  return {
    async acquireBacklink(
      accountId: string,
      input: Omit<BacklinkAcquired['data'], 'accountId' | 'backlinkId'> & { backlinkId?: string },
    ): Promise<{ backlinkId: string }> {
      await requireSite(store, accountId, input.siteId);
      const backlinkId = input.backlinkId ?? newId('bl');
      await run(backlinkStream(backlinkId), backlinkFold, (state) =>
        decideBacklink(
          { type: 'AcquireBacklink', data: { ...input, backlinkId, accountId }, metadata: meta() },
          state,
        ),
      );
      return { backlinkId };
    },
  };
}
