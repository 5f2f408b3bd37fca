// Imported first by main.ts, so it runs before any dependency is evaluated: on an older Node,
// @kubernetes/client-node's HTTP stack fails at import with a stack trace that names none of this. One line instead.
// (ES modules are evaluated in import order; a test runs the built CLI on the machine's older Node to keep it so.)
const NEEDED_MAJOR = 24;
const major = Number(process.versions.node.split('.')[0]);
if (!(major >= NEEDED_MAJOR)) {
  process.stderr.write(
    `persistent-ips: Node.js ${NEEDED_MAJOR} or newer is needed; this is ${process.version} (${process.execPath}). In a clone, run it through npm (npm start, npm run …), which uses the node@${NEEDED_MAJOR} devDependency.\n`,
  );
  process.exit(1);
}
export {};
