export type { BodyFacts } from './facts.ts';
export { bodyFacts, checkProtectedBlocks, extractProtectedLinks, wordCount } from './facts.ts';
export type { HtmlMemory } from './memory.ts';
export type { ProtectedChange, ProtectedCheck, ProtectedLink } from './protected.ts';
export type { SanitizeResult } from './sanitize.ts';
export { isAllowedUrl, sanitizeHtml } from './sanitize.ts';
export { SanitizedItem, SanitizeReason } from './sanitized-item.ts';
export { textContent } from './text.ts';
