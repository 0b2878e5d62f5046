import { z } from 'zod';
import type { ProtectedChange } from './html/protected.ts';

/** The stable, machine-readable codes the domain and the application raise. No HTTP here. */
export const ErrorCode = z.enum([
  'invalid_request',
  'unauthenticated',
  'insufficient_scope',
  'not_found',
  'conflict',
  'revision_mismatch',
  'protected_links_modified',
  'image_too_large',
  'unsupported_image',
  'image_fetch_failed',
  'diff_too_large',
  'rate_limited',
  'edit_limit_reached',
  'unavailable',
  'internal',
]);
export type ErrorCode = z.infer<typeof ErrorCode>;

/** A field of the input that was refused, and why (`must be 1 to 300 characters`). */
export type FieldError = { readonly field: string; readonly message: string };

/**
 * Something a layer above the domain refused by name, and why: the domain raises none (a request's
 * parameter that a face refused is one, with where the face read it).
 */
export type NamedDetail = { readonly name: string; readonly message: string };

/** What an error lists: refused fields of the input, protected blocks an edit changed, or named details. */
export type ErrorDetail = FieldError | ProtectedChange | NamedDetail;

/**
 * Where a caller reads on after a refusal, by name: addresses of the service relative to its public
 * address (a diff too large to give links to both revisions it compared).
 */
export type ErrorLinks = Readonly<Record<string, string>>;

/** A typed error with a semantic code; the faces map it to a status. */
export class DomainError extends Error {
  readonly code: ErrorCode;
  readonly errors: readonly ErrorDetail[] | undefined;
  readonly links: ErrorLinks | undefined;

  constructor(code: ErrorCode, message: string, errors?: readonly ErrorDetail[], links?: ErrorLinks) {
    super(message);
    this.name = 'DomainError';
    this.code = code;
    this.errors = errors;
    this.links = links;
  }
}

export function isDomainError(error: unknown): error is DomainError {
  return error instanceof DomainError;
}

/** `invalid_request` naming one refused field of the input. */
export function invalidField(message: string, field: string, problem: string): DomainError {
  return new DomainError('invalid_request', message, [{ field, message: problem }]);
}
