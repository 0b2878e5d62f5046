/*
 * The modules the server loads while its database opens (serve.ts), in one place: serve.ts awaits
 * them, and `npm install` has Node compile them ahead into its compile cache (compile-ahead.ts), so
 * that a first start reads them compiled as a restart does.
 */
export function loadStartModules() {
  return Promise.all([
    import('../runtime.ts'),
    import('../../infra/limits.ts'),
    import('../../infra/media/store.ts'),
    import('../../infra/projection-runner.ts'),
    import('../../projections/index.ts'),
    import('../cli/seed-demo.ts'),
    import('../worker/background.ts'),
    import('../worker/modules.ts'),
    import('./app.ts'),
    import('./http/limits.ts'),
    import('./http/drain.ts'),
    import('../readiness.ts'),
  ]);
}
