/**
 * How long a test waits for something that happens by itself (a batch written by a timer, a
 * projector catching up, a server's log line), polling every 50 ms: generous, so that a busy machine
 * only makes the test slower, never red. `vi.waitFor(check, PATIENCE)`, `expect.poll(value, PATIENCE)`.
 */
export const PATIENCE = { timeout: 20_000, interval: 50 } as const;

/** The same for a check that spends the API's default budget (60 requests a minute): at most 40 checks. */
export const PATIENCE_API = { timeout: 20_000, interval: 500 } as const;
