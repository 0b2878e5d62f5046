import { diskFull } from './disk-full.ts';
import { noisyTenant } from './noisy-tenant.ts';
import type { Scenario } from './scenario.ts';

/** Every scenario, in the order `npm run reliability` runs them. */
export const scenarios: Scenario[] = [noisyTenant, diskFull];
