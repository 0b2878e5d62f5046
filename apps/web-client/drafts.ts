/*
 * Never losing a draft: what the person types in the editor (title, body, reason) is kept in the
 * browser's localStorage, one draft per article (`content-service.editor-draft.<article id>`) with
 * the revision it was begun on (the form's expected revision), written a moment after the typing
 * stops and when the page is left, removed once the text is saved (or is the article's again).
 * Back in the editor, a draft that differs from the page's text is offered: a banner above the form
 * with Restore and Discard. When the article has a newer revision than the draft's, the banner says
 * so and shows what changed since (the stale save's view, from `/articles/{id}/edit?since=<revision>`);
 * a restored draft keeps its revision as the form's expected revision, so saving it is refused as
 * stale and shows those changes again, with the offer to save on top.
 */

import { formPath } from './save-in-place.ts';

export type Fields = { title: string; body: string; reason: string };
type Draft = Fields & { base: number; at: string };

/** How long after the last keystroke the draft is written. */
const WRITE_AFTER_MS = 400;

const keyOf = (articleId: string): string => `content-service.editor-draft.${articleId}`;

function readDraft(key: string): Draft | null {
  try {
    const value = JSON.parse(localStorage.getItem(key) ?? 'null') as Partial<Draft> | null;
    if (
      !value ||
      typeof value.title !== 'string' ||
      typeof value.body !== 'string' ||
      typeof value.reason !== 'string' ||
      typeof value.base !== 'number' ||
      typeof value.at !== 'string'
    )
      return null;
    return value as Draft;
  } catch {
    return null;
  }
}

const same = (a: Fields, b: Fields): boolean =>
  a.title === b.title && a.body === b.body && a.reason === b.reason;

export type DraftHooks = {
  form: HTMLFormElement;
  articleId: string;
  /** The form's text now (the rich editor's HTML for the body). */
  read: () => Fields;
  /** Puts a draft's body in the editor. */
  setBody: (html: string) => void;
  /** Calls back on every change of the text (typing, the toolbar, a paste). */
  onChange: (listener: () => void) => void;
};

export function keepDrafts(hooks: DraftHooks): { saved: () => void } {
  const { form, articleId } = hooks;
  const key = keyOf(articleId);
  const expected = form.elements.namedItem('expected_revision') as HTMLInputElement | null;
  const field = (name: string) => form.elements.namedItem(name) as HTMLInputElement | null;
  /** The article's text as this page has it: a draft the same as it is no draft. */
  let page = hooks.read();
  let timer: number | undefined;
  /** The draft offered and not yet restored or discarded: kept until the person chooses. */
  let offered: Draft | null = null;

  function write(): void {
    timer = undefined;
    const now = hooks.read();
    try {
      if (same(now, page)) {
        if (!offered) localStorage.removeItem(key);
        return;
      }
      const draft: Draft = { ...now, base: Number(expected?.value ?? 0), at: new Date().toISOString() };
      localStorage.setItem(key, JSON.stringify(draft));
    } catch (error) {
      // Storage full or refused (a private window): the text is still in the form.
      console.warn('The draft could not be kept in this browser.', error);
    }
  }
  const later = (): void => {
    window.clearTimeout(timer);
    timer = window.setTimeout(write, WRITE_AFTER_MS);
  };
  form.addEventListener('input', later);
  hooks.onChange(later);
  window.addEventListener('pagehide', () => {
    if (timer !== undefined) write();
  });

  const stored = readDraft(key);
  if (stored && !same(stored, page)) offer(stored);

  function offer(draft: Draft): void {
    offered = draft;
    const current = Number(expected?.value ?? 0);
    const stale = draft.base < current;
    const banner = document.createElement('section');
    banner.id = 'draft-offer';
    banner.className = 'draft-banner';
    banner.setAttribute('aria-labelledby', 'draft-offer-heading');
    const heading = document.createElement('h2');
    heading.id = 'draft-offer-heading';
    heading.textContent = 'An unsaved draft of this article';
    const what = document.createElement('p');
    what.textContent = `This browser kept text you had not saved, from ${new Date(draft.at).toLocaleString()}, begun on revision ${draft.base}. Restore it to go on with it, or discard it.`;
    banner.append(heading, what);
    if (stale) {
      const changed = document.createElement('p');
      changed.id = 'draft-stale';
      const strong = document.createElement('strong');
      strong.textContent = 'The article has changed since:';
      changed.append(
        strong,
        ` it is now at revision ${current}. What changed since revision ${draft.base} is below. A restored draft is saved as one begun on revision ${draft.base}: saving it shows these changes again and asks before saving on top.`,
      );
      banner.append(changed);
    }
    const actions = document.createElement('div');
    actions.className = 'actions';
    const restore = document.createElement('button');
    restore.type = 'button';
    restore.id = 'draft-restore';
    restore.className = 'primary';
    restore.textContent = 'Restore the draft';
    const discard = document.createElement('button');
    discard.type = 'button';
    discard.id = 'draft-discard';
    discard.textContent = 'Discard the draft';
    actions.append(restore, discard);
    banner.append(actions);
    const messages = document.getElementById('editor-messages');
    (messages ?? form).before(banner);
    if (stale) void changesSince(draft.base, banner);

    const done = (said: string): void => {
      offered = null;
      banner.remove();
      field('title')?.focus();
      const status = document.getElementById('save-status');
      if (status) {
        status.classList.remove('failed');
        status.textContent = said;
      }
    };
    restore.addEventListener('click', () => {
      const title = field('title');
      const reason = field('reason');
      if (title) title.value = draft.title;
      if (reason) reason.value = draft.reason;
      hooks.setBody(draft.body);
      if (expected) expected.value = String(draft.base);
      done(
        stale
          ? `Draft restored, begun on revision ${draft.base}: saving it will show what changed since and ask before saving on top.`
          : 'Draft restored. It is not saved yet.',
      );
      write();
    });
    discard.addEventListener('click', () => {
      try {
        localStorage.removeItem(key);
      } catch {
        // Nothing kept, nothing to remove.
      }
      done('Draft discarded.');
    });
  }

  /** The stale save's view of what changed since `base`, from the editor's own page, in the banner. */
  async function changesSince(base: number, banner: HTMLElement): Promise<void> {
    const box = document.createElement('div');
    box.id = 'draft-changes';
    box.textContent = `Loading what changed since revision ${base}…`;
    banner.append(box);
    const path = formPath(form);
    try {
      const response = await fetch(`${path}?since=${base}`, { credentials: 'same-origin' });
      const answer = new DOMParser().parseFromString(await response.text(), 'text/html');
      const stale = answer.querySelector('#stale');
      if (!response.ok || !stale) throw new Error(`${response.status}`);
      const view = document.importNode(stale, true);
      view.id = 'draft-stale-changes';
      // The banner says whose text this is; the stale save's opening words speak of the form's.
      view.querySelector(':scope > p')?.remove();
      // One level down, inside the banner's section; the ids stay unique on the page.
      for (const h of [...view.querySelectorAll('h2, h3')]) {
        const lower = document.createElement(h.tagName === 'H2' ? 'h3' : 'h4');
        lower.append(...h.childNodes);
        h.replaceWith(lower);
      }
      for (const el of view.querySelectorAll('[id]')) el.id = `draft-${el.id}`;
      view.removeAttribute('aria-labelledby');
      view.setAttribute('aria-label', `Changed since revision ${base}`);
      box.replaceChildren(view);
    } catch {
      const article = path.replace(/\/edit$/, '');
      const link = document.createElement('a');
      link.href = `${article}/revisions/compare?from=${base}&to=${Number(expected?.value ?? base)}`;
      link.textContent = `compare revision ${base} with the current one`;
      box.replaceChildren('What changed could not be shown here: ', link, '.');
    }
  }

  return {
    saved(): void {
      window.clearTimeout(timer);
      timer = undefined;
      page = hooks.read();
      offered = null;
      document.getElementById('draft-offer')?.remove();
      try {
        localStorage.removeItem(key);
      } catch {
        // Nothing kept, nothing to remove.
      }
    },
  };
}
