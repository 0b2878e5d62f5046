// @ts-check
import { constants, enableCompileCache } from 'node:module';
import { useEmbeddedWasmTiering } from './wasm-tiering.js';

/*
 * Node's compile cache for a process, turned on by its entry point (apps/server/main.js,
 * apps/worker/main.js, apps/cli/main.js) before anything else is loaded: docs/operations.md, "Start".
 * Plain JavaScript, as the entries are: Node runs it as it is, with nothing to type-strip.
 */

/**
 * Turns the cache on (its folder: NODE_COMPILE_CACHE, else the temporary folder's) and names it to
 * the worker threads this process starts (the embedded engine's, the sanitise pool's): each is a Node
 * instance of its own, which uses a cache only when the environment it starts with names one.
 */
export function useCompileCache() {
  // V8's flags first: V8 keys what it compiles by them (the cache's folder is named by them too), so
  // a flag set later would have every module loaded after it compiled again.
  useEmbeddedWasmTiering();
  const cache = enableCompileCache();
  if (cache.directory && cache.status !== constants.compileCacheStatus.FAILED) {
    process.env.NODE_COMPILE_CACHE = cache.directory;
  }
}
