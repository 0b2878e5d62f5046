import { Editor, elementFromString } from '@tiptap/core';
import StarterKit from '@tiptap/starter-kit';
import { keepDrafts } from './drafts.ts';
import { cleanPastedHtml } from './paste.ts';
import { NORMALIZE, PROTECTED_SELECTOR, ProtectedBlock, protectedMarkup } from './protected-blocks.ts';
import { revisionsDrawer } from './revisions-drawer.ts';
import { formPath, saveInPlace } from './save-in-place.ts';
import { linkDialog, toolbar } from './toolbar.ts';

/*
 * The rich editor of /articles/{id}/edit, as a progressive enhancement: the page is a plain form with
 * the body's HTML in a textarea; this script, when it runs, puts a rich-text editor with a toolbar
 * (toolbar.ts) in the textarea's place and writes the editor's HTML back into it when the form is
 * sent. Protected blocks are atoms (protected-blocks.ts); pasted HTML is cleaned to what the server
 * keeps (paste.ts). A body the editor cannot show exactly (markup outside its schema) keeps the
 * textarea, with a note saying why. With either, the form (`guardForm`): Ctrl/Cmd+S saves, Enter in
 * the title goes to the body, and leaving the page with unsaved changes asks first. Save sends the form
 * without leaving the page (save-in-place.ts), the unsaved text is kept in the browser and offered
 * back (drafts.ts), and the revisions below the form open as a drawer (revisions-drawer.ts).
 */

/**
 * Elements and their count, and the text: what a faithful load of the body must keep. The editor
 * puts the text of a list item or a quote in a paragraph of its own; those paragraphs do not count.
 */
function shapeOf(markup: string): string {
  const template = document.createElement('template');
  template.innerHTML = markup;
  const wrapper = (e: Element): boolean =>
    e.tagName === 'P' && (e.parentElement?.tagName === 'LI' || e.parentElement?.tagName === 'BLOCKQUOTE');
  const tags = [...template.content.querySelectorAll('*')]
    .filter((e) => !wrapper(e))
    .map((e) => e.tagName.toLowerCase())
    .sort();
  // Whitespace between blocks is not kept by the editor and means nothing in HTML: compared without it.
  const text = (template.content.textContent ?? '').replace(/\s+/g, '');
  return `${tags.join(',')}|${text}|${template.content.querySelectorAll(PROTECTED_SELECTOR).length}`;
}

/**
 * A line under the editor that says what happened to what the person asked, read by screen readers
 * too; pinned to the bottom of the window while the editor is in view (the stylesheet), so it is seen
 * wherever the caret is, and cleared by the next change of the text (`clear`).
 */
function statusLine(): { element: HTMLElement; say: (message: string) => void; clear: () => void } {
  const element = document.createElement('p');
  element.id = 'rich-editor-status';
  element.className = 'rich-editor-status';
  element.setAttribute('role', 'status');
  element.setAttribute('aria-live', 'polite');
  return {
    element,
    say(message) {
      // Emptied first, so that the same message said twice is read twice.
      element.textContent = '';
      requestAnimationFrame(() => {
        element.textContent = message;
      });
    },
    clear() {
      element.textContent = '';
    },
  };
}

/** The rich editor, once it is in the textarea's place. */
type Rich = {
  /** Its HTML, as the form sends it. */
  html: () => string;
  /** Puts a body in it; `source`, when given, is the markup whose protected links are the blocks now. */
  setBody: (body: string, source: string | null) => void;
  /** The protected links are those of `markup` from now on (the article's, after a refused save). */
  setProtectedSource: (markup: string) => void;
  /** Calls back on every change of its text. */
  onChange: (listener: () => void) => void;
};

/** The rich editor in the textarea's place, or null when the body stays in the textarea. */
function enhance(textarea: HTMLTextAreaElement, form: HTMLFormElement): Rich | null {
  const mount = document.createElement('div');
  mount.className = 'rich-editor';
  // A refused save's form carries the article's body as it is (its protected links are those):
  // the text sent may hold copies or changed ones, which are not blocks then.
  const source = document.querySelector<HTMLTemplateElement>('template#protected-source');
  const status = statusLine();
  // The blocks: the body's as loaded, and after a save made in place the article's as it is then.
  const blocks = new Map(protectedMarkup(elementFromString(source?.innerHTML ?? textarea.value)));
  const editor = new Editor({
    element: mount,
    // The page's policy allows no inline style: the editor's few rules are in the site's stylesheet.
    injectCSS: false,
    // No trailing empty paragraph: the saved body is the body as written.
    extensions: [
      StarterKit.configure({
        // A link is written as the person gave it: no target or rel added (the server adds what it must).
        link: { openOnClick: false, HTMLAttributes: { target: null, rel: null, class: null } },
        trailingNode: false,
      }),
      // Parsed as the editor parses its content, so that each block's markup is the same string.
      ProtectedBlock.configure({ loaded: blocks, say: status.say }),
    ],
    content: textarea.value,
    editorProps: {
      // Pasted and dropped HTML: only what the server keeps, protection markers gone.
      transformPastedHTML: cleanPastedHtml,
      attributes: {
        id: 'rich-editor-content',
        role: 'textbox',
        'aria-multiline': 'true',
        'aria-label': 'Body',
        'aria-describedby': 'body-help rich-editor-status',
        class: 'rich-editor-content',
      },
    },
  });
  const expected = shapeOf(textarea.value);
  const loaded = shapeOf(editor.getHTML());
  if (loaded !== expected) {
    console.info('The rich editor would change this body; keeping the HTML form.', { expected, loaded });
    editor.destroy();
    const note = document.createElement('p');
    note.className = 'muted';
    note.id = 'rich-editor-note';
    note.textContent =
      'This body uses markup the rich editor cannot show exactly, so it is edited as HTML here.';
    textarea.before(note);
    return null;
  }
  // What was said stays in view until the text changes again.
  editor.on('update', status.clear);
  // A block beyond the body's own count (an exact copy sent in a refused save) is an ordinary link.
  editor.view.dispatch(editor.state.tr.setMeta(NORMALIZE, true).setMeta('addToHistory', false));
  const openLink = linkDialog(editor, form, status.say);
  editor.setOptions({
    editorProps: {
      ...editor.options.editorProps,
      handleKeyDown: (_view, event) => {
        if (!(event.ctrlKey || event.metaKey) || event.altKey || event.key.toLowerCase() !== 'k')
          return false;
        event.preventDefault();
        openLink();
        return true;
      },
    },
  });
  textarea.hidden = true;
  textarea.before(toolbar(editor, openLink), mount, status.element);
  const label = document.querySelector('label[for="body"]');
  if (label) label.textContent = 'Body';
  label?.addEventListener('click', () => editor.commands.focus());
  const help = document.getElementById('body-help');
  if (help) {
    const protectedLinks = document.createElement('a');
    protectedLinks.href = '#protected-heading';
    protectedLinks.textContent = 'protected links';
    help.replaceChildren(
      'The article’s text: format it with the toolbar or its shortcuts (in each button’s tooltip). The ',
      protectedLinks,
      ', outlined, must stay as they are: drag one to move it; it cannot be deleted or changed. When you save, anything not allowed in an article is removed and listed.',
    );
  }
  form.dataset.richEditor = 'on';
  form.addEventListener('submit', () => {
    textarea.value = editor.getHTML();
  });
  /** The blocks are those of `markup` from now on (the guard reads the same map). */
  const blocksOf = (markup: string): void => {
    blocks.clear();
    for (const [key, count] of protectedMarkup(elementFromString(markup))) blocks.set(key, count);
  };
  /** A block beyond the loaded count becomes an ordinary link now. */
  const normalize = (): void => {
    editor.view.dispatch(editor.state.tr.setMeta(NORMALIZE, true).setMeta('addToHistory', false));
  };
  return {
    html: () => editor.getHTML(),
    setBody(body, markup) {
      if (markup !== null) blocksOf(markup);
      editor.commands.setContent(body);
      normalize();
    },
    setProtectedSource(markup) {
      blocksOf(markup);
      normalize();
    },
    onChange(listener) {
      editor.on('update', listener);
    },
  };
}

/**
 * The form, with or without the rich editor: Ctrl/Cmd+S sends it (as its Save button), Enter in the
 * title goes to the body, and leaving with unsaved changes asks first (not when the form is sent).
 */
function guardForm(
  form: HTMLFormElement,
  body: () => string,
  focusBody: () => void,
): { saved: () => void; release: () => void } {
  const values = (): string =>
    JSON.stringify([
      (form.elements.namedItem('title') as HTMLInputElement | null)?.value,
      body(),
      (form.elements.namedItem('reason') as HTMLInputElement | null)?.value,
    ]);
  let initial = values();
  let sending = false;
  form.addEventListener('submit', (event) => {
    // A save made in place (save-in-place.ts) stays on the page: its text is still to be guarded.
    if (!event.defaultPrevented) sending = true;
  });
  window.addEventListener('beforeunload', (event) => {
    if (sending || values() === initial) return;
    event.preventDefault();
    // Older browsers ask only when returnValue is set.
    event.returnValue = '';
  });
  document.addEventListener('keydown', (event) => {
    if (!(event.ctrlKey || event.metaKey) || event.altKey || event.key.toLowerCase() !== 's') return;
    event.preventDefault();
    form.requestSubmit(form.querySelector<HTMLButtonElement>('button.primary[type=submit]'));
  });
  form.querySelector('#title')?.addEventListener('keydown', (event) => {
    if ((event as KeyboardEvent).key !== 'Enter') return;
    event.preventDefault();
    focusBody();
  });
  return {
    saved() {
      initial = values();
    },
    release() {
      sending = true;
    },
  };
}

const textarea = document.querySelector<HTMLTextAreaElement>('textarea#body[data-rich-editor]');
const form = textarea?.form;
if (textarea && form) {
  const rich = enhance(textarea, form);
  const body = rich ? rich.html : () => textarea.value;
  const setBody = (html: string, source: string | null): void => {
    if (rich) rich.setBody(html, source);
    else textarea.value = html;
  };
  const articleId = decodeURIComponent(formPath(form).split('/')[2] ?? '');
  const drafts = keepDrafts({
    form,
    articleId,
    read: () => ({
      title: (form.elements.namedItem('title') as HTMLInputElement | null)?.value ?? '',
      body: body(),
      reason: (form.elements.namedItem('reason') as HTMLInputElement | null)?.value ?? '',
    }),
    setBody: (html) => setBody(html, null),
    onChange: (listener) => rich?.onChange(listener),
  });
  // Registered after the rich editor's own listener (which writes its HTML into the form) and before
  // the guard's, which reads whether the save left the page.
  let guard: { saved: () => void; release: () => void } | null = null;
  saveInPlace(form, {
    setBody,
    setProtectedSource: (markup) => rich?.setProtectedSource(markup),
    saved: () => {
      guard?.saved();
      drafts.saved();
    },
    release: () => guard?.release(),
  });
  guard = guardForm(form, body, () =>
    (rich ? document.querySelector<HTMLElement>('#rich-editor-content') : textarea)?.focus(),
  );
  revisionsDrawer(form);
}
