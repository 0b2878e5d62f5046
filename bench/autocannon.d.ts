/** The part of autocannon 8's programmatic API the benchmark uses (the package ships no types). */
declare module 'autocannon' {
  export type Histogram = {
    average: number;
    mean: number;
    stddev: number;
    min: number;
    max: number;
    total: number;
    p50: number;
    p90: number;
    p97_5: number;
    p99: number;
    p99_9: number;
  };
  export type Result = {
    url: string;
    requests: Histogram & { sent: number };
    latency: Histogram;
    throughput: Histogram;
    duration: number;
    errors: number;
    timeouts: number;
    mismatches: number;
    non2xx: number;
    resets: number;
    start: Date;
    finish: Date;
    connections: number;
    statusCodeStats: Record<string, { count: number }>;
  };
  export type Options = {
    url: string;
    connections?: number;
    duration?: number;
    workers?: number;
    pipelining?: number;
    overallRate?: number;
    timeout?: number;
    headers?: Record<string, string>;
    warmup?: { connections?: number; duration?: number };
    /** Requests sent in turn; `setupRequest` may change each one (not with `workers`). */
    requests?: Array<{
      method?: string;
      path?: string;
      body?: string;
      setupRequest?: (request: RequestParams) => RequestParams;
    }>;
  };
  export type RequestParams = {
    method?: string;
    path?: string;
    body?: string;
    headers?: Record<string, string>;
  };
  type Instance = Promise<Result> & { on(event: string, listener: (...args: unknown[]) => void): void };
  function autocannon(options: Options): Instance;
  export default autocannon;
}
