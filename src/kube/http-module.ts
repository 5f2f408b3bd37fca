// node:http for the values this project uses (Agent, request, createServer), fetched with process.getBuiltinModule
// instead of an ES import. An ES import of node:http materialises every export of its namespace, and since Node 22
// some are lazy getters for undici's WebSocket, EventSource and friends: the import alone loads undici, http2, zlib
// and web streams, resident memory for code the controller never uses. Types still come from `import type`.
import type * as Http from 'node:http';

export function httpModule(): typeof Http {
  return process.getBuiltinModule('node:http');
}
