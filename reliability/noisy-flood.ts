import { parentPort, workerData } from 'node:worker_threads';
import { Agent, request } from 'undici';

/*
 * The noisy account of scenario 6, in a worker thread of its own: 32 closed loops of edits and reads
 * as fast as the server answers, for `ms` milliseconds. Its own event loop keeps the flood's answers
 * out of the quiet client's timings (both would otherwise wait in one event loop).
 */

type FloodData = {
  url: string;
  apiKey: string;
  siteId: string;
  articles: string[];
  ms: number;
  loops: number;
};

const { url, apiKey, siteId, articles, ms, loops } = workerData as FloodData;
const agent = new Agent({ connections: loops });
const statuses: Record<string, number> = {};
const end = performance.now() + ms;
let n = 0;
await Promise.all(
  Array.from({ length: loops }, async () => {
    while (performance.now() < end) {
      const j = n++;
      const edit = j % 2 === 0;
      const res = await request(
        edit
          ? `${url}/api/v1/articles/${articles[j % articles.length]}`
          : `${url}/api/v1/sites/${siteId}/articles?from=2000-01-01&to=2100-01-01`,
        {
          method: edit ? 'PUT' : 'GET',
          dispatcher: agent,
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          ...(edit ? { body: JSON.stringify({ title: `Noise ${j}` }) } : {}),
        },
      );
      await res.body.text();
      statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
    }
  }),
);
await agent.close();
parentPort?.postMessage(statuses);
