import { Editor } from '@tiptap/core';
import StarterKit from '@tiptap/starter-kit';
import { PROTECTED_SELECTOR, ProtectedBlock } from './protected-blocks.ts';

/*
 * The rich editor of /articles/{id}/edit, as a progressive enhancement: the page is a plain form with
 * the body's HTML in a textarea; this script, when it runs, puts a rich-text editor in the textarea's
 * place and writes the editor's HTML back into it when the form is sent. Protected blocks are atoms
 * (protected-blocks.ts). A body the editor cannot show exactly (markup outside its schema) keeps the
 * textarea, with a note saying why.
 */

/** Elements and their count, and the text: what a faithful load of the body must keep. */
function shapeOf(markup: string): string {
  const template = document.createElement('template');
  template.innerHTML = markup;
  const tags = [...template.content.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()).sort();
  const text = (template.content.textContent ?? '').replace(/\s+/g, ' ').trim();
  return `${tags.join(',')}|${text}|${template.content.querySelectorAll(PROTECTED_SELECTOR).length}`;
}

function enhance(textarea: HTMLTextAreaElement): void {
  const form = textarea.form;
  if (!form) return;
  const mount = document.createElement('div');
  mount.className = 'rich-editor';
  const editor = new Editor({
    element: mount,
    extensions: [StarterKit.configure({ link: { openOnClick: false } }), ProtectedBlock],
    content: textarea.value,
    editorProps: {
      attributes: {
        role: 'textbox',
        'aria-multiline': 'true',
        'aria-label': 'Body',
        class: 'rich-editor-content',
      },
    },
  });
  if (shapeOf(editor.getHTML()) !== shapeOf(textarea.value)) {
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
  document.querySelector('label[for="body"]')?.addEventListener('click', () => editor.commands.focus());
  form.dataset.richEditor = 'on';
  form.addEventListener('submit', () => {
    textarea.value = editor.getHTML();
  });
}

const textarea = document.querySelector<HTMLTextAreaElement>('textarea#body[data-rich-editor]');
if (textarea) enhance(textarea);
