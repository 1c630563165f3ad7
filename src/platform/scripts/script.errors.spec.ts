import {
  ScriptAlreadyExistsError,
  ScriptCode,
  ScriptConflictError,
  ScriptError,
  scriptErrorFor,
  ScriptInvalidArgumentError,
  ScriptInvalidStateError,
  ScriptLimitExceededError,
  ScriptNotFoundError,
} from './script.errors';

type Ctor = new (...args: never[]) => ScriptError;

const TABLE: Array<[ScriptCode, Ctor, number, string]> = [
  [ScriptCode.NOT_FOUND, ScriptNotFoundError, 404, 'NOT_FOUND'],
  [ScriptCode.ALREADY_EXISTS, ScriptAlreadyExistsError, 409, 'ALREADY_EXISTS'],
  [ScriptCode.CONFLICT, ScriptConflictError, 409, 'CONFLICT'],
  [ScriptCode.LIMIT_EXCEEDED, ScriptLimitExceededError, 429, 'LIMIT_EXCEEDED'],
  [ScriptCode.INVALID_STATE, ScriptInvalidStateError, 409, 'INVALID_STATE'],
  [ScriptCode.INVALID_ARGUMENT, ScriptInvalidArgumentError, 400, 'INVALID_ARGUMENT'],
];

const numericCodes = Object.values(ScriptCode).filter((v): v is ScriptCode => typeof v === 'number');

describe(ScriptError.name, () => {
  it('codes are unique negative integers', () => {
    expect(new Set(numericCodes).size).toBe(numericCodes.length);
    for (const c of numericCodes) {
      expect(Number.isInteger(c)).toBe(true);
      expect(c).toBeLessThan(0);
    }
  });

  it('the table below covers every ScriptCode', () => {
    expect(TABLE.map(([c]) => c).sort()).toEqual([...numericCodes].sort());
  });

  describe(scriptErrorFor.name, () => {
    it.each(TABLE)('code %i → %p with HTTP %i', (code, Ctor, status, codeName) => {
      const err = scriptErrorFor('seckill.buy', code);
      expect(err).toBeInstanceOf(Ctor);
      expect(err).toBeInstanceOf(ScriptError);
      expect(err).toBeInstanceOf(Error);
      expect(err.constructor).toBe(Ctor);
      expect(err.name).toBe(Ctor.name);
      expect(err.script).toBe('seckill.buy');
      expect(err.code).toBe(code);
      expect(err.status).toBe(status);
      expect(err.codeName).toBe(codeName);
      expect(err.message.length).toBeGreaterThan(0);
      expect(err.stack).toContain(Ctor.name);
    });

    it('gives each code its own class', () => {
      const classes = numericCodes.map((c) => scriptErrorFor('s', c).constructor);
      expect(new Set(classes).size).toBe(numericCodes.length);
      expect(scriptErrorFor('s', ScriptCode.NOT_FOUND)).not.toBeInstanceOf(ScriptConflictError);
      expect(scriptErrorFor('s', ScriptCode.CONFLICT)).not.toBeInstanceOf(ScriptNotFoundError);
    });

    it('no known code maps to a 5xx', () => {
      for (const c of numericCodes) expect(scriptErrorFor('s', c).status).toBeLessThan(500);
    });

    it.each([-99, -7, 0, 1, 3.5])('unknown code %p → plain ScriptError with status 500', (code) => {
      const err = scriptErrorFor('wallet.debit', code);
      expect(err.constructor).toBe(ScriptError);
      expect(err.name).toBe('ScriptError');
      expect(err.status).toBe(500);
      expect(err.code).toBe(code);
      expect(err.codeName).toBe(String(code));
      expect(err.message).toContain('wallet.debit');
      expect(err.message).toContain(String(code));
    });

    it('does not treat a code name as a code', () => {
      expect(scriptErrorFor('s', 'NOT_FOUND' as unknown as number).status).toBe(500);
    });
  });
});
