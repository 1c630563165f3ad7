import { FastifyAdapter } from '@nestjs/platform-fastify';
import { dropAdapterResponseHook } from './adapter-hooks';

/** The onResponse hooks a Fastify instance gives its routes once ready. */
async function responseHooks(adapter: FastifyAdapter): Promise<unknown[]> {
  const instance = adapter.getInstance();
  instance.get('/x', () => 'ok');
  await instance.ready();
  const store = instance as unknown as Record<symbol, Record<string, unknown[]>>;
  const key = Object.getOwnPropertySymbols(store).find((s) => s.description === 'fastify.hooks')!;
  const seen = [...store[key].onResponse];
  const res = await instance.inject({ method: 'GET', url: '/x' });
  expect(res.body).toBe('ok');
  await instance.close();
  return seen;
}

describe(dropAdapterResponseHook.name, () => {
  it("removes the Nest adapter's onResponse hook, which Fastify would otherwise run for every request", async () => {
    expect(await responseHooks(new FastifyAdapter())).toHaveLength(1);
    const adapter = new FastifyAdapter();
    dropAdapterResponseHook(adapter);
    expect(await responseHooks(adapter)).toHaveLength(0);
  });

  it('refuses a response hook afterwards rather than ignoring it', () => {
    const adapter = new FastifyAdapter();
    dropAdapterResponseHook(adapter);
    expect(() => adapter.setOnResponseHook(() => undefined)).toThrow(/not supported/);
  });
});
