/*
 * The editor's revisions panel as a drawer (as Directus has it): the page lists the article's latest
 * revisions in a <details> below the form (`#revisions`, usable without JavaScript); this script puts
 * that list in a modal <dialog> at the side of the window (the whole width on a phone) and a
 * "Revisions" button beside Save that opens it. The dialog is labelled by its heading; Escape or its
 * Close button closes it and the focus goes back to the button. Each revision links to its page, to
 * the compare page against the current one and to Restore's confirmation page. A save made in place
 * replaces the list (`#revisions-list`) with the server's new one.
 */

export function revisionsDrawer(form: HTMLFormElement): void {
  const details = document.querySelector<HTMLDetailsElement>('details#revisions');
  const list = details?.querySelector('#revisions-list');
  if (!details || !list) return;
  const dialog = document.createElement('dialog');
  dialog.id = 'revisions-drawer';
  dialog.className = 'drawer';
  dialog.setAttribute('aria-labelledby', 'revisions-drawer-heading');
  const head = document.createElement('div');
  head.className = 'drawer-head';
  const heading = document.createElement('h2');
  heading.id = 'revisions-drawer-heading';
  heading.textContent = 'Revisions';
  const close = document.createElement('button');
  close.type = 'button';
  close.id = 'revisions-close';
  close.textContent = 'Close';
  close.setAttribute('aria-label', 'Close revisions');
  head.append(heading, close);
  dialog.append(head, list);
  details.replaceWith(dialog);

  const open = document.createElement('button');
  open.type = 'button';
  open.id = 'revisions-button';
  open.textContent = 'Revisions';
  open.setAttribute('aria-haspopup', 'dialog');
  open.setAttribute('aria-controls', dialog.id);
  open.setAttribute('aria-expanded', 'false');
  const check = form.querySelector('.actions button[formaction]');
  if (check) check.after(open);
  else form.querySelector('.actions')?.append(open);

  open.addEventListener('click', () => {
    dialog.showModal();
    open.setAttribute('aria-expanded', 'true');
    close.focus();
  });
  close.addEventListener('click', () => dialog.close());
  // A click on the backdrop (outside the drawer's box) closes it too.
  dialog.addEventListener('click', (event) => {
    if (event.target !== dialog) return;
    const box = dialog.getBoundingClientRect();
    const { clientX: x, clientY: y } = event;
    if (x < box.left || x > box.right || y < box.top || y > box.bottom) dialog.close();
  });
  // Escape closes a modal dialog by itself; either way the focus goes back to the button.
  dialog.addEventListener('close', () => {
    open.setAttribute('aria-expanded', 'false');
    open.focus();
  });
}
