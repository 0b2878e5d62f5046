/*
 * A server's drain (docs/operations.md, "Stopping"): from SIGTERM on, for SHUTDOWN_DRAIN_SECONDS, the
 * public `/readyz` answers 503 `stopping` and every answer carries `Connection: close`, while requests
 * are still served; a load balancer sees the failed check and stops sending, and closes the
 * connections it kept alive, before the server stops listening.
 */

export type Drain = {
  /** Whether the process has been told to stop: it takes no new work once the drain ends. */
  readonly stopping: boolean;
  begin(): void;
};

export function createDrain(): Drain {
  let stopping = false;
  return {
    get stopping() {
      return stopping;
    },
    begin() {
      stopping = true;
    },
  };
}
