import * as querystring from 'node:querystring';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { FORM_FIELDS_MAX, FormRefused, parseForm } from '../../apps/server/web/form-body.ts';

vi.mock('node:querystring', async (actual) => {
  const real = await actual<typeof import('node:querystring')>();
  return { ...real, parse: vi.fn(real.parse) };
});

/** What parseForm refuses `body` with, or null. */
function refusal(body: string, max?: number): FormRefused['reason'] | null {
  try {
    parseForm(body, max);
    return null;
  } catch (error) {
    if (error instanceof FormRefused) return error.reason;
    throw error;
  }
}

afterEach(() => {
  vi.mocked(querystring.parse).mockClear();
});

describe('the form parser', () => {
  it('reads fields as a browser sends them: + is a space, UTF-8 escapes, a field without = is empty', () => {
    const fields = parseForm('title=Boiler+care&body=%3Cp%3E%C3%A9t%C3%A9%3C%2Fp%3E&reason&csrf=abc');
    expect({ ...fields }).toEqual({ title: 'Boiler care', body: '<p>été</p>', reason: '', csrf: 'abc' });
    expect({ ...parseForm('') }).toEqual({});
  });

  it('turns broken escapes into U+FFFD: never a lone surrogate, never a throw', () => {
    const fields = parseForm('a=%ED%A0%80&b=%&c=%E0%A4%A');
    for (const value of Object.values(fields)) expect(value.isWellFormed()).toBe(true);
    expect(fields.b).toBe('%');
  });

  it('has no prototype: __proto__ and constructor are plain fields', () => {
    const fields = parseForm('__proto__=x&constructor=y');
    expect(Object.getPrototypeOf(fields)).toBeNull();
    expect(Object.entries(fields)).toContainEqual(['__proto__', 'x']);
    expect(fields.constructor).toBe('y');
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it(`takes ${FORM_FIELDS_MAX} fields and refuses one more, before decoding anything`, () => {
    const fields = (n: number): string => Array.from({ length: n }, (_, i) => `f${i}=v`).join('&');
    expect(Object.keys(parseForm(fields(FORM_FIELDS_MAX)))).toHaveLength(FORM_FIELDS_MAX);
    vi.mocked(querystring.parse).mockClear();
    expect(refusal(fields(FORM_FIELDS_MAX + 1))).toBe('too_many_fields');
    expect(querystring.parse).not.toHaveBeenCalled();
  });

  it('refuses a megabyte of `a&a&…` by counting, without decoding a field', () => {
    const hostile = 'a&'.repeat(512 * 1024);
    expect(refusal(hostile)).toBe('too_many_fields');
    expect(refusal('&'.repeat(FORM_FIELDS_MAX))).toBe('too_many_fields');
    expect(querystring.parse).not.toHaveBeenCalled();
  });

  it('decodes with a key cap: the decoder never makes more than the cap of fields', () => {
    parseForm('a=1&b=2', 5);
    expect(querystring.parse).toHaveBeenCalledWith('a=1&b=2', '&', '=', { maxKeys: 5 });
  });

  it('refuses a field given twice, whichever copy would have counted', () => {
    expect(refusal('csrf=good&csrf=forged')).toBe('repeated_field');
    expect(refusal('a&a')).toBe('repeated_field');
    expect(refusal('title=x&body=y')).toBeNull();
  });
});
