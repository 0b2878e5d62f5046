import { describe, expect, it } from 'vitest';
import {
  checkPassword,
  PASSWORD_MAX_LENGTH,
  PASSWORD_MIN_LENGTH,
  passwordProblem,
} from '../../domain/account/password.ts';
import { DomainError } from '../../domain/errors.ts';

describe('the password policy', () => {
  it('accepts a password from PASSWORD_MIN_LENGTH to PASSWORD_MAX_LENGTH characters', () => {
    expect(PASSWORD_MIN_LENGTH).toBe(12);
    expect(PASSWORD_MAX_LENGTH).toBe(1024);
    for (const length of [PASSWORD_MIN_LENGTH, 40, PASSWORD_MAX_LENGTH]) {
      expect(passwordProblem('p'.repeat(length))).toBeNull();
      expect(() => checkPassword('p'.repeat(length))).not.toThrow();
    }
  });

  it('says what is wrong with one too short or too long', () => {
    expect(passwordProblem('')).toBe('at least 12 characters long');
    expect(passwordProblem('p'.repeat(PASSWORD_MIN_LENGTH - 1))).toBe('at least 12 characters long');
    expect(passwordProblem('p'.repeat(PASSWORD_MAX_LENGTH + 1))).toBe('at most 1024 characters long');
  });

  it('refuses one as invalid_request, in the words the faces show', () => {
    const refusal = (password: string): unknown => {
      try {
        checkPassword(password);
      } catch (error) {
        return error;
      }
      return undefined;
    };
    const short = refusal('too short');
    expect(short).toBeInstanceOf(DomainError);
    expect(short).toMatchObject({
      code: 'invalid_request',
      message: 'The password must be at least 12 characters long',
    });
    expect(refusal('p'.repeat(PASSWORD_MAX_LENGTH + 1))).toMatchObject({
      code: 'invalid_request',
      message: 'The password must be at most 1024 characters long',
    });
  });
});
