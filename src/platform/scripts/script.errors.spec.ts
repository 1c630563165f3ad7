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
  UnknownScriptResultError,
} from './script.errors';
import { DomainError, type ErrorKind } from '../core/domain.error';

type Ctor = abstract new (...args: never[]) => ScriptError;

const TABLE: Array<[ScriptCode, Ctor, ErrorKind, string]> = [
  [ScriptCode.NOT_FOUND, ScriptNotFoundError, 'not-found', 'NOT_FOUND'],
  [ScriptCode.ALREADY_EXISTS, ScriptAlreadyExistsError, 'conflict', 'ALREADY_EXISTS'],
  [ScriptCode.CONFLICT, ScriptConflictError, 'conflict', 'CONFLICT'],
  [ScriptCode.LIMIT_EXCEEDED, ScriptLimitExceededError, 'limit', 'LIMIT_EXCEEDED'],
  [ScriptCode.INVALID_STATE, ScriptInvalidStateError, 'conflict', 'INVALID_STATE'],
  [ScriptCode.INVALID_ARGUMENT, ScriptInvalidArgumentError, 'invalid', 'INVALID_ARGUMENT'],
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
    it.each(TABLE)('code %i → %p, a domain error of kind %p', (code, Ctor, kind, codeName) => {
      const err = scriptErrorFor('seckill.buy', code) as ScriptError;
      expect(err).toBeInstanceOf(Ctor);
      expect(err).toBeInstanceOf(ScriptError);
      expect(err).toBeInstanceOf(DomainError);
      expect(err.constructor).toBe(Ctor);
      expect(err.name).toBe(Ctor.name);
      expect(err.script).toBe('seckill.buy');
      expect(err.result).toBe(code);
      expect(err.kind).toBe(kind);
      expect(err.code).toBe(codeName);
      expect(err.message.length).toBeGreaterThan(0);
      expect(err.stack).toContain(Ctor.name);
      expect(err).not.toHaveProperty('status');
    });

    it('gives each code its own class', () => {
      const classes = numericCodes.map((c) => scriptErrorFor('s', c).constructor);
      expect(new Set(classes).size).toBe(numericCodes.length);
      expect(scriptErrorFor('s', ScriptCode.NOT_FOUND)).not.toBeInstanceOf(ScriptConflictError);
      expect(scriptErrorFor('s', ScriptCode.CONFLICT)).not.toBeInstanceOf(ScriptNotFoundError);
    });

    it('every known code is an answer: a domain error', () => {
      for (const c of numericCodes) expect(scriptErrorFor('s', c)).toBeInstanceOf(DomainError);
    });

    it.each([-99, -7, 0, 1, 3.5])('unknown code %p → UnknownScriptResultError, no domain error (a bug, answered 500)', (code) => {
      const err = scriptErrorFor('wallet.debit', code);
      expect(err.constructor).toBe(UnknownScriptResultError);
      expect(err).not.toBeInstanceOf(DomainError);
      expect(err.name).toBe('UnknownScriptResultError');
      expect((err as UnknownScriptResultError).result).toBe(code);
      expect(err.message).toContain('wallet.debit');
      expect(err.message).toContain(String(code));
    });

    it('does not treat a code name as a code', () => {
      expect(scriptErrorFor('s', 'NOT_FOUND' as unknown as number)).toBeInstanceOf(UnknownScriptResultError);
    });
  });
});
