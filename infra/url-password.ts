/**
 * A database or Redis URL as it may be shown (messages, logs, command output): its password replaced
 * by `***`; `unparsable` when it is not a URL.
 */
export function withoutPassword(url: string, unparsable = '(unparsable URL)'): string {
  try {
    const parsed = new URL(url);
    if (parsed.password !== '') parsed.password = '***';
    return parsed.toString();
  } catch {
    return unparsable;
  }
}
