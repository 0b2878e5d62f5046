export type { ProtectedChange, ProtectedCheck, ProtectedLink } from './protected.ts';
export { checkProtectedBlocks, extractProtectedLinks } from './protected.ts';
export type { SanitizedItem, SanitizeReason, SanitizeResult } from './sanitize.ts';
export { isAllowedUrl, sanitizeHtml } from './sanitize.ts';
export { textContent, wordCount } from './text.ts';
