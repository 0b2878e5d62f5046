import { buildEmbeddedTemplate } from './embedded-template.ts';

/*
 * `npm install`'s postinstall (and `npm run build:db-template`): makes the embedded database's migrated
 * cluster once (embedded-template.ts), so that a first start on a new DATA_DIR runs neither initdb nor
 * the migrations. A failure is said and the install goes on: a new DATA_DIR is then made by initdb and
 * migrated at its first start.
 */
try {
  const { folder, built } = await buildEmbeddedTemplate();
  console.log(`${built ? 'built' : 'kept'} ${folder}`);
} catch (error) {
  console.warn(
    `could not make the embedded database's template (${error instanceof Error ? error.message : String(error)}); ` +
      'a new DATA_DIR will be made by initdb and migrated at its first start',
  );
}
