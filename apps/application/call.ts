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

/** What a call's activity record names: the site and article it touched and the revision it created. */
export type Subject = { siteId: string | null; articleId: string | null; revision: number | null };

/** The outcome of counting one unit against a limit (infra/limits.ts counts it; the adapter states it). */
export type { LimitDecision };

/** The daily edit limit: counts one article edit of an account, atomically across processes. */
export type EditLimit = { take(accountId: string): Promise<LimitDecision> };

/** One call of a use case: who calls, through which face, with which grant. */
export type Call = { principal: Principal };

/**
 * What a use case did, as a value: its answer or its refusal (`error`: a DomainError, or whatever
 * failed), the subject its activity record names, and the edit-limit decision it took (refused or not).
 */
export type Outcome<T> =
  | { ok: true; value: T; subject: Subject; edits: LimitDecision | null }
  | { ok: false; error: unknown; subject: Subject; edits: LimitDecision | null };

/** What a use case learns as it runs, for its outcome: set once each, by the use case only. */
export type Note = {
  site(siteId: string): void;
  article(articleId: string): void;
  revision(revision: number): void;
  edits(decision: LimitDecision): void;
};

/** Runs a use case's work and returns its outcome; a throw becomes a refusal with what was learnt so far. */
export async function outcomeOf<T>(
  known: Partial<Subject>,
  work: (note: Note) => Promise<T>,
): Promise<Outcome<T>> {
  const subject: Subject = {
    siteId: known.siteId ?? null,
    articleId: known.articleId ?? null,
    revision: known.revision ?? null,
  };
  let edits: LimitDecision | null = null;
  const note: Note = {
    site: (siteId) => {
      subject.siteId = siteId;
    },
    article: (articleId) => {
      subject.articleId = articleId;
    },
    revision: (revision) => {
      subject.revision = revision;
    },
    edits: (decision) => {
      edits = decision;
    },
  };
  try {
    const value = await work(note);
    return { ok: true, value, subject, edits };
  } catch (error) {
    return { ok: false, error, subject, edits };
  }
}

/** The value of an outcome; its refusal thrown (for a face whose errors are mapped where they are caught). */
export function unwrap<T>(outcome: Outcome<T>): T {
  if (!outcome.ok) throw outcome.error;
  return outcome.value;
}

/** A call of a principal. */
export function callOf(principal: Principal): Call {
  return { principal };
}

/** Writes need a write grant; the adapters refuse earlier, this keeps every face to the same rule. */
export function requireWrite(principal: Principal, what: string): void {
  if (principal.scope !== 'write') {
    throw new DomainError('insufficient_scope', `${what} changes articles, and this grant may read only`);
  }
}

/** The idempotency of a write: the caller's key and what identifies the request (a retry must send the same). */
export type Idempotency = { key: string; request: readonly unknown[] };
