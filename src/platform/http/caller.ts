/** The four kinds of authenticated caller, plus `anonymous` for public ops endpoints. */
export type CallerKind = 'user' | 'merchant' | 'service' | 'admin';

/**
 * Who is calling. `id` is the account id (`sub`) for app users, the merchant
 * id, the service name, or the admin key name. Set by `AuthGuard` on the
 * request; controllers read it with `@CurrentCaller()`.
 */
export interface Caller {
  kind: CallerKind | 'anonymous';
  id: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    caller?: Caller;
    rawBody?: Buffer;
  }
}
