import type { Editor } from '@tiptap/core';
import { TextSelection } from '@tiptap/pm/state';
import { blocksIn, refusal } from './protected-blocks.ts';

/*
 * The rich editor's toolbar: headings, bold, italic, lists, quote, link, undo and redo, as the ARIA
 * toolbar pattern has it: one tab stop (the buttons' tabindex roves: the arrow keys, Home and End
 * move between them), each button named (`aria-label`), its shortcut in its tooltip, a toggle's state
 * in `aria-pressed`, an unavailable one `aria-disabled`; Alt+F10 in the text goes to it, Escape goes
 * back. A button acts on the editor's selection and leaves the focus on the toolbar. The link button opens a small dialog (`linkDialog`) that asks for
 * the address (http or https only); a selection holding a protected link is refused, saying why.
 */

type Tool = {
  id: string;
  /** What the button shows. */
  text: string;
  /** What it is called (`aria-label`). */
  label: string;
  /** Its keyboard shortcut, as `Mod-Alt-2` (Mod: Ctrl, or ⌘ on a Mac). */
  keys: string;
  run: () => void;
  /** For a toggle: whether it is on at the selection. */
  active?: () => boolean;
  /** Whether it can act now (undo with nothing to undo cannot). */
  can?: () => boolean;
};

const MAC = /Mac|iPhone|iPad/.test(navigator.platform);

/** A shortcut as the person's keyboard says it: `Ctrl+Alt+2`, or `⌘⌥2` on a Mac. */
export function shortcut(keys: string): string {
  const mac: Record<string, string> = { Mod: '⌘', Alt: '⌥', Shift: '⇧' };
  const other: Record<string, string> = { Mod: 'Ctrl', Alt: 'Alt', Shift: 'Shift' };
  const parts = keys.split('-').map((k) => (MAC ? mac : other)[k] ?? k.toUpperCase());
  return MAC ? parts.join('') : parts.join('+');
}

export function toolbar(editor: Editor, openLink: () => void): HTMLElement {
  const chain = () => editor.chain();
  const tools: Tool[] = [
    {
      id: 'h2',
      text: 'Heading 2',
      label: 'Heading 2',
      keys: 'Mod-Alt-2',
      run: () => chain().toggleHeading({ level: 2 }).run(),
      active: () => editor.isActive('heading', { level: 2 }),
    },
    {
      id: 'h3',
      text: 'Heading 3',
      label: 'Heading 3',
      keys: 'Mod-Alt-3',
      run: () => chain().toggleHeading({ level: 3 }).run(),
      active: () => editor.isActive('heading', { level: 3 }),
    },
    {
      id: 'bold',
      text: 'B',
      label: 'Bold',
      keys: 'Mod-b',
      run: () => chain().toggleBold().run(),
      active: () => editor.isActive('bold'),
    },
    {
      id: 'italic',
      text: 'I',
      label: 'Italic',
      keys: 'Mod-i',
      run: () => chain().toggleItalic().run(),
      active: () => editor.isActive('italic'),
    },
    {
      id: 'bullets',
      text: '• Bulleted list',
      label: 'Bulleted list',
      keys: 'Mod-Shift-8',
      run: () => chain().toggleBulletList().run(),
      active: () => editor.isActive('bulletList'),
    },
    {
      id: 'numbers',
      text: 'Numbered list',
      label: 'Numbered list',
      keys: 'Mod-Shift-7',
      run: () => chain().toggleOrderedList().run(),
      active: () => editor.isActive('orderedList'),
    },
    {
      id: 'quote',
      text: 'Quote',
      label: 'Quote',
      keys: 'Mod-Shift-b',
      run: () => chain().toggleBlockquote().run(),
      active: () => editor.isActive('blockquote'),
    },
    {
      id: 'link',
      text: 'Link…',
      label: 'Link: add, change or remove',
      keys: 'Mod-k',
      run: openLink,
      active: () => editor.isActive('link'),
    },
    {
      id: 'undo',
      text: 'Undo',
      label: 'Undo',
      keys: 'Mod-z',
      run: () => chain().undo().run(),
      can: () => editor.can().undo(),
    },
    {
      id: 'redo',
      text: 'Redo',
      label: 'Redo',
      keys: 'Mod-Shift-z',
      run: () => chain().redo().run(),
      can: () => editor.can().redo(),
    },
  ];

  const bar = document.createElement('div');
  bar.className = 'rich-toolbar';
  bar.setAttribute('role', 'toolbar');
  bar.setAttribute('aria-label', 'Formatting');
  bar.setAttribute('aria-controls', 'rich-editor-content');
  const buttons = tools.map((tool, index) => {
    const button = document.createElement('button');
    button.type = 'button';
    button.id = `tool-${tool.id}`;
    button.textContent = tool.text;
    button.setAttribute('aria-label', tool.label);
    button.title = `${tool.label} (${shortcut(tool.keys)})`;
    button.setAttribute('aria-keyshortcuts', shortcut(tool.keys).replace('Ctrl', 'Control'));
    button.tabIndex = index === 0 ? 0 : -1;
    if (tool.active) button.setAttribute('aria-pressed', 'false');
    // The editor keeps its selection: a click on a button does not take the focus from it.
    button.addEventListener('mousedown', (event) => event.preventDefault());
    button.addEventListener('click', () => {
      if (button.getAttribute('aria-disabled') === 'true') return;
      seenSelection(editor);
      tool.run();
      refresh();
    });
    bar.append(button);
    return button;
  });

  function refresh(): void {
    tools.forEach((tool, i) => {
      const button = buttons[i];
      if (!button) return;
      if (tool.active) button.setAttribute('aria-pressed', String(tool.active()));
      if (tool.can) button.setAttribute('aria-disabled', String(!tool.can()));
    });
  }

  function move(to: number): void {
    const count = buttons.length;
    const next = buttons[((to % count) + count) % count];
    if (!next) return;
    for (const b of buttons) b.tabIndex = b === next ? 0 : -1;
    next.focus();
  }

  bar.addEventListener('keydown', (event) => {
    const at = buttons.indexOf(document.activeElement as HTMLButtonElement);
    if (at < 0) return;
    if (event.key === 'Escape') {
      event.preventDefault();
      editor.view.focus();
      return;
    }
    const to =
      event.key === 'ArrowRight'
        ? at + 1
        : event.key === 'ArrowLeft'
          ? at - 1
          : event.key === 'Home'
            ? 0
            : event.key === 'End'
              ? buttons.length - 1
              : null;
    if (to === null) return;
    event.preventDefault();
    move(to);
  });
  // Alt+F10 in the text goes to the toolbar, Escape in the toolbar back to the text (as in other editors).
  editor.view.dom.addEventListener('keydown', (event) => {
    if (event.key !== 'F10' || !event.altKey) return;
    event.preventDefault();
    seenSelection(editor);
    buttons.find((b) => b.tabIndex === 0)?.focus();
  });
  editor.on('transaction', refresh);
  refresh();
  return bar;
}

/**
 * Makes the editor's selection the one the page shows in it. The editor reads the page's selection on
 * `selectionchange`, but only while it has the focus: a selection made just before the focus went to
 * the toolbar may not have been read. A button acts on what the person sees selected.
 */
function seenSelection(editor: Editor): void {
  const { view } = editor;
  const shown = document.getSelection();
  if (!shown?.anchorNode || !shown.focusNode || !view.dom.contains(shown.anchorNode)) return;
  if (!(view.state.selection instanceof TextSelection)) return;
  try {
    const anchor = view.posAtDOM(shown.anchorNode, shown.anchorOffset);
    const head = view.posAtDOM(shown.focusNode, shown.focusOffset);
    const { selection } = view.state;
    if (anchor === selection.anchor && head === selection.head) return;
    view.dispatch(view.state.tr.setSelection(TextSelection.create(view.state.doc, anchor, head)));
  } catch {
    // A point the editor cannot place (inside a protected block): its own selection stands.
  }
}

/** The address a link may have: http or https, whole. */
export function linkAddress(value: string): string | null {
  try {
    const url = new URL(value.trim());
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : null;
  } catch {
    return null;
  }
}

/**
 * The link dialog: asks for the address of the link at the selection (a new one, or the one the
 * cursor is in), checks it, and sets it; or removes the link. A selection holding a protected link is
 * refused before it opens (`say`). Returns the function that opens it.
 */
export function linkDialog(editor: Editor, after: Element, say: (message: string) => void): () => void {
  const dialog = document.createElement('dialog');
  dialog.id = 'link-dialog';
  dialog.className = 'link-dialog';
  dialog.setAttribute('aria-labelledby', 'link-dialog-title');
  const form = document.createElement('form');
  form.method = 'dialog';
  const title = document.createElement('h2');
  title.id = 'link-dialog-title';
  const label = document.createElement('label');
  label.htmlFor = 'link-href';
  label.textContent = 'Address (http:// or https://)';
  const input = document.createElement('input');
  input.type = 'url';
  input.id = 'link-href';
  input.required = true;
  input.setAttribute('aria-describedby', 'link-error');
  const error = document.createElement('p');
  error.id = 'link-error';
  error.className = 'error';
  error.setAttribute('role', 'alert');
  error.hidden = true;
  const actions = document.createElement('div');
  actions.className = 'actions';
  const save = button('Save link', 'submit', 'primary');
  const remove = button('Remove link', 'button');
  const cancel = button('Cancel', 'button');
  actions.append(save, remove, cancel);
  form.append(title, label, input, error, actions);
  dialog.append(form);
  after.after(dialog);

  const close = (): void => {
    dialog.close();
    editor.view.focus();
  };
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const href = linkAddress(input.value);
    if (!href) {
      error.textContent =
        'Give an address that starts with http:// or https://, such as https://example.com/page.';
      error.hidden = false;
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    if (editor.state.selection.empty && !editor.isActive('link')) {
      editor
        .chain()
        .insertContent({ type: 'text', text: href, marks: [{ type: 'link', attrs: { href } }] })
        .run();
    } else {
      editor.chain().extendMarkRange('link').setLink({ href }).run();
    }
    close();
  });
  remove.addEventListener('click', () => {
    editor.chain().extendMarkRange('link').unsetLink().run();
    close();
  });
  cancel.addEventListener('click', close);

  return () => {
    seenSelection(editor);
    const { from, to } = editor.state.selection;
    const blocks = blocksIn(editor.state.doc, from, to);
    if (blocks.length > 0) {
      say(
        refusal(
          blocks.map((b) => b.node),
          'The link tool cannot change this',
        ),
      );
      return;
    }
    const current = editor.isActive('link') ? String(editor.getAttributes('link').href ?? '') : '';
    title.textContent = current ? 'Change the link' : 'Add a link';
    input.value = current;
    remove.hidden = !current;
    error.hidden = true;
    input.removeAttribute('aria-invalid');
    dialog.showModal();
    input.focus();
  };
}

function button(text: string, type: 'submit' | 'button', className?: string): HTMLButtonElement {
  const b = document.createElement('button');
  b.type = type;
  b.textContent = text;
  if (className) b.className = className;
  return b;
}
