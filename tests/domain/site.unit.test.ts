import { describe, it } from 'vitest';
import {
  decideSite,
  evolveSite,
  initialSiteState,
  type SiteCommand,
  type SiteState,
} from '../../domain/site/decider.ts';
import type { SiteEvent } from '../../domain/site/events.ts';
import { specFor } from '../support/decider.ts';
import { metadata, siteAdded } from '../support/events.ts';

const spec = specFor<SiteState, SiteEvent, SiteCommand>({
  initialState: initialSiteState,
  evolve: evolveSite,
  decide: decideSite,
});
const added = siteAdded();
const add: SiteCommand = { type: 'AddSite', data: added.data, metadata };

describe('site decider', () => {
  it('adds a site once: a second add of the same id is a conflict', () => {
    spec.given([]).when(add).thenEvents([added]);
    spec.given([added]).when(add).thenThrows('conflict');
  });

  it('puts into the event what the command gives, and nothing else', () => {
    const more = { ...add, data: { ...add.data, extra: 'ignored' } } as SiteCommand;
    spec.given([]).when(more).thenEvents([added]);
  });
});
