import { crashWrites } from './crash-writes.ts';
import { projectorCrash } from './projector-crash.ts';
import type { Scenario } from './scenario.ts';

/** Every scenario, in the order `npm run reliability` runs them. */
export const scenarios: Scenario[] = [crashWrites, projectorCrash];
