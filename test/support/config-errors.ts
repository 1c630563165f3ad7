import { ConfigError } from '../../src/platform/config/config.error';

/** Runs `fn`, expects a ConfigError for `variable` (its message starting with the name, once), and returns it. */
export function expectConfigError(fn: () => unknown, variable: string): ConfigError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ConfigError);
  const err = caught as ConfigError;
  expect(err.name).toBe('ConfigError');
  expect(err.variable).toBe(variable);
  expect(err.message.startsWith(`${variable} `)).toBe(true);
  // The variable's name appears once at the start, not twice (class-validator's own prefix is stripped).
  expect(err.message.startsWith(`${variable} ${variable}`)).toBe(false);
  expect(err.message.length).toBeGreaterThan(variable.length + 1);
  return err;
}
