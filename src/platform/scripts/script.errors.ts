import { DomainError, type ErrorKind } from '../core/domain.error';

/**
 * Result codes a Lua script may return as its whole result (a negative
 * integer). Shared by every script; feature modules add theirs here so the
 * numbering stays unique. Lua files document which codes they return.
 */
export enum ScriptCode {
  NOT_FOUND = -1,
  ALREADY_EXISTS = -2,
  CONFLICT = -3,
  LIMIT_EXCEEDED = -4,
  INVALID_STATE = -5,
  INVALID_ARGUMENT = -6,
}

/**
 * A script answered with a result code: a domain error whose `code` is the
 * result code's name (e.g. `NOT_FOUND`) and whose kind says what it means.
 * Stores catch the subclass they expect and throw their module's own error;
 * one they let through is answered by its kind.
 */
export abstract class ScriptError extends DomainError {
  constructor(
    readonly script: string,
    /** The script's reply, e.g. -1 for NOT_FOUND. */
    readonly result: ScriptCode,
    message: string,
  ) {
    super(ScriptCode[result], message);
  }
}

export class ScriptNotFoundError extends ScriptError {
  readonly kind = 'not-found';
}
export class ScriptAlreadyExistsError extends ScriptError {
  readonly kind = 'conflict';
}
export class ScriptConflictError extends ScriptError {
  readonly kind = 'conflict';
}
export class ScriptLimitExceededError extends ScriptError {
  readonly kind = 'limit';
}
export class ScriptInvalidStateError extends ScriptError {
  readonly kind = 'conflict';
}
export class ScriptInvalidArgumentError extends ScriptError {
  readonly kind = 'invalid';
}

/** A script replied with a negative integer that is no `ScriptCode`: a bug in the script, not an answer (a 500, logged). */
export class UnknownScriptResultError extends Error {
  constructor(
    readonly script: string,
    readonly result: number,
  ) {
    super(`Script ${script} returned unknown code ${result}`);
    this.name = 'UnknownScriptResultError';
  }
}

type ErrorCtor = new (script: string, result: ScriptCode, message: string) => ScriptError & { readonly kind: ErrorKind };

const BY_CODE: Record<ScriptCode, [ErrorCtor, string]> = {
  [ScriptCode.NOT_FOUND]: [ScriptNotFoundError, 'Not found'],
  [ScriptCode.ALREADY_EXISTS]: [ScriptAlreadyExistsError, 'Already exists'],
  [ScriptCode.CONFLICT]: [ScriptConflictError, 'Conflicting state'],
  [ScriptCode.LIMIT_EXCEEDED]: [ScriptLimitExceededError, 'Limit exceeded'],
  [ScriptCode.INVALID_STATE]: [ScriptInvalidStateError, 'Invalid state for this operation'],
  [ScriptCode.INVALID_ARGUMENT]: [ScriptInvalidArgumentError, 'Invalid argument'],
};

/** The one place a script result code becomes a typed error. */
export function scriptErrorFor(script: string, result: number): ScriptError | UnknownScriptResultError {
  const entry = Object.hasOwn(BY_CODE, result) ? BY_CODE[result as ScriptCode] : undefined;
  if (!entry) return new UnknownScriptResultError(script, result);
  const [Ctor, message] = entry;
  return new Ctor(script, result as ScriptCode, message);
}
