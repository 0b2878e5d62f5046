import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from '../../reliability/outage-servers.ts';
import { ROOT, run } from './process.ts';

/*
 * The compose deployment of containers/ (replicas behind HAProxy, workers, PostgreSQL, Redis), started
 * for a test under a project name of its own and removed after it, with its volumes.
 *
 * It needs a container engine (CONTAINER_ENGINE, default `docker`), a compose command
 * (CONTAINER_COMPOSE, else `docker-compose` or `docker compose`, whichever answers) and the images
 * (containers/build.sh). composeAvailable says which is missing.
 */

export const IMAGES = [
  'content-service:latest',
  'content-service/postgres:15',
  'content-service/redis:7',
  'content-service/haproxy:latest',
];

type Run = Awaited<ReturnType<typeof run>>;

function engine(): string {
  return process.env.CONTAINER_ENGINE || 'docker';
}

/** Runs the engine's CLI; the whole environment goes with it (DOCKER_HOST and the like). */
export function engineRun(args: string[], input?: string): Promise<Run> {
  return run(engine(), args, process.env, input);
}

async function composeCommand(): Promise<string[] | undefined> {
  const given = process.env.CONTAINER_COMPOSE;
  const candidates = given ? [given.split(' ')] : [['docker-compose'], [engine(), 'compose']];
  for (const candidate of candidates) {
    const [command = '', ...args] = candidate;
    const version = await run(command, [...args, 'version'], process.env).catch(() => undefined);
    if (version?.code === 0) return candidate;
  }
  return undefined;
}

export type Availability = { ok: true; compose: string[] } | { ok: false; reason: string };

/** Whether the stack can start here: an engine that answers, a compose command and the images. */
export async function composeAvailable(): Promise<Availability> {
  const info = await engineRun(['info', '--format', '{{.ServerVersion}}']).catch(
    (err: Error): Run => ({ code: 1, stdout: '', stderr: err.message }),
  );
  if (info.code !== 0) return { ok: false, reason: `no container engine answers (${engine()} info)` };
  const compose = await composeCommand();
  if (!compose) return { ok: false, reason: 'no compose command (docker-compose, docker compose)' };
  const missing: string[] = [];
  for (const image of IMAGES) {
    if ((await engineRun(['image', 'inspect', image])).code !== 0) missing.push(image);
  }
  if (missing.length > 0) {
    return { ok: false, reason: `images not built (containers/build.sh): ${missing.join(', ')}` };
  }
  return { ok: true, compose };
}

export type Stack = {
  project: string;
  /** The load balancer, as the host reaches it. */
  url: string;
  /** The stack's PostgreSQL, published on a loopback port for the test's own checks. */
  databaseUrl: string;
  /** The address the containers reach the host on (their network's gateway). */
  hostAddress: string;
  /** The database password the stack was started with. */
  password: string;
  /** `<compose> -p <project> -f ... <args>`, with `env` added to what compose reads. */
  compose(args: string[], env?: Record<string, string>): Promise<Run>;
  /** A command in the first replica of the service `app`, with `input` on its standard input. */
  exec(args: string[], input?: string): Promise<Run>;
  /** The ids of a service's running containers. */
  containers(service: string): Promise<string[]>;
  /** SIGKILL to one container. */
  kill(container: string): Promise<void>;
  /** A container's log (stdout and stderr). */
  logs(container: string): Promise<string>;
  /**
   * One of containers/'s scripts (`upgrade.sh`, `backup.sh`, ...) as an operator runs it, on this
   * stack: compose's own COMPOSE_PROJECT_NAME and COMPOSE_FILE name it, plus `env`.
   */
  script(name: string, args: string[], env?: Record<string, string>): Promise<Run>;
  /** The addresses HAProxy has up in its backend `app` (its runtime API). */
  upAddresses(): Promise<string[]>;
  /** A container's addresses on the stack's network. */
  addressOf(container: string): Promise<string>;
  /** Stops and removes everything, volumes included. */
  down(): Promise<void>;
};

export type StackOptions = {
  compose: string[];
  replicas: number;
  workers: number;
  /** Added to the environment of the replicas and workers. */
  env?: Record<string, string>;
};

/** Starts the stack and waits until every replica answers /readyz and the load balancer does too. */
export async function startStack(options: StackOptions): Promise<Stack> {
  const project = `cs-test-${process.pid}-${Date.now().toString(36)}`;
  const dir = await mkdtemp(join(tmpdir(), 'cs-compose-'));
  const lbPort = await freePort();
  // A fixed port, so that a restarted PostgreSQL is found where it was.
  const pgPort = await freePort();
  const password = `pw${Date.now().toString(36)}`;
  const env = Object.entries(options.env ?? {})
    .map(([k, v]) => `      ${k}: ${JSON.stringify(v)}\n`)
    .join('');
  // The test's additions: PostgreSQL published on loopback (the stack itself publishes only the load
  // balancer), and the environment asked for.
  const override = join(dir, 'test.yaml');
  await writeFile(
    override,
    `version: "3.8"\nservices:\n  postgres:\n    ports: ["127.0.0.1:${pgPort}:5432"]\n` +
      (env ? `  app:\n    environment:\n${env}  worker:\n    environment:\n${env}` : ''),
  );
  const [command = '', ...prefix] = options.compose;
  // What compose reads from the operator's shell.
  const composeEnv = {
    ...process.env,
    LB_PORT: String(lbPort),
    PUBLIC_URL: `http://127.0.0.1:${lbPort}`,
    POSTGRES_PASSWORD: password,
    APP_REPLICAS: String(options.replicas),
    DEMO_ON_FIRST_START: 'false',
    LOG_LEVEL: 'info',
  };
  const files = [join(ROOT, 'containers/compose.yaml'), override];
  const compose = (args: string[], env: Record<string, string> = {}): Promise<Run> =>
    run(command, [...prefix, '-p', project, ...files.flatMap((f) => ['-f', f]), ...args], {
      ...composeEnv,
      ...env,
    });
  const containers = async (service: string): Promise<string[]> => {
    const r = await compose(['ps', '-q', service]);
    return r.stdout.split('\n').filter((line) => line.trim() !== '');
  };
  const down = async (): Promise<void> => {
    // Every profile's services too (a replica, Prometheus), so that nothing outlives the stack.
    await compose(['--profile', 'replica', '--profile', 'metrics', 'down', '--volumes', '--timeout', '5']);
    await rm(dir, { recursive: true, force: true });
  };

  try {
    const up = await compose([
      'up',
      '-d',
      '--scale',
      `app=${options.replicas}`,
      '--scale',
      `worker=${options.workers}`,
    ]);
    if (up.code !== 0) throw new Error(`compose up failed:\n${up.stderr}`);
    const network = await engineRun([
      'network',
      'inspect',
      `${project}_default`,
      '--format',
      '{{range .IPAM.Config}}{{.Gateway}}{{end}}',
    ]);
    const hostAddress = network.stdout.trim();
    if (network.code !== 0 || hostAddress === '') throw new Error(`no gateway for ${project}_default`);
    const stack: Stack = {
      project,
      url: `http://127.0.0.1:${lbPort}`,
      databaseUrl: `postgres://postgres:${password}@127.0.0.1:${pgPort}/content`,
      hostAddress,
      password,
      compose,
      containers,
      exec: async (args, input) => {
        const [replica] = await containers('app');
        if (!replica) throw new Error('no replica of app runs');
        return engineRun(['exec', '-i', '-e', 'LOG_LEVEL=warn', replica, ...args], input);
      },
      kill: async (container) => {
        const r = await engineRun(['kill', '--signal', 'KILL', container]);
        if (r.code !== 0) throw new Error(`kill ${container}: ${r.stderr}`);
      },
      logs: async (container) => {
        const r = await engineRun(['logs', container]);
        return r.stdout + r.stderr;
      },
      script: (name, args, env = {}) =>
        run(join(ROOT, 'containers', name), args, {
          ...composeEnv,
          COMPOSE_PROJECT_NAME: project,
          COMPOSE_FILE: files.join(':'),
          CONTAINER_COMPOSE: options.compose.join(' '),
          CONTAINER_ENGINE: engine(),
          ...env,
        }),
      upAddresses: async () => {
        const [lb] = await containers('lb');
        if (!lb) return [];
        const r = await engineRun(
          ['exec', '-i', lb, 'socat', 'stdio', '/var/run/haproxy/admin.sock'],
          'show servers state app\n',
        );
        // `show servers state`: a version line, a header, then be_id be_name srv_id srv_name srv_addr srv_op_state ...
        return r.stdout
          .split('\n')
          .slice(2)
          .map((line) => line.split(' '))
          .filter((fields) => fields[5] === '2')
          .map((fields) => fields[4] as string);
      },
      addressOf: async (container) => {
        const r = await engineRun([
          'inspect',
          '--format',
          '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}',
          container,
        ]);
        return r.stdout.trim();
      },
      down,
    };
    await waitUntilServing(stack, options.replicas);
    return stack;
  } catch (err) {
    await down();
    throw err;
  }
}

/** Each replica's /readyz from inside it (Node is in the image; no curl), then the load balancer's. */
async function waitUntilServing(stack: Stack, replicas: number): Promise<void> {
  const probe =
    "fetch('http://127.0.0.1:3000/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))";
  const deadline = Date.now() + 180_000;
  for (;;) {
    const ids = await stack.containers('app');
    const ready =
      ids.length === replicas &&
      (await Promise.all(ids.map((id) => engineRun(['exec', id, 'node', '-e', probe])))).every(
        (r) => r.code === 0,
      ) &&
      (await fetch(`${stack.url}/readyz`)
        .then((r) => r.ok)
        .catch(() => false));
    if (ready) return;
    if (Date.now() > deadline) {
      const ps = await stack.compose(['ps']);
      throw new Error(`the stack did not become ready:\n${ps.stdout}`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}
