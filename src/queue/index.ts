export { WorkQueue, type WorkQueueMetrics } from './queue.ts';
export { TerminalError, type ReconcileResult, type ReconcileContext, type ReconcileMetrics } from './runner.ts';
