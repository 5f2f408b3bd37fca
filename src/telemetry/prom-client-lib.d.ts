// prom-client's lib/ files have no declarations of their own; prom.ts gives each its type from 'prom-client'.
declare module 'prom-client/lib/*.js' {
  const exported: unknown;
  export default exported;
}
