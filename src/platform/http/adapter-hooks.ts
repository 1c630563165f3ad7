import type { FastifyAdapter } from '@nestjs/platform-fastify';

type Hooks = Record<string, unknown[]>;

/**
 * Removes the onResponse hook that Nest's FastifyAdapter adds when it is constructed. That hook only forwards to a
 * hook given to `setOnResponseHook`, which Nest never calls, yet an onResponse hook makes Fastify put two listeners on
 * every response and run the hook chain when it finishes. The service has no onResponse hook of its own (its access
 * line and request metric are written in its onSend hook), so with this one gone Fastify does neither. Call it right
 * after constructing the adapter, before any route is registered. `setOnResponseHook` then throws, so nothing can rely
 * on the removed hook without noticing; and a Nest version that adds other hooks makes this throw at startup.
 */
export function dropAdapterResponseHook(adapter: FastifyAdapter): void {
  const instance = adapter.getInstance();
  // Fastify adds a hook once the plugins queued before it have loaded, and gives each route its hooks when it becomes
  // ready: the adapter's hook is in place when this runs (queued after it), and no route has copied it yet.
  void instance.after(() => {
    const store = instance as unknown as Record<symbol, Hooks | undefined>;
    const key = Object.getOwnPropertySymbols(store).find((s) => s.description === 'fastify.hooks');
    const hooks = key === undefined ? undefined : store[key]?.onResponse;
    const nests = (fn: unknown) => typeof fn === 'function' && fn.toString().includes('onResponseHook');
    if (!Array.isArray(hooks) || hooks.length !== 1 || !nests(hooks[0])) {
      throw new Error("dropAdapterResponseHook: expected exactly the Nest adapter's onResponse hook (a Nest or Fastify upgrade changed it)");
    }
    hooks.length = 0;
  });
  adapter.setOnResponseHook = () => {
    throw new Error('setOnResponseHook is not supported: the service removes the adapter onResponse hook (see dropAdapterResponseHook)');
  };
}
