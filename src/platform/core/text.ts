/** The first `max` UTF-16 units of `text`, never ending in the first half of a surrogate pair (a cut emoji). */
export function clipUnits(text: string, max: number): string {
  const code = text.charCodeAt(max - 1);
  return code >= 0xd800 && code <= 0xdbff ? text.slice(0, max - 1) : text.slice(0, max);
}

/**
 * The length of `text` in characters (code points), as class-validator's `@MaxLength` and JSON Schema's
 * `maxLength` count it: an emoji is one character, not two UTF-16 units.
 */
export function codePoints(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}
