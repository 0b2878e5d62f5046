import { canary } from './canary.ts';
import { crashWrites } from './crash-writes.ts';
import { diskFull } from './disk-full.ts';
import { noisyTenant } from './noisy-tenant.ts';
import { postgresRestart } from './postgres-restart.ts';
import { projectorCrash } from './projector-crash.ts';
import { redisOutage } from './redis-outage.ts';
import type { Scenario } from './scenario.ts';
import { slowNeighbours } from './slow-neighbours.ts';
import { soak } from './soak.ts';

/** Every scenario, in the order `npm run reliability` runs them (the numbering). */
export const scenarios: Scenario[] = [
  crashWrites,
  projectorCrash,
  postgresRestart,
  redisOutage,
  slowNeighbours,
  noisyTenant,
  soak,
  diskFull,
  canary,
];
