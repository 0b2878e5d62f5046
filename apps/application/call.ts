import type { KeyScope } from '../../domain/account/events.ts';
import { DomainError } from '../../domain/errors.ts';
import type { Actor, Origin } from '../../domain/event.ts';
import type { LimitDecision } from '../../infra/limits.ts';

/** Who acts, through which face, with which grant: every use case takes one. */
export type Principal = {
  accountId: string;
  actor: Actor;
  /** The face the call came through; a change it makes is a revision of this origin. */
  origin: Origin;
  scope: KeyScope;
  requestId?: string | undefined;
  /**
   * An API key not yet confirmed unrevoked for this call: the call's first read of the account's data
   * confirms it in its own statement (a revoked key is refused as unauthenticated). Absent when the
   * adapter has confirmed it already, or the principal holds no key (OAuth, a web session).
   */
  liveKey?: string | undefined;
};

/** A request's ids: the service's (`req_...`) and the client's own `X-Request-Id`, if a valid one. */
export type RequestIds = { requestId: string; clientRequestId: string | null };

/**
 * The site and article a call touched, and the revision it created (null when it created none), for
 * its activity record: use cases fill in what they learn.
 */
export type Touched = { siteId: string | null; articleId: string | null; revision: number | null };

/** The outcome of counting one unit against a limit (infra/limits.ts counts it; the adapter states it). */
export type { LimitDecision };

/** The daily edit limit: counts one article edit of an account, atomically across processes. */
export type EditLimit = { take(accountId: string): Promise<LimitDecision> };

/** One call of a use case: who calls, what it touched, and the edit-limit decision once one is taken. */
export type Call = {
  principal: Principal;
  touched: Touched;
  /** Set by a write when it counts its edit, refused or not; the adapter states it. */
  edits?: LimitDecision;
};

/** A call that has touched nothing yet (adapters that know the subject from the path fill it in). */
export function callOf(principal: Principal, touched: Partial<Touched> = {}): Call {
  return {
    principal,
    touched: {
      siteId: touched.siteId ?? null,
      articleId: touched.articleId ?? null,
      revision: touched.revision ?? null,
    },
  };
}

/** Writes need a write grant; the adapters refuse earlier, this keeps every face to the same rule. */
export function requireWrite(principal: Principal, what: string): void {
  if (principal.scope !== 'write') {
    throw new DomainError('insufficient_scope', `${what} changes articles, and this grant may read only`);
  }
}

/** The idempotency of a write: the caller's key and what identifies the request (a retry must send the same). */
export type Idempotency = { key: string; request: readonly unknown[] };
