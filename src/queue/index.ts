export {
  type RateLimiter,
  type ExponentialBackoffOptions,
  ExponentialFailureRateLimiter,
  DEFAULT_BASE_DELAY_MS,
  DEFAULT_MAX_DELAY_MS,
} from './rate-limiter.ts';
export {
  WorkQueue,
  type WorkQueueOptions,
  type WorkQueueMetrics,
  type ShutDownOptions,
  type ShutDownResult,
} from './queue.ts';
export {
  runWorkers,
  TerminalError,
  isTerminalError,
  type Reconciler,
  type ReconcileResult,
  type ReconcileContext,
  type ReconcileOutcome,
  type ReconcileMetrics,
  type RunWorkersOptions,
  type WorkerPool,
  serverRetryDelayMs,
} from './runner.ts';
export { startResync, type Resync, type ResyncOptions } from './resync.ts';
export { serveQueue, type ServeOptions } from './serve.ts';
