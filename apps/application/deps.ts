import type { Db } from '../../infra/db/schema.ts';
import type { JobSink } from '../../infra/jobs/queue.ts';
import type { FetchImage } from '../../infra/media/fetch.ts';
import type { MediaStore } from '../../infra/media/store.ts';
import type { EditLimit } from './call.ts';
import type { Commands } from './commands/index.ts';

/** What the use cases are given by a composition root (apps/server/app.ts, the CLI, the tests). */
export type ApplicationDeps = {
  db: Db;
  commands: Commands;
  /** The service's public address: stored images are referred to under it. */
  publicUrl: string;
  /** The clock of periods such as this_month. */
  now: () => Date;
  editLimit: EditLimit;
  media: MediaStore;
  fetchImage: FetchImage;
  /**
   * Where use cases add background jobs (a webhook delivery to send now). Without one, the workers'
   * sweep finds the work in the database a little later.
   */
  jobs?: JobSink;
  /**
   * Private addresses outgoing requests may reach besides public ones (OUTBOUND_ALLOW_NETWORKS): a
   * webhook URL whose host is such an address may be http. Default: none.
   */
  allowOutbound?: (ip: string) => boolean;
  /** Where failures nobody awaits are reported (an activity record that could not be stored). */
  log?: { error(obj: object, msg: string): void };
};
