import { DomainError } from '../../domain/errors.ts';

/** The code a promise is refused with (`accepted` when it resolves); anything but a DomainError is rethrown. */
export async function refusal(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof DomainError) return error.code;
    throw error;
  }
  return 'accepted';
}
