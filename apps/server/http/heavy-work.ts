import { finished } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '../../../domain/errors.ts';
import { HEAVY_WAITING_PER_ACCOUNT } from '../../../infra/config.ts';
import { createFairQueue } from './fair-queue.ts';
import { addressKey } from './limits.ts';

/*
 * Requests that move megabytes through the server's thread (a body of 256 KiB or more on any face, a
 * revision page with its diffs) run one at a time per process. Each such request is many tasks of the
 * thread (parse, hand to a worker, write to the database, render, send); two of them at once put their
 * tasks, and the large strings they hold, side by side, and the short requests of everyone else (a
 * list, a health check) wait behind all of them. One at a time, the others run between its tasks.
 *
 * The turns are shared between accounts (fair-queue.ts): at most HEAVY_WAITING_PER_ACCOUNT requests of
 * one account wait, and turns go round between the accounts with requests waiting, so that one account's
 * many large requests never make another's wait behind more than one of them, nor refuse it. A request
 * spends its account's share (its API key's, its assistant's, its page session's), a staff member's
 * their own, a request without either its client address's. At most HEAVY_WAITING wait in all; a
 * request that is not let in within HEAVY_WAIT_MS, finds its account's share or the queue full, or
 * loses its place to another account's, is answered 503 `unavailable` with `Retry-After` and has
 * changed nothing.
 */

/** A request body at least this large (by its `Content-Length`; any chunked body) is heavy. */
export const HEAVY_BODY_BYTES = 256 * 1024;
/** Heavy requests run at once per process. */
export const HEAVY_AT_ONCE = 1;
/** Heavy requests that may wait for their turn. */
export const HEAVY_WAITING = 64;
/** Heavy requests of one account (or staff member, or client address without either) that may wait, by default. */
export { HEAVY_WAITING_PER_ACCOUNT };
/** How long a heavy request waits for its turn at most. */
export const HEAVY_WAIT_MS = 10_000;
export const HEAVY_RETRY_AFTER_S = 1;
export const HEAVY_BUSY_DETAIL = `The service is busy with other large requests; retry in ${HEAVY_RETRY_AFTER_S} s.`;

/** The share of heavy work an account's requests spend, from every face. */
export function accountShare(accountId: string): string {
  return `account:${accountId}`;
}

/** The share of heavy work a support staff member's pages spend. */
export function staffShare(staffId: string): string {
  return `staff:${staffId}`;
}

export type HeavyWork = {
  /**
   * Waits for this request's turn, which lasts until its answer is sent (or, when its client went away
   * first, until the handler has made its answer: its work is done then); throws a 503 `unavailable`
   * refusal, `Retry-After` set, when no turn comes.
   */
  admit(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** For the root onSend hook (installHeavyWork): the request's handler has made its answer. */
  answered(request: FastifyRequest): void;
  /**
   * Names the share a request spends (accountShare, staffShare) where the request's face knows it
   * before its body is read (a page's session); without it, a request spends its API key's or
   * assistant's account's share, else its client address's.
   */
  setShare(request: FastifyRequest, share: string): void;
  /** How many heavy requests wait: in all, or of one share. */
  waiting(share?: string): number;
};

export type HeavyWorkOptions = {
  atOnce?: number;
  waiting?: number;
  /** Requests of one share that may wait (config HEAVY_WAITING_PER_ACCOUNT). */
  waitingPerAccount?: number;
  waitMs?: number;
};

export function createHeavyWork(opts: HeavyWorkOptions = {}): HeavyWork {
  const queue = createFairQueue({
    atOnce: opts.atOnce ?? HEAVY_AT_ONCE,
    waitingMax: opts.waiting ?? HEAVY_WAITING,
    waitingPerOwner: opts.waitingPerAccount ?? HEAVY_WAITING_PER_ACCOUNT,
  });
  /** Shares named by a request's face (setShare). */
  const named = new WeakMap<FastifyRequest, string>();
  const shareOf = (request: FastifyRequest): string => {
    const share = named.get(request);
    if (share) return share;
    const accountId = request.auth?.principal?.accountId;
    return accountId ? accountShare(accountId) : `address:${addressKey(request.ip)}`;
  };
  const waitMs = opts.waitMs ?? HEAVY_WAIT_MS;
  /** Requests holding a turn whose connection closed before their answer was made. */
  const closedEarly = new WeakMap<FastifyRequest, () => void>();
  /** Requests holding a turn: a second `admit` of one (a heavy body, then a heavy page) is let through. */
  const holding = new WeakSet<FastifyRequest>();
  return {
    async admit(request, reply) {
      if (holding.has(request)) return;
      const share = shareOf(request);
      if (!(await queue.take(share, AbortSignal.timeout(waitMs)))) {
        reply.header('retry-after', String(HEAVY_RETRY_AFTER_S));
        throw new DomainError('unavailable', HEAVY_BUSY_DETAIL);
      }
      holding.add(request);
      let given = false;
      const give = (): void => {
        if (given) return;
        given = true;
        closedEarly.delete(request);
        holding.delete(request);
        queue.give(share);
      };
      finished(reply.raw, () => {
        // A client that leaves early does not end the work it started: the turn ends with that work.
        if (reply.sent) give();
        else closedEarly.set(request, give);
      });
    },
    answered(request) {
      closedEarly.get(request)?.();
    },
    setShare(request, share) {
      named.set(request, share);
    },
    waiting: (share) => queue.waiting(share),
  };
}

/** Whether a request's body makes it heavy: `Content-Length` of HEAVY_BODY_BYTES or more, or chunked. */
export function hasHeavyBody(request: FastifyRequest): boolean {
  const length = request.headers['content-length'];
  if (length !== undefined) return Number(length) >= HEAVY_BODY_BYTES;
  return request.headers['transfer-encoding'] !== undefined;
}

/**
 * Every request with a heavy body waits for its turn once its body has arrived and been parsed (a
 * client that sends slowly holds no turn) and before it is validated and handled; every answer tells
 * `heavy` its request's work is done.
 */
export function installHeavyWork(app: FastifyInstance, heavy: HeavyWork): void {
  // With `done`, not async: every request passes here, and most have nothing to wait for.
  app.addHook('preValidation', (request, reply, done) => {
    if (!hasHeavyBody(request)) {
      done();
      return;
    }
    heavy.admit(request, reply).then(() => done(), done);
  });
  app.addHook('onSend', (request, _reply, payload, done) => {
    heavy.answered(request);
    done(null, payload);
  });
}
