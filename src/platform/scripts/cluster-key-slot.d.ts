/** The slot hash ioredis itself uses (a dependency of ioredis, which ships no types for it). */
declare module 'cluster-key-slot' {
  export default function calculateSlot(key: string | Buffer): number;
}
