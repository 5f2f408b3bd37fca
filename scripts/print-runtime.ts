// Printed first by `npm test` so a test log shows which Node actually ran it (the devDependency, not the machine's).
process.stdout.write(`runtime: node ${process.version} (${process.execPath})\n`);
