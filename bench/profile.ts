import { Session } from 'node:inspector/promises';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The V8 CPU profile format (the parts read here). */
type ProfileNode = {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount?: number;
  children?: number[];
};
export type CpuProfile = { nodes: ProfileNode[]; startTime: number; endTime: number; samples?: number[] };

export type ProfileSummary = {
  /** Share of the main thread's samples spent doing something (not idle). */
  busy: number;
  /** Self time by the package or project file it was spent for (native and node-internal work charged to its caller), as a share of busy samples. */
  by_module: { where: string; share: number }[];
  /** The heaviest functions by self time, as a share of busy samples. */
  by_function: { fn: string; where: string; share: number }[];
};

/** Profiles this process's main thread (the server) while `work` runs. */
export async function profileWhile(work: () => Promise<void>): Promise<CpuProfile> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 200 });
    await session.post('Profiler.start');
    await work();
    const { profile } = await session.post('Profiler.stop');
    return profile;
  } finally {
    session.disconnect();
  }
}

/** Starts profiling this process's main thread now; `stop` ends it and hands over the profile. */
export async function startProfile(): Promise<{ stop(): Promise<CpuProfile> }> {
  const session = new Session();
  session.connect();
  try {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 200 });
    await session.post('Profiler.start');
  } catch (error) {
    session.disconnect();
    throw error;
  }
  return {
    async stop() {
      try {
        const { profile } = await session.post('Profiler.stop');
        return profile;
      } finally {
        session.disconnect();
      }
    },
  };
}

/**
 * Self time by function, and by module where work done by native code and node internals (socket
 * writes, buffers, timers) is charged to the package or project file that asked for it: a `writev`
 * under pg's query submission counts for `pg`.
 */
export function summarise(profile: CpuProfile, root: string, top = 15): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const owner = (node: ProfileNode): string => {
    const own = whereOf(node.callFrame.url, node.callFrame.functionName, root);
    if (own !== '(native)' && own !== 'node internals') return own;
    for (let id = parentOf.get(node.id); id !== undefined; id = parentOf.get(id)) {
      const up = byId.get(id);
      if (!up) break;
      const where = whereOf(up.callFrame.url, up.callFrame.functionName, root);
      if (where !== '(native)' && where !== 'node internals' && !where.startsWith('(')) return where;
    }
    return own;
  };
  let idle = 0;
  let busy = 0;
  const modules = new Map<string, number>();
  const functions = new Map<string, { fn: string; where: string; hits: number }>();
  for (const node of profile.nodes) {
    const hits = node.hitCount ?? 0;
    if (hits === 0) continue;
    const name = node.callFrame.functionName;
    if (name === '(idle)') {
      idle += hits;
      continue;
    }
    busy += hits;
    const charged = owner(node);
    modules.set(charged, (modules.get(charged) ?? 0) + hits);
    const where = whereOf(node.callFrame.url, name, root);
    const key = `${name || '(anonymous)'}@${where}:${node.callFrame.lineNumber + 1}<${charged}`;
    const entry = functions.get(key) ?? {
      fn: `${name || '(anonymous)'}:${node.callFrame.lineNumber + 1}`,
      where: where === charged ? where : `${where}, for ${charged}`,
      hits: 0,
    };
    entry.hits += hits;
    functions.set(key, entry);
  }
  const share = (hits: number): number => (busy === 0 ? 0 : Math.round((hits / busy) * 1000) / 1000);
  return {
    busy: idle + busy === 0 ? 0 : Math.round((busy / (idle + busy)) * 1000) / 1000,
    by_module: [...modules.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([where, hits]) => ({ where, share: share(hits) })),
    by_function: [...functions.values()]
      .sort((a, b) => b.hits - a.hits)
      .slice(0, top)
      .map((f) => ({ fn: f.fn, where: f.where, share: share(f.hits) })),
  };
}

function whereOf(url: string, functionName: string, root: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  if (url.startsWith('node:')) return 'node internals';
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  const nm = path.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const rest = path.slice(nm + '/node_modules/'.length).split('/');
    return rest[0]?.startsWith('@') ? `${rest[0]}/${rest[1]}` : (rest[0] ?? path);
  }
  return relative(root, path);
}
