export { createSources, type Sources } from './kinds.ts';
export * from './indexes.ts';
