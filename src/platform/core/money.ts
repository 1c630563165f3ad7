/** The money rules every module shares. */

/** Smallest amount of one order, instruction or wallet movement, in minor units. */
export const MIN_AMOUNT = 1;
/** Largest amount of one order, instruction or wallet movement, in minor units (100,000,000.00 in a two-decimal currency). */
export const MAX_AMOUNT = 10_000_000_000;
/** ISO 4217 codes as the runtime's ICU knows them. */
export const CURRENCIES: readonly string[] = Intl.supportedValuesOf('currency');
/** The shape of an ISO 4217 code. */
export const CURRENCY_RE = /^[A-Z]{3}$/;

/** What a wrong currency is told, whatever is wrong with it (its shape or the code): one message, said once. */
export const currencyMessage = (field = 'currency'): string => `${field} must be an ISO 4217 currency code (3 capital letters, e.g. CNY)`;
