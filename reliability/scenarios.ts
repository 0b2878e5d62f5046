import { diskFull } from './disk-full.ts';
import { noisyTenant } from './noisy-tenant.ts';
import { postgresRestart } from './postgres-restart.ts';
import { redisOutage } from './redis-outage.ts';
import type { Scenario } from './scenario.ts';

/** Every scenario, in the order `npm run reliability` runs them. */
export const scenarios: Scenario[] = [postgresRestart, redisOutage, noisyTenant, diskFull];
