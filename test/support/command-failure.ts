import { InvalidArgumentError } from '../../src/platform/core/domain.error';
import { validateCommand } from '../../src/platform/http/validation';

/**
 * How validateCommand refuses `command` under `dto`: the first field it names and the message, or undefined when
 * it is taken. Fails the test when the refusal is not an InvalidArgumentError with code VALIDATION_FAILED.
 */
export async function commandFailure(dto: Parameters<typeof validateCommand>[0], command: object): Promise<{ field: string; message: string } | undefined> {
  const err = await validateCommand(dto, command).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err === undefined) return undefined;
  expect(err).toBeInstanceOf(InvalidArgumentError);
  const e = err as InvalidArgumentError;
  expect(e.code).toBe('VALIDATION_FAILED');
  return { field: (e.details as Array<{ field: string }>)[0].field, message: e.message };
}
