import { startTestServices } from './services.ts';

/**
 * The global setup of the tests run alone (vitest.config.ts): the run's PostgreSQL and Redis
 * (tests/support/services.ts). In a run of the whole suite, the suite's setup has chosen them
 * already, and this starts nothing.
 */
export default function setup(): Promise<() => Promise<void>> {
  return startTestServices();
}
