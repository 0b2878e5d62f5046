// The Copy buttons of a secret shown once (connect-webhooks.ts secretField), served at /web/copy.js as it
// is written here, no build: each `button[data-copy]` is shown and copies the value of the field its
// attribute names, then says so in the element its `data-copy-status` names. Without this script the
// buttons stay hidden, and the field, read-only, is selected and copied by hand.
for (const button of document.querySelectorAll('button[data-copy]')) {
  const field = document.getElementById(button.dataset.copy ?? '');
  const status = document.getElementById(button.dataset.copyStatus ?? '');
  if (!(field instanceof HTMLInputElement)) continue;
  button.hidden = false;
  button.addEventListener('click', async () => {
    field.focus();
    field.select();
    let copied = false;
    try {
      await navigator.clipboard.writeText(field.value);
      copied = true;
    } catch {
      // No clipboard API here (a page over plain http on another host): the browser's own copy of the selection.
      copied = document.execCommand('copy');
    }
    if (status)
      status.textContent = copied ? 'Copied.' : 'Not copied: the text is selected, copy it with Ctrl+C (⌘C).';
  });
}
