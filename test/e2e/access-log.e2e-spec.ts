import { useServicesOnOwnRedis } from '../support/service-process';
import { CREDS, userToken } from '../support/test-app';

interface Line {
  level: number;
  msg: string;
  requestId?: string;
  method?: string;
  url?: string;
  route?: string;
  statusCode?: number;
  responseTimeMs?: number;
  caller?: string;
}

const lines = (out: string): Line[] =>
  out
    .split('\n')
    .filter((l) => l.startsWith('{"level":'))
    .map((l) => JSON.parse(l) as Line);

/** The built service's stdout at LOG_LEVEL=info: one access line per request, whatever the answer. */
describe('the access log of the built service', () => {
  const env = useServicesOnOwnRedis();

  it('writes exactly one line per request, with its request id, route, status, time and caller', async () => {
    const svc = await env.start('acl', undefined, { LOG_LEVEL: 'info' });
    const json = { 'content-type': 'application/json' };
    const asUser = { ...json, authorization: `Bearer ${userToken('acc_log')}` };
    const sent: { path: string; init: RequestInit & { method: string }; status: number; route: string | undefined; caller?: string }[] = [
      {
        path: '/diagnostics/touch',
        init: { method: 'POST', headers: asUser, body: '{"label":"a"}' },
        status: 200,
        route: '/diagnostics/touch',
        caller: 'user:acc_log',
      },
      {
        path: '/diagnostics/touch',
        init: { method: 'POST', headers: asUser, body: '{"bad":1}' },
        status: 400,
        route: '/diagnostics/touch',
        caller: 'user:acc_log',
      },
      {
        path: '/diagnostics/touch',
        init: { method: 'POST', headers: json, body: '{"label":"a"}' },
        status: 401,
        route: '/diagnostics/touch',
        caller: undefined,
      },
      {
        path: '/diagnostics/touch',
        init: { method: 'POST', headers: { ...asUser, 'content-type': 'text/plain' }, body: 'x' },
        status: 415,
        route: '/diagnostics/touch',
        caller: undefined,
      },
      { path: '/nowhere', init: { method: 'GET' }, status: 404, route: undefined, caller: undefined },
      {
        path: '/metrics',
        init: { method: 'GET', headers: { 'x-admin-key': CREDS.adminKey } },
        status: 200,
        route: '/metrics',
        caller: `admin:${CREDS.adminName}`,
      },
    ];
    const ids: string[] = [];
    for (const s of sent) {
      const res = await svc.call(s.path, s.init);
      await res.arrayBuffer();
      expect(res.status).toBe(s.status);
      ids.push(res.headers.get('x-request-id') ?? '');
    }
    // Lines leave in batches, at most a few milliseconds after their request.
    await new Promise((r) => setTimeout(r, 200));
    // Only our requests (the readiness probes of startServiceProcess have lines too), each exactly once.
    const access = lines(svc.output()).filter((l) => l.requestId !== undefined && ids.includes(l.requestId));
    expect(access.map((l) => l.requestId)).toEqual(ids);
    access.forEach((l, i) => {
      const s = sent[i];
      expect(l).toMatchObject({ url: s.path, method: s.init.method, statusCode: s.status, msg: s.status < 400 ? 'request completed' : 'request rejected' });
      expect(l.route).toBe(s.route);
      if ('caller' in s) expect(l.caller).toBe(s.caller);
      expect(l.level).toBe(s.status < 400 ? 30 : 40);
      expect(typeof l.responseTimeMs).toBe('number');
      expect(l.responseTimeMs).toBeGreaterThan(0);
      expect(l.responseTimeMs).toBeLessThan(5000);
    });
    // The metric counts the same requests (the 200 on /diagnostics/touch among them).
    const metrics = await (await svc.call('/metrics', { headers: { 'x-admin-key': CREDS.adminKey } })).text();
    expect(metrics).toMatch(/http_request_duration_seconds_count\{[^}]*route="\/diagnostics\/touch"[^}]*status="200"[^}]*\} 1\n/);
    expect(metrics).toMatch(/http_request_duration_seconds_count\{[^}]*route="\/diagnostics\/touch"[^}]*status="415"[^}]*\} 1\n/);
  });
});
