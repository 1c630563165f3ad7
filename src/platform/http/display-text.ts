import { ValidateBy, type ValidationOptions } from 'class-validator';

/**
 * What text shown to people may not hold: C0 controls other than tab, line feed and carriage return (NUL, escape,
 * backspace…), DEL and the C1 controls, and the bidirectional embeddings, overrides and isolates (U+202A–U+202E,
 * U+2066–U+2069), which make text display other than it reads ("‮gpj.exe" shows as "exe.jpg").
 */
// eslint-disable-next-line no-control-regex
export const HIDDEN_CHARACTER_RE = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F\u202A-\u202E\u2066-\u2069]/;

/**
 * Text that is not blank: it holds a character that shows. White space does not, nor do the characters that
 * render as nothing (zero-width space, joiners and marks U+200B–U+200F, word joiner and invisible operators
 * U+2060–U+2064, the byte-order mark, the Hangul fillers U+115F, U+1160, U+3164, U+FFA0, the Mongolian vowel
 * separator): a title of U+200B alone passed `\S` and showed as nothing.
 */
export const NOT_BLANK_RE = /[^\s\u200B-\u200F\u2060-\u2064\uFEFF\u115F\u1160\u3164\uFFA0\u180E]/;

/** Whether `text` holds a character HIDDEN_CHARACTER_RE names. */
export const hasHiddenCharacter = (text: string): boolean => HIDDEN_CHARACTER_RE.test(text);

export const hiddenCharacterMessage = (field: string) => `${field} must not hold control characters or bidirectional overrides`;

/**
 * A string field shown to people (titles, contents, subjects, memos): refused with a 400 naming it when it holds a
 * control character or a bidirectional override. A non-string is left to the field's `@IsString()`.
 */
export const IsDisplayText = (field: string, options?: ValidationOptions): PropertyDecorator =>
  ValidateBy(
    {
      name: 'isDisplayText',
      validator: {
        validate: (value: unknown) => typeof value !== 'string' || !hasHiddenCharacter(value),
        defaultMessage: () => hiddenCharacterMessage(field),
      },
    },
    options,
  );
