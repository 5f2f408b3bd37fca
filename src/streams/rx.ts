// The two RxJS values this project uses, imported from their own modules. `import … from 'rxjs'` loads all of RxJS
// (about 220 CommonJS modules under Node: every operator, scheduler and observable factory), which costs the
// controller about 10 MiB of resident memory and start-up time for code it never runs; these paths load about 50.
// Both are in the package's exports map ("./internal/*"), typed, and have been stable across 7.x; types still come
// from 'rxjs' (erased at build time, so they load nothing).
export { merge } from 'rxjs/internal/observable/merge';
export { Subject } from 'rxjs/internal/Subject';
