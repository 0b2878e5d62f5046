/** An edit's preview as the API and preview_article_edit answer it (apps/application/articles.ts `ArticlePreview`). */
export type Preview = {
  article_id: string;
  base_revision: number;
  would_change: boolean;
  title: string;
  body: string;
  word_count: number;
  sanitized: { path: string; removed: string; reason: string }[];
  protected_links: { ok: boolean; errors: { id: string; change: string }[] };
  diff: { op: string; text: string }[] | null;
};
