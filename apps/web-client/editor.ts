import { Editor, elementFromString } from '@tiptap/core';
import StarterKit from '@tiptap/starter-kit';
import { cleanPastedHtml } from './paste.ts';
import { PROTECTED_SELECTOR, ProtectedBlock, protectedMarkup } from './protected-blocks.ts';

/*
 * The rich editor of /articles/{id}/edit, as a progressive enhancement: the page is a plain form with
 * the body's HTML in a textarea; this script, when it runs, puts a rich-text editor in the textarea's
 * place and writes the editor's HTML back into it when the form is sent. Protected blocks are atoms
 * (protected-blocks.ts); pasted HTML is cleaned to what the server keeps (paste.ts). A body the
 * editor cannot show exactly (markup outside its schema) keeps the textarea, with a note saying why.
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

function enhance(textarea: HTMLTextAreaElement): void {
  const form = textarea.form;
  if (!form) return;
  const mount = document.createElement('div');
  mount.className = 'rich-editor';
  const editor = new Editor({
    element: mount,
    // The page's policy allows no inline style: the editor's few rules are in the site's stylesheet.
    injectCSS: false,
    // No trailing empty paragraph: the saved body is the body as written.
    extensions: [
      StarterKit.configure({ link: { openOnClick: false }, trailingNode: false }),
      // Parsed as the editor parses its content, so that each block's markup is the same string.
      ProtectedBlock.configure({ loaded: protectedMarkup(elementFromString(textarea.value)) }),
    ],
    content: textarea.value,
    editorProps: {
      // Pasted and dropped HTML: only what the server keeps, protection markers gone.
      transformPastedHTML: cleanPastedHtml,
      attributes: {
        role: 'textbox',
        'aria-multiline': 'true',
        'aria-label': 'Body',
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
    return;
  }
  textarea.hidden = true;
  textarea.before(mount);
  const label = document.querySelector('label[for="body"]');
  if (label) label.textContent = 'Body';
  label?.addEventListener('click', () => editor.commands.focus());
  form.dataset.richEditor = 'on';
  form.addEventListener('submit', () => {
    textarea.value = editor.getHTML();
  });
}

const textarea = document.querySelector<HTMLTextAreaElement>('textarea#body[data-rich-editor]');
if (textarea) enhance(textarea);
