import { Editor, elementFromString } from '@tiptap/core';
import StarterKit from '@tiptap/starter-kit';
import { cleanPastedHtml } from './paste.ts';
import { NORMALIZE, PROTECTED_SELECTOR, ProtectedBlock, protectedMarkup } from './protected-blocks.ts';
import { linkDialog, toolbar } from './toolbar.ts';

/*
 * The rich editor of /articles/{id}/edit, as a progressive enhancement: the page is a plain form with
 * the body's HTML in a textarea; this script, when it runs, puts a rich-text editor with a toolbar
 * (toolbar.ts) in the textarea's place and writes the editor's HTML back into it when the form is
 * sent. Protected blocks are atoms (protected-blocks.ts); pasted HTML is cleaned to what the server
 * keeps (paste.ts). A body the editor cannot show exactly (markup outside its schema) keeps the
 * textarea, with a note saying why. With either, the form (`guardForm`): Ctrl/Cmd+S saves, Enter in
 * the title goes to the body, and leaving the page with unsaved changes asks first.
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

/** A line under the editor that says what happened to what the person asked, read by screen readers too. */
function statusLine(): { element: HTMLElement; say: (message: string) => void } {
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
  };
}

/** The rich editor in the textarea's place; its HTML, or null when the body stays in the textarea. */
function enhance(textarea: HTMLTextAreaElement, form: HTMLFormElement): (() => string) | null {
  const mount = document.createElement('div');
  mount.className = 'rich-editor';
  // A refused save's form carries the article's body as it is (its protected links are those):
  // the text sent may hold copies or changed ones, which are not blocks then.
  const source = document.querySelector<HTMLTemplateElement>('template#protected-source');
  const status = statusLine();
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
      ProtectedBlock.configure({
        loaded: protectedMarkup(elementFromString(source?.innerHTML ?? textarea.value)),
        say: status.say,
      }),
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
  return () => editor.getHTML();
}

/**
 * The form, with or without the rich editor: Ctrl/Cmd+S sends it (as its Save button), Enter in the
 * title goes to the body, and leaving with unsaved changes asks first (not when the form is sent).
 */
function guardForm(form: HTMLFormElement, body: () => string, focusBody: () => void): void {
  const values = (): string =>
    JSON.stringify([
      (form.elements.namedItem('title') as HTMLInputElement | null)?.value,
      body(),
      (form.elements.namedItem('reason') as HTMLInputElement | null)?.value,
    ]);
  const initial = values();
  let sending = false;
  form.addEventListener('submit', () => {
    sending = true;
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
}

const textarea = document.querySelector<HTMLTextAreaElement>('textarea#body[data-rich-editor]');
const form = textarea?.form;
if (textarea && form) {
  const rich = enhance(textarea, form);
  guardForm(form, rich ?? (() => textarea.value), () =>
    (rich ? document.querySelector<HTMLElement>('#rich-editor-content') : textarea)?.focus(),
  );
}
