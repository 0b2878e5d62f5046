// @ts-check
import { setFlagsFromString } from 'node:v8';

/*
 * How soon V8 optimises the embedded engine's WebAssembly (PGlite). V8 runs a function first as its
 * baseline compiler (Liftoff) made it, and has its optimising compiler (TurboFan) compile it again, in
 * a helper thread, once the function has used up a budget of work (`--wasm-tiering-budget`, a rough
 * count of bytes executed). At V8's own budget an engine's start makes hundreds of functions hot that a
 * running server seldom calls again (the start's memory zeroing, reading the catalog), and compiling
 * them is about half a second of a helper thread on a 2-core VM, beside the start's own two threads. At
 * fifteen times that budget the start leaves them as they are, and what stays hot under requests is
 * optimised a little later. docs/performance.md, "Start and CLI".
 *
 * Plain JavaScript, set by `useCompileCache()` (infra/compile-cache.js) before anything is compiled:
 * V8 keys its compiled code by its flags, so a flag set later would have it refuse what Node's compile
 * cache holds for every module loaded after.
 */

/** V8's `--wasm-tiering-budget` for the embedded engine: fifteen times V8's own (13,000,000). */
export const EMBEDDED_WASM_TIERING_BUDGET = 200_000_000;

/**
 * Sets the budget for the process (a V8 flag is the process's, its threads' included), so the
 * process's other WebAssembly has it too: the HTTP parser of Node's `fetch` (outbound requests:
 * images, client metadata, webhooks) and Node's type stripper (a module not yet in the compile
 * cache), both small beside PGlite.
 */
export function useEmbeddedWasmTiering() {
  setFlagsFromString(`--wasm-tiering-budget=${EMBEDDED_WASM_TIERING_BUDGET}`);
}
