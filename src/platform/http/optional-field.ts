import { ValidateIf } from 'class-validator';

/** The condition behind `IsOptionalField`: only an absent field skips its rules. */
export const isPresent = (_object: object, value: unknown): boolean => value !== undefined;

/**
 * An optional field: when it is absent its rules are skipped; when it is
 * present, `null` included, every rule applies. (class-validator's own
 * `@IsOptional()` also skips `null`, which would let `{"pay": null}` through
 * as a value no rule has seen.)
 */
export const IsOptionalField = (): PropertyDecorator => ValidateIf(isPresent);
