// The two RxJS values this project uses, from their own modules. Under Node, esbuild bundles `import … from 'rxjs'`
// from the package's CommonJS build (its exports map lists "node" first), which it cannot tree-shake: all of RxJS
// would be loaded for these two. Both paths are in the package's exports map ("./internal/*") and typed; types
// still come from 'rxjs'. docs/architecture.md (Package entry points) has what the public entry would cost.
export { merge } from 'rxjs/internal/observable/merge';
export { Subject } from 'rxjs/internal/Subject';
