import { describe, it } from 'vitest';
import {
  type BacklinkCommand,
  type BacklinkState,
  decideBacklink,
  evolveBacklink,
  initialBacklinkState,
} from '../../domain/backlink/decider.ts';
import type { BacklinkEvent } from '../../domain/backlink/events.ts';
import { specFor } from '../support/decider.ts';
import { backlinkAcquired, metadata } from '../support/events.ts';

const spec = specFor<BacklinkState, BacklinkEvent, BacklinkCommand>({
  initialState: initialBacklinkState,
  evolve: evolveBacklink,
  decide: decideBacklink,
});
const acquired = backlinkAcquired();
const acquire: BacklinkCommand = { type: 'AcquireBacklink', data: acquired.data, metadata };

describe('backlink decider', () => {
  it('acquires a backlink once: the same id again is a conflict (ingestion is idempotent)', () => {
    spec.given([]).when(acquire).thenEvents([acquired]);
    spec.given([acquired]).when(acquire).thenThrows('conflict');
  });

  it('keeps an empty anchor text (an image link has none)', () => {
    const image = backlinkAcquired({ anchorText: '', anchorType: 'image' });
    spec
      .given([])
      .when({ ...acquire, data: image.data })
      .thenEvents([image]);
  });
});
