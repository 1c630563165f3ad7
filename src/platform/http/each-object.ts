import { ValidateBy, type ValidationArguments } from 'class-validator';

/** A `null` element is left to the nested validation, which names it "must not be null". */
const isObjectValue = (v: unknown) => v === null || (typeof v === 'object' && !Array.isArray(v));

/**
 * For an array of `@ValidateNested` objects: every element must be an object.
 * ValidateNested alone goes into an element that is itself an array and checks
 * its elements instead, so `[]` in place of an object passed with no error.
 * The 400 names the first element that is not an object (`products[1]`).
 */
export const EachIsObject = (): PropertyDecorator =>
  ValidateBy(
    {
      name: 'isObject',
      validator: { validate: (v: unknown) => isObjectValue(v) },
    },
    {
      each: true,
      message: (args: ValidationArguments) => {
        const i = Array.isArray(args.value) ? (args.value as unknown[]).findIndex((v) => !isObjectValue(v)) : -1;
        return `${args.property}[${Math.max(i, 0)}] must be an object`;
      },
    },
  );
