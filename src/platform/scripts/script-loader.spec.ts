import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadAllScripts, parseContract, ScriptContractError } from './script-loader';

const header = (extra: string) => `--[[
  Does one thing to one key, for the test.

  KEYS[1]  the key
  ARGV  none

  Returns: 1
${extra}
]]
return 1
`;

describe(parseContract.name, () => {
  it('reads "Durable: money" and "Durable: messages" into the contract, outside the purpose and the returns', () => {
    const money = parseContract('t/a-1.lua', header('\n  Durable: money'), 1);
    expect(money).toMatchObject({ durable: 'money', returns: '1', purpose: 'Does one thing to one key, for the test.' });
    expect(parseContract('t/a-1.lua', header('  Durable: messages'), 1).durable).toBe('messages');
  });

  it('leaves a script without the line not durable', () => {
    expect(parseContract('t/a-1.lua', header(''), 1).durable).toBeUndefined();
  });

  it('refuses an unknown class and a second declaration', () => {
    expect(() => parseContract('t/a-1.lua', header('  Durable: yes'), 1)).toThrow(ScriptContractError);
    expect(() => parseContract('t/a-1.lua', header('  Durable: money\n  Durable: money'), 1)).toThrow(/more than once/);
  });
});

describe('the durable scripts', () => {
  it('are the orders create and write, the flash-sale stock moves, the red-envelope grabs and the wallet scripts (money) and the message writes (messages), and no other', () => {
    const durable = [...loadAllScripts().values()].filter((d) => d.contract.durable).map((d) => [d.id, d.contract.durable]);
    expect(durable.sort()).toEqual([
      ['messages/broadcast', 'messages'],
      ['messages/withdraw', 'messages'],
      ['messages/write', 'messages'],
      ['orders/create', 'money'],
      ['orders/write', 'money'],
      ['red-envelope/grab', 'money'],
      ['red-envelope/take', 'money'],
      ['seckill/release', 'money'],
      ['seckill/reserve', 'money'],
      ['seckill/sell', 'money'],
      ['seckill/take', 'money'],
      ['wallet/credit', 'money'],
      ['wallet/debit', 'money'],
      ['wallet/void', 'money'],
    ]);
  });

  it('are the ones docs/durability.md lists, each with its class', () => {
    const doc = readFileSync(join(__dirname, '..', '..', '..', 'docs', 'durability.md'), 'utf8');
    // Table rows: | `lua/<layer>/<id>-<n>.lua`, `lua/...` | `class` | what it covers |
    const listed = doc
      .split('\n')
      .map((line) => /^\| (`lua\/[^|]+) \| `(money|messages)` \|/.exec(line))
      .filter((m): m is RegExpExecArray => m !== null)
      .flatMap((m) => [...m[1].matchAll(/`lua\/(?:platform|engines|features)\/([a-z-]+\/[a-z-]+)-\d+\.lua`/g)].map((f) => [f[1], m[2]]));
    const durable = [...loadAllScripts().values()].filter((d) => d.contract.durable).map((d) => [d.id, d.contract.durable]);
    expect(listed.sort()).toEqual(durable.sort());
  });
});
