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

/** A script answered with a result code. `status` is the HTTP status the code maps to. */
export class ScriptError extends Error {
  constructor(
    readonly script: string,
    readonly code: ScriptCode,
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }

  /** The code's name, e.g. `NOT_FOUND`. */
  get codeName(): string {
    return ScriptCode[this.code] ?? String(this.code);
  }
}

export class ScriptNotFoundError extends ScriptError {}
export class ScriptAlreadyExistsError extends ScriptError {}
export class ScriptConflictError extends ScriptError {}
export class ScriptLimitExceededError extends ScriptError {}
export class ScriptInvalidStateError extends ScriptError {}
export class ScriptInvalidArgumentError extends ScriptError {}

type ErrorCtor = new (script: string, code: ScriptCode, status: number, message: string) => ScriptError;

const BY_CODE: Record<ScriptCode, [ErrorCtor, number, string]> = {
  [ScriptCode.NOT_FOUND]: [ScriptNotFoundError, 404, 'Not found'],
  [ScriptCode.ALREADY_EXISTS]: [ScriptAlreadyExistsError, 409, 'Already exists'],
  [ScriptCode.CONFLICT]: [ScriptConflictError, 409, 'Conflicting state'],
  [ScriptCode.LIMIT_EXCEEDED]: [ScriptLimitExceededError, 429, 'Limit exceeded'],
  [ScriptCode.INVALID_STATE]: [ScriptInvalidStateError, 409, 'Invalid state for this operation'],
  [ScriptCode.INVALID_ARGUMENT]: [ScriptInvalidArgumentError, 400, 'Invalid argument'],
};

/** The one place a script result code becomes a typed error. */
export function scriptErrorFor(script: string, code: number): ScriptError {
  const entry = BY_CODE[code as ScriptCode];
  if (!entry) return new ScriptError(script, code as ScriptCode, 500, `Script ${script} returned unknown code ${code}`);
  const [Ctor, status, message] = entry;
  return new Ctor(script, code as ScriptCode, status, message);
}
