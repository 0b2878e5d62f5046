/*
 * Text the authorization server refuses in what clients send it: control characters (C0, DEL, C1) and
 * unpaired UTF-16 surrogates. None of them belongs in a client's metadata (RFC 7591) or in an OAuth
 * request parameter (RFC 6749 appendix A allows printable characters only), and PostgreSQL cannot
 * store some of them (a NUL in text or jsonb, a lone surrogate in jsonb): refused at the door, they
 * give the client a 400 that names the field instead of a 500 at the database. The rule is the one
 * every face applies to text (domain/input.ts).
 */

import { textProblem as textOf } from '../../../domain/input.ts';

const textProblem = (text: string): string | null => textOf(text, { lines: false });

/** The first string in `value` (a string, or arrays and objects of them) with a problem, named by its path. */
function firstProblem(value: unknown, path: string): string | null {
  if (typeof value === 'string') {
    const problem = textProblem(value);
    return problem ? `${path} ${problem}` : null;
  }
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const problem = firstProblem(item, `${path}[${index}]`);
      if (problem) return problem;
    }
    return null;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [key, item] of Object.entries(value)) {
      const keyProblem = textProblem(key);
      if (keyProblem) return `a property name in ${path} ${keyProblem}`;
      const problem = firstProblem(item, `${path}.${key}`);
      if (problem) return problem;
    }
  }
  return null;
}

/**
 * Why this client metadata is refused for its text, naming the field (`client_name contains the control
 * character U+0000`, `redirect_uris[1] ...`), or null. Every string is checked, in arrays and objects too.
 */
export function metadataTextProblem(metadata: Record<string, unknown>): string | null {
  for (const [key, value] of Object.entries(metadata)) {
    const problem = firstProblem(value, key);
    if (problem) return problem;
  }
  return null;
}

/** Why these request parameters (a query string or form) are refused, naming the parameter, or null. */
export function parameterTextProblem(params: URLSearchParams): string | null {
  for (const [name, value] of params) {
    const nameProblem = textProblem(name);
    if (nameProblem) return `a parameter name ${nameProblem}`;
    const problem = textProblem(value);
    if (problem) return `parameter ${name} ${problem}`;
  }
  return null;
}
