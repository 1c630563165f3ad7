/** The first `max` UTF-16 units of `text`, never ending in the first half of a surrogate pair (a cut emoji). */
export function clipUnits(text: string, max: number): string {
  const code = text.charCodeAt(max - 1);
  return code >= 0xd800 && code <= 0xdbff ? text.slice(0, max - 1) : text.slice(0, max);
}
