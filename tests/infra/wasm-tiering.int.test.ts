import { describe, expect, it } from 'vitest';
import { NODE, run } from '../support/process.ts';

/*
 * The embedded engine's WebAssembly is optimised later than V8's own budget would have it
 * (infra/wasm-tiering.js, set by every entry point's `useCompileCache()`). The same fixed work on a
 * new engine (tests/fixtures/wasm-tiering-child.ts), once as the service's processes open it and once as
 * PGlite comes, each in a process of its own with V8's tier-up made synchronous, so that which functions
 * reach the optimising compiler depends on the work alone and not on the machine's timing.
 */

/** Per WebAssembly module of a child's trace: functions compiled by the baseline compiler and by the optimising one. */
function compiledOf(trace: string): Map<string, { liftoff: number; turbofan: number }> {
  const modules = new Map<string, { liftoff: number; turbofan: number }>();
  for (const [, module, tier] of trace.matchAll(/^Compiled function (0x[0-9a-f]+)#\d+ using (\w+)/gm)) {
    const counts = modules.get(module ?? '') ?? { liftoff: 0, turbofan: 0 };
    if (tier === 'TurboFan') counts.turbofan++;
    else counts.liftoff++;
    modules.set(module ?? '', counts);
  }
  return modules;
}

/** The optimised functions of PGlite's module: the one with the most functions compiled. */
async function optimisedEngineFunctions(mode: 'service' | 'plain'): Promise<number> {
  const child = await run(NODE, [
    '--wasm-sync-tier-up',
    '--trace-wasm-compilation-times',
    'tests/fixtures/wasm-tiering-child.ts',
    mode,
  ]);
  expect(child.code, child.stderr).toBe(0);
  const [engine] = [...compiledOf(child.stdout).values()].sort((a, b) => b.liftoff - a.liftoff);
  expect(engine?.liftoff).toBeGreaterThan(1_000);
  return engine?.turbofan ?? 0;
}

describe('the embedded engine and V8 tiering', () => {
  it("optimises a fraction of the functions that V8's own budget would for the same work", async () => {
    const [service, plain] = await Promise.all([
      optimisedEngineFunctions('service'),
      optimisedEngineFunctions('plain'),
    ]);
    // V8's budget optimises some 300 of PGlite's functions for this work; the service's, some 60.
    expect(plain).toBeGreaterThan(100);
    expect(service).toBeLessThan(plain / 3);
  }, 120_000);
});
