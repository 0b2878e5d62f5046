import { z } from 'zod';

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
  'rate_limited',
  'edit_limit_reached',
  'internal',
]);
export type ErrorCode = z.infer<typeof ErrorCode>;

export type ErrorDetail = Record<string, unknown>;

/** A typed error with a semantic code; one handler per face maps it to a status. */
export class DomainError extends Error {
  readonly code: ErrorCode;
  readonly errors: readonly ErrorDetail[] | undefined;

  constructor(code: ErrorCode, message: string, errors?: readonly ErrorDetail[]) {
    super(message);
    this.name = 'DomainError';
    this.code = code;
    this.errors = errors;
  }
}

export function isDomainError(error: unknown): error is DomainError {
  return error instanceof DomainError;
}
