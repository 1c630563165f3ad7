import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppConfig } from './app-config';
import { expectConfigError as configError } from '../../../test/support/config-errors';
import { DEV_DEFAULTS, loadConfig, parseNamedSecrets } from './load-config';

const loadError = (env: NodeJS.ProcessEnv, variable: string) => configError(() => loadConfig(env), variable);

const STRONG_JWT = 'prod-jwt-secret-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa';

/** A complete, valid production environment. */
const PROD: NodeJS.ProcessEnv = {
  NODE_ENV: 'production',
  REDIS_URL: 'redis://redis.internal:6379/0',
  JWT_SECRET: STRONG_JWT,
  MERCHANT_SECRETS: 'm_live:live-merchant-secret-abcdefghij',
  SERVICE_TOKENS: 'billing:live-service-token-abcdefghij',
  ADMIN_API_KEYS: 'ops:live-admin-key-abcdefghijklmnop',
};

const without = (env: NodeJS.ProcessEnv, ...names: string[]): NodeJS.ProcessEnv => {
  const copy = { ...env };
  for (const n of names) delete copy[n];
  return copy;
};

describe(loadConfig.name, () => {
  describe('defaults (no variables set)', () => {
    let cfg: AppConfig;
    beforeAll(() => {
      cfg = loadConfig({});
    });

    it('returns an AppConfig for development', () => {
      expect(cfg).toBeInstanceOf(AppConfig);
      expect(cfg.env).toBe('development');
    });

    it('fills server defaults', () => {
      expect(cfg.port).toBe(3000);
      expect(cfg.host).toBe('0.0.0.0');
      expect(cfg.logLevel).toBe('info');
      expect(cfg.bodyLimitBytes).toBe(64 * 1024);
      expect(cfg.requestIdHeader).toBe('x-request-id');
      expect(cfg.shutdownGraceMs).toBe(10_000);
      expect(cfg.swaggerEnabled).toBe(true);
    });

    it('has no Redis topology (the service refuses to start with none) and the default Redis settings', () => {
      expect(cfg.redis).toEqual({
        topology: { mode: 'none' },
        username: undefined,
        password: undefined,
        tls: false,
        tlsCaFile: undefined,
        tlsRejectUnauthorized: true,
        keyPrefix: 'rp',
        commandTimeoutMs: 1000,
        connectTimeoutMs: 2000,
        retryAfterS: 1,
      });
    });

    it('uses HS256 with the development JWT secret, flagged as such', () => {
      expect(cfg.jwt).toEqual({
        algorithm: 'HS256',
        key: DEV_DEFAULTS.JWT_SECRET,
        issuer: undefined,
        audience: undefined,
        clockToleranceS: 5,
        isDevSecret: true,
      });
    });

    it('uses the development credentials', () => {
      expect([...cfg.merchantSecrets]).toEqual([['m_demo', 'dev-merchant-secret-0123456789']]);
      expect([...cfg.serviceTokens]).toEqual([['dev-service', 'dev-service-token-0123456789']]);
      expect([...cfg.adminKeys]).toEqual([['dev-admin', 'dev-admin-key-0123456789']]);
      expect(cfg.merchantSignatureWindowMs).toBe(5 * 60_000);
    });

    it('enables rate limiting with the default limits', () => {
      expect(cfg.rateLimit).toEqual({
        enabled: true,
        windowMs: 1000,
        maxLease: 100,
        limits: { user: 50, merchant: 200, service: 5000, admin: 50, anonymous: 20 },
      });
    });

    it('treats empty strings as unset for numbers and strings', () => {
      const c = loadConfig({ PORT: '', HOST: '', REDIS_URL: '', JWT_SECRET: '', MERCHANT_SECRETS: '' });
      expect(c.port).toBe(3000);
      expect(c.host).toBe('0.0.0.0');
      expect(c.redis.topology.mode).toBe('none');
      expect(c.jwt.key).toBe(DEV_DEFAULTS.JWT_SECRET);
      expect(c.merchantSecrets.has('m_demo')).toBe(true);
    });
  });

  describe('parsing set values', () => {
    it('converts numbers and booleans', () => {
      const c = loadConfig({
        NODE_ENV: 'test',
        PORT: '8080',
        SWAGGER_ENABLED: 'false',
        REDIS_TLS: 'yes',
        REDIS_TLS_REJECT_UNAUTHORIZED: '0',
        RATE_LIMIT_ENABLED: 'off',
        RATE_LIMIT_USER: '7',
        REDIS_COMMAND_TIMEOUT_MS: '250',
        REDIS_RETRY_AFTER_S: '9',
        REDIS_KEY_PREFIX: 'shop-1.v2',
        JWT_CLOCK_TOLERANCE_S: '0',
      });
      expect(c.env).toBe('test');
      expect(c.port).toBe(8080);
      expect(c.swaggerEnabled).toBe(false);
      expect(c.redis.tls).toBe(true);
      expect(c.redis.tlsRejectUnauthorized).toBe(false);
      expect(c.rateLimit.enabled).toBe(false);
      expect(c.rateLimit.limits.user).toBe(7);
      expect(c.redis.commandTimeoutMs).toBe(250);
      expect(c.redis.retryAfterS).toBe(9);
      expect(c.redis.keyPrefix).toBe('shop-1.v2');
      expect(c.jwt.clockToleranceS).toBe(0);
    });

    it('uses REDIS_URL as a standalone topology', () => {
      const url = 'rediss://user:pw@cache.example:6380/2';
      expect(loadConfig({ REDIS_URL: url }).redis.topology).toEqual({ mode: 'standalone', url });
    });

    it('parses sentinels with their master name and password', () => {
      const c = loadConfig({
        REDIS_SENTINELS: 's1.internal:26379,10.0.0.2:26380',
        REDIS_SENTINEL_MASTER: 'mymaster',
        REDIS_SENTINEL_PASSWORD: 'sentinel-pw',
      });
      expect(c.redis.topology).toEqual({
        mode: 'sentinel',
        sentinels: [
          { host: 's1.internal', port: 26379 },
          { host: '10.0.0.2', port: 26380 },
        ],
        masterName: 'mymaster',
        sentinelPassword: 'sentinel-pw',
      });
    });

    it('requires REDIS_SENTINEL_MASTER with REDIS_SENTINELS', () => {
      const err = loadError({ REDIS_SENTINELS: 's1:26379' }, 'REDIS_SENTINEL_MASTER');
      expect(err.message).toContain('REDIS_SENTINELS');
    });

    it.each<[string, NodeJS.ProcessEnv, string]>([
      ['a Sentinel master name with REDIS_URL', { REDIS_URL: 'redis://r:6379', REDIS_SENTINEL_MASTER: 'mymaster' }, 'REDIS_SENTINEL_MASTER'],
      ['a Sentinel password with cluster nodes', { REDIS_CLUSTER_NODES: 'n1:7000', REDIS_SENTINEL_PASSWORD: 'sentinel-pw' }, 'REDIS_SENTINEL_PASSWORD'],
      ['a Sentinel master name and no Redis at all (development)', { REDIS_SENTINEL_MASTER: 'mymaster' }, 'REDIS_SENTINEL_MASTER'],
      ['REDIS_TLS=false with a rediss:// URL', { REDIS_URL: 'rediss://r:6380', REDIS_TLS: 'false' }, 'REDIS_TLS'],
      ['a CA file with TLS off', { REDIS_URL: 'redis://r:6379', REDIS_TLS_CA_FILE: __filename }, 'REDIS_TLS_CA_FILE'],
    ])('refuses settings that contradict the rest instead of ignoring them: %s', (_case, env, variable) => {
      loadError(env, variable);
    });

    it('accepts TLS asked for by REDIS_TLS on a redis:// URL, and a CA file with a rediss:// URL', () => {
      expect(loadConfig({ REDIS_URL: 'redis://r:6379', REDIS_TLS: 'true' }).redis.tls).toBe(true);
      expect(loadConfig({ REDIS_URL: 'rediss://r:6380', REDIS_TLS_CA_FILE: __filename }).redis.tlsCaFile).toBe(__filename);
    });

    it('parses cluster nodes', () => {
      const c = loadConfig({ REDIS_CLUSTER_NODES: 'n1:7000,n2.internal:7001,10.0.0.3:7002' });
      expect(c.redis.topology).toEqual({
        mode: 'cluster',
        nodes: [
          { host: 'n1', port: 7000 },
          { host: 'n2.internal', port: 7001 },
          { host: '10.0.0.3', port: 7002 },
        ],
      });
    });

    it.each(['n1', 'n1:7000,', 'n1:7000, n2:7001', ':7000', 'n1:port', ',,,'])('rejects malformed REDIS_CLUSTER_NODES %j', (value) => {
      loadError({ REDIS_CLUSTER_NODES: value }, 'REDIS_CLUSTER_NODES');
    });
  });

  describe('validation errors name the variable first', () => {
    it.each<[string, NodeJS.ProcessEnv, string]>([
      ['PORT not a number', { PORT: 'abc' }, 'PORT'],
      ['PORT out of range', { PORT: '70000' }, 'PORT'],
      ['PORT fractional', { PORT: '80.5' }, 'PORT'],
      // 0 would listen on a random port, announced as ":0", that nobody (the image's HEALTHCHECK included) can find.
      ['PORT zero', { PORT: '0' }, 'PORT'],
      ['NODE_ENV unknown', { NODE_ENV: 'staging' }, 'NODE_ENV'],
      ['LOG_LEVEL unknown', { LOG_LEVEL: 'loud' }, 'LOG_LEVEL'],
      ['BODY_LIMIT_BYTES too small', { BODY_LIMIT_BYTES: '10' }, 'BODY_LIMIT_BYTES'],
      ['REQUEST_ID_HEADER upper case', { REQUEST_ID_HEADER: 'X-Request-Id' }, 'REQUEST_ID_HEADER'],
      ['SWAGGER_ENABLED not a boolean', { SWAGGER_ENABLED: 'maybe' }, 'SWAGGER_ENABLED'],
      ['REDIS_KEY_PREFIX with braces', { REDIS_KEY_PREFIX: 'rp{1}' }, 'REDIS_KEY_PREFIX'],
      ['REDIS_KEY_PREFIX with a colon', { REDIS_KEY_PREFIX: 'rp:x' }, 'REDIS_KEY_PREFIX'],
      ['REDIS_KEY_PREFIX with a space', { REDIS_KEY_PREFIX: 'r p' }, 'REDIS_KEY_PREFIX'],
      ['REDIS_KEY_PREFIX too long', { REDIS_KEY_PREFIX: 'p'.repeat(33) }, 'REDIS_KEY_PREFIX'],
      ['REDIS_URL http', { REDIS_URL: 'http://localhost:6379' }, 'REDIS_URL'],
      ['REDIS_URL bare host', { REDIS_URL: 'localhost:6379' }, 'REDIS_URL'],
      ['REDIS_URL scheme only', { REDIS_URL: 'redis://' }, 'REDIS_URL'],
      ['REDIS_SENTINELS without port', { REDIS_SENTINELS: 's1', REDIS_SENTINEL_MASTER: 'm' }, 'REDIS_SENTINELS'],
      ['REDIS_COMMAND_TIMEOUT_MS too small', { REDIS_COMMAND_TIMEOUT_MS: '1' }, 'REDIS_COMMAND_TIMEOUT_MS'],
      ['JWT_SECRET too short', { JWT_SECRET: 'x'.repeat(31) }, 'JWT_SECRET'],
      ['JWT_ALGORITHM unsupported', { JWT_ALGORITHM: 'HS512' }, 'JWT_ALGORITHM'],
      ['JWT_CLOCK_TOLERANCE_S negative', { JWT_CLOCK_TOLERANCE_S: '-1' }, 'JWT_CLOCK_TOLERANCE_S'],
      ['RATE_LIMIT_USER zero', { RATE_LIMIT_USER: '0' }, 'RATE_LIMIT_USER'],
      ['MERCHANT_SIGNATURE_WINDOW_MS too small', { MERCHANT_SIGNATURE_WINDOW_MS: '5' }, 'MERCHANT_SIGNATURE_WINDOW_MS'],
    ])('%s', (_label, env, variable) => {
      loadError(env, variable);
    });

    it('gives a readable message for JWT_SECRET too short', () => {
      expect(loadError({ JWT_SECRET: 'short' }, 'JWT_SECRET').message).toBe('JWT_SECRET must be at least 32 characters');
    });

    it('gives a readable message for a non-redis REDIS_URL', () => {
      expect(loadError({ REDIS_URL: 'http://x' }, 'REDIS_URL').message).toBe('REDIS_URL must be a redis:// or rediss:// URL');
    });

    it("strips class-validator's own property prefix exactly once", () => {
      expect(loadError({ PORT: 'abc' }, 'PORT').message).toMatch(/^PORT must /);
      expect(loadError({ PORT: '70000' }, 'PORT').message).toBe('PORT must not be greater than 65535');
    });

    it('accepts a JWT_SECRET of exactly 32 characters', () => {
      expect(loadConfig({ JWT_SECRET: 's'.repeat(32) }).jwt.key).toBe('s'.repeat(32));
    });

    it.each<[NodeJS.ProcessEnv, string, string]>([
      [{ REDIS_URL: 'redis://a:6379', REDIS_SENTINELS: 's:26379', REDIS_SENTINEL_MASTER: 'm' }, 'REDIS_SENTINELS', 'REDIS_URL'],
      [{ REDIS_URL: 'redis://a:6379', REDIS_CLUSTER_NODES: 'n:7000' }, 'REDIS_CLUSTER_NODES', 'REDIS_URL'],
      [{ REDIS_SENTINELS: 's:26379', REDIS_SENTINEL_MASTER: 'm', REDIS_CLUSTER_NODES: 'n:7000' }, 'REDIS_CLUSTER_NODES', 'REDIS_SENTINELS'],
    ])('refuses two Redis topologies at once (%j)', (env, variable, other) => {
      const err = loadError(env, variable);
      expect(err.message).toContain(other);
      expect(err.message).toMatch(/exactly one Redis topology/);
    });

    it('refuses JWT_PUBLIC_KEY with HS256', () => {
      loadError({ JWT_ALGORITHM: 'HS256', JWT_PUBLIC_KEY: '-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----' }, 'JWT_PUBLIC_KEY');
    });

    it.each(['RS256', 'ES256'])('requires JWT_PUBLIC_KEY with %s', (alg) => {
      expect(loadError({ JWT_ALGORITHM: alg }, 'JWT_PUBLIC_KEY').message).toContain(alg);
    });

    it('refuses a JWT_PUBLIC_KEY that is neither PEM nor a readable file', () => {
      loadError({ JWT_ALGORITHM: 'RS256', JWT_PUBLIC_KEY: join(tmpdir(), 'no-such-dir-rp', 'key.pem') }, 'JWT_PUBLIC_KEY');
    });

    it('refuses PEM text in REDIS_TLS_CA_FILE, which every connection opens as a path', () => {
      const pem = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----';
      expect(loadError({ REDIS_URL: 'rediss://r:6380', REDIS_TLS_CA_FILE: pem }, 'REDIS_TLS_CA_FILE').message).toMatch(/not a readable file/);
    });

    it('refuses an unreadable REDIS_TLS_CA_FILE', () => {
      loadError({ REDIS_TLS_CA_FILE: join(tmpdir(), 'no-such-dir-rp', 'ca.pem') }, 'REDIS_TLS_CA_FILE');
    });
  });

  describe('production', () => {
    it('starts with a complete production environment', () => {
      const c = loadConfig(PROD);
      expect(c.env).toBe('production');
      expect(c.redis.topology).toEqual({ mode: 'standalone', url: PROD.REDIS_URL });
      expect(c.jwt.isDevSecret).toBe(false);
      expect(c.jwt.key).toBe(STRONG_JWT);
      expect(c.merchantSecrets.get('m_live')).toBe('live-merchant-secret-abcdefghij');
    });

    it('refuses to start without Redis settings, naming the three topologies (never a redis-server of its own)', () => {
      const err = loadError(without(PROD, 'REDIS_URL'), 'REDIS_URL');
      expect(err.message).toMatch(
        /^REDIS_URL is required in production \(or REDIS_SENTINELS .*REDIS_CLUSTER_NODES\): the service never starts a Redis of its own$/,
      );
    });

    it.each<[string, NodeJS.ProcessEnv]>([
      ['sentinel', { REDIS_SENTINELS: 's1:26379', REDIS_SENTINEL_MASTER: 'mymaster' }],
      ['cluster', { REDIS_CLUSTER_NODES: 'n1:7000,n2:7001' }],
    ])('accepts %s instead of REDIS_URL', (mode, extra) => {
      expect(loadConfig({ ...without(PROD, 'REDIS_URL'), ...extra }).redis.topology.mode).toBe(mode);
    });

    it('refuses to start without JWT_SECRET (HS256)', () => {
      const err = loadError(without(PROD, 'JWT_SECRET'), 'JWT_SECRET');
      expect(err.message).toMatch(/required in production/);
    });

    it('refuses the development JWT secret', () => {
      const err = loadError({ ...PROD, JWT_SECRET: DEV_DEFAULTS.JWT_SECRET }, 'JWT_SECRET');
      expect(err.message).toMatch(/development default/);
    });

    it.each(['MERCHANT_SECRETS', 'SERVICE_TOKENS', 'ADMIN_API_KEYS'] as const)('refuses to start without %s', (variable) => {
      expect(loadError(without(PROD, variable), variable).message).toMatch(/required in production/);
    });

    it.each(['MERCHANT_SECRETS', 'SERVICE_TOKENS', 'ADMIN_API_KEYS'] as const)('refuses the development default %s', (variable) => {
      expect(loadError({ ...PROD, [variable]: DEV_DEFAULTS[variable] }, variable).message).toMatch(/development default/);
    });

    it.each<[string, string]>([
      ['ADMIN_API_KEYS', `ops:${DEV_DEFAULTS.SERVICE_TOKENS.split(':')[1]}`],
      ['SERVICE_TOKENS', `billing:${DEV_DEFAULTS.MERCHANT_SECRETS.split(':')[1]}`],
      ['MERCHANT_SECRETS', `m_live:${DEV_DEFAULTS.ADMIN_API_KEYS.split(':')[1]}`],
      ['MERCHANT_SECRETS', `m_live:${DEV_DEFAULTS.JWT_SECRET}`],
    ])('refuses a development default secret moved into %s (%s)', (variable, value) => {
      expect(loadError({ ...PROD, [variable]: value }, variable).message).toMatch(/development default/);
    });

    it('does not need JWT_SECRET when verifying with a public key', () => {
      const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
      const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
      const c = loadConfig({ ...without(PROD, 'JWT_SECRET'), JWT_ALGORITHM: 'ES256', JWT_PUBLIC_KEY: pem });
      expect(c.jwt.algorithm).toBe('ES256');
      expect(c.jwt.isDevSecret).toBe(false);
    });

    it('outside production the same gaps fall back to development defaults', () => {
      const c = loadConfig({ NODE_ENV: 'test' });
      expect(c.redis.topology.mode).toBe('none');
      expect(c.jwt.isDevSecret).toBe(true);
    });
  });

  describe('one secret per caller', () => {
    it.each<[string, NodeJS.ProcessEnv, string, RegExp]>([
      [
        'a service token that is also an admin key',
        { SERVICE_TOKENS: 'billing:shared-secret-0123456789', ADMIN_API_KEYS: 'ops:shared-secret-0123456789' },
        'ADMIN_API_KEYS',
        /entry "ops" .*SERVICE_TOKENS entry "billing"/,
      ],
      ['a merchant secret that is the HS256 JWT secret', { MERCHANT_SECRETS: `m_live:${STRONG_JWT}` }, 'MERCHANT_SECRETS', /same secret as JWT_SECRET;/],
      [
        'two services with one token',
        { SERVICE_TOKENS: 'a:same-token-0123456789,b:same-token-0123456789' },
        'SERVICE_TOKENS',
        /entry "b" .*SERVICE_TOKENS entry "a"/,
      ],
      [
        'an admin key that is a merchant secret',
        { ADMIN_API_KEYS: 'ops:live-merchant-secret-abcdefghij' },
        'ADMIN_API_KEYS',
        /MERCHANT_SECRETS entry "m_live"/,
      ],
    ])('refuses %s, naming both entries and not the secret', (_case, change, variable, names) => {
      const err = loadError({ ...PROD, ...change }, variable);
      expect(err.message).toMatch(names);
      expect(err.message).not.toMatch(/secret-0123456789|same-token|abcdefghij|aaaaaaaa/);
    });

    it('outside production too', () => {
      expect(loadError({ SERVICE_TOKENS: 'svc:shared-secret-0123456789', ADMIN_API_KEYS: 'ops:shared-secret-0123456789' }, 'ADMIN_API_KEYS').message).toMatch(
        /same secret as SERVICE_TOKENS entry "svc"/,
      );
    });

    it('accepts distinct secrets, and the same name in two variables', () => {
      expect(() => loadConfig({ ...PROD, SERVICE_TOKENS: 'ops:live-service-token-abcdefghij' })).not.toThrow();
    });
  });

  describe(parseNamedSecrets.name, () => {
    it('parses name:secret pairs via loadConfig', () => {
      const c = loadConfig({ MERCHANT_SECRETS: 'm1:0123456789abcdef, m.2-x_y:fedcba9876543210fedcba' });
      expect([...c.merchantSecrets]).toEqual([
        ['m1', '0123456789abcdef'],
        ['m.2-x_y', 'fedcba9876543210fedcba'],
      ]);
    });

    it('splits on the first colon only, so secrets may contain colons', () => {
      expect(parseNamedSecrets('X', 'svc:abc:def:ghi:jkl:mno').get('svc')).toBe('abc:def:ghi:jkl:mno');
    });

    it('ignores blank entries and surrounding whitespace', () => {
      expect([...parseNamedSecrets('X', ' a:aaaaaaaaaaaaaaaa ,, b:bbbbbbbbbbbbbbbb ,')].map(([n]) => n)).toEqual(['a', 'b']);
    });

    it('accepts a 16-character secret and refuses 15', () => {
      expect(parseNamedSecrets('X', `a:${'s'.repeat(16)}`).get('a')).toHaveLength(16);
      const err = configError(() => parseNamedSecrets('SERVICE_TOKENS', `a:${'s'.repeat(15)}`), 'SERVICE_TOKENS');
      expect(err.message).toMatch(/"a" has a secret shorter than 16/);
    });

    it('never echoes a secret in the error', () => {
      const short = 'tiny-s3cret';
      const e1 = configError(() => parseNamedSecrets('ADMIN_API_KEYS', `ops:${short}`), 'ADMIN_API_KEYS');
      expect(e1.message).not.toContain(short);
      const e2 = configError(() => parseNamedSecrets('ADMIN_API_KEYS', 'bad name:long-enough-secret-123'), 'ADMIN_API_KEYS');
      expect(e2.message).not.toContain('long-enough-secret-123');
    });

    it('refuses duplicate names', () => {
      const err = configError(() => parseNamedSecrets('MERCHANT_SECRETS', 'm1:aaaaaaaaaaaaaaaa,m2:bbbbbbbbbbbbbbbb,m1:cccccccccccccccc'), 'MERCHANT_SECRETS');
      expect(err.message).toMatch(/"m1" twice/);
    });

    it.each([
      ['no separator', 'justasecretvaluewithoutname'],
      ['empty name', ':aaaaaaaaaaaaaaaa'],
      ['space in name', 'my merchant:aaaaaaaaaaaaaaaa'],
      ['slash in name', 'a/b:aaaaaaaaaaaaaaaa'],
      ['brace in name', 'a{b}:aaaaaaaaaaaaaaaa'],
      ['name of 65 characters', `${'n'.repeat(65)}:aaaaaaaaaaaaaaaa`],
    ])('refuses a bad name (%s)', (_label, raw) => {
      expect(configError(() => parseNamedSecrets('SERVICE_TOKENS', raw), 'SERVICE_TOKENS').message).toMatch(/valid name/);
    });

    it('accepts a name of 64 characters', () => {
      expect(parseNamedSecrets('X', `${'n'.repeat(64)}:aaaaaaaaaaaaaaaa`).size).toBe(1);
    });

    it('refuses a list with no entries', () => {
      expect(configError(() => parseNamedSecrets('ADMIN_API_KEYS', ' , ,'), 'ADMIN_API_KEYS').message).toBe('ADMIN_API_KEYS is empty');
    });

    it('reports the variable it was loading', () => {
      loadError({ SERVICE_TOKENS: 'svc:short' }, 'SERVICE_TOKENS');
      loadError({ ADMIN_API_KEYS: 'a:aaaaaaaaaaaaaaaa,a:bbbbbbbbbbbbbbbb' }, 'ADMIN_API_KEYS');
      loadError({ MERCHANT_SECRETS: 'nocolon' }, 'MERCHANT_SECRETS');
    });
  });

  describe('asymmetric JWT keys', () => {
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ type: 'spki', format: 'pem' }).toString();
    let dir: string;

    beforeAll(() => {
      dir = mkdtempSync(join(tmpdir(), 'rp-load-config-'));
    });
    afterAll(() => {
      rmSync(dir, { recursive: true, force: true });
    });

    it.each<['RS256' | 'ES256', string]>([
      ['RS256', rsa],
      ['ES256', ec],
    ])('%s: takes a PEM from the variable', (algorithm, pem) => {
      const c = loadConfig({ JWT_ALGORITHM: algorithm, JWT_PUBLIC_KEY: pem });
      expect(c.jwt.algorithm).toBe(algorithm);
      expect(c.jwt.key).toBe(pem);
      expect(c.jwt.isDevSecret).toBe(false);
    });

    it('turns literal \\n escapes in a one-line PEM into newlines', () => {
      const oneLine = rsa.trimEnd().replace(/\n/g, '\\n');
      expect(oneLine).not.toContain('\n');
      expect(loadConfig({ JWT_ALGORITHM: 'RS256', JWT_PUBLIC_KEY: oneLine }).jwt.key).toBe(rsa.trimEnd());
    });

    it.each<['RS256' | 'ES256', string]>([
      ['RS256', rsa],
      ['ES256', ec],
    ])('%s: reads a PEM from a file path', (algorithm, pem) => {
      const file = join(dir, `${algorithm}.pem`);
      writeFileSync(file, pem);
      const c = loadConfig({ JWT_ALGORITHM: algorithm, JWT_PUBLIC_KEY: file });
      expect(c.jwt.algorithm).toBe(algorithm);
      expect(c.jwt.key).toBe(pem);
    });

    it('defaults to RS256 when only JWT_PUBLIC_KEY is set', () => {
      expect(loadConfig({ JWT_PUBLIC_KEY: rsa }).jwt.algorithm).toBe('RS256');
    });
  });
});
