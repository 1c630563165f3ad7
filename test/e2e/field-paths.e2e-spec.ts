import { activityBody, activityId, seckillKit, type SeckillKit } from '../support/seckill';
import { useAppOnOwnRedis } from '../support/test-app';

/**
 * Every 400 names a field in one notation, `products[0].stock`, whichever layer refused it: the fast path,
 * class-validator's nested errors, or a service's own checks after validation.
 */
const ctx = useAppOnOwnRedis({ SECKILL_MAX_SHARDS: '4', RATE_LIMIT_ENABLED: 'false' });
let kit: SeckillKit;
beforeAll(() => (kit = seckillKit(ctx.t)));

interface Detail {
  field: string;
  errors: string[];
}
const fieldsOf = (body: { details?: Detail[] }) => (body.details ?? []).map((d) => d.field);
/** A path with a bare numeric segment (`products.1.productId`, `products.0`). */
const DOTTED_INDEX = /\.\d+(\.|$)/;
const create = (body: unknown) => kit.admin().post('/admin/seckill/activities', body);
const stored = async (id: string) => (await kit.admin().get(`/admin/seckill/activities/${id}`)).status !== 404;

describe('400 field paths: one notation', () => {
  it.each([
    [
      'a duplicate productId (the service check)',
      (id: string) =>
        activityBody(id, [
          { productId: 'p1', stock: 5 },
          { productId: 'p1', stock: 6 },
        ]),
      'products[1].productId',
    ],
    ['shards above the stock (the service check)', (id: string) => activityBody(id, [{ productId: 'p1', stock: 2, shards: 3 }]), 'products[0].shards'],
    ['a negative stock (class-validator, nested)', (id: string) => activityBody(id, [{ productId: 'p1', stock: -1 }]), 'products[0].stock'],
    [
      'a bad second product (class-validator, nested)',
      (id: string) => ({
        ...activityBody(id, [{ productId: 'p1', stock: 5 }]),
        products: [activityBody(id, [{ productId: 'p1', stock: 5 }]).products[0], { productId: 'p2' }],
      }),
      'products[1].title',
    ],
  ])('%s is named in brackets, with the message in the same notation; nothing stored', async (_what, make, field) => {
    const id = activityId('fp');
    const res = await create(make(id));
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toContain(field);
    for (const f of fieldsOf(res.body)) expect(f).not.toMatch(DOTTED_INDEX);
    expect(res.body.message).not.toMatch(/[a-zA-Z]\.\d+(\.|:|\s|$)/);
    expect(await stored(id)).toBe(false);
  });

  it.each([
    ['an object', {}],
    ['an object with fields', { title: 'x', stock: 1 }],
    ['a string', 'p1'],
    ['a number', 5],
  ])('products as %s is one entry naming products, with no fields of a product', async (_what, products) => {
    const id = activityId('fpo');
    const res = await create({ ...activityBody(id, [{ productId: 'p1', stock: 5 }]), products });
    expect(res.status).toBe(400);
    expect(fieldsOf(res.body)).toEqual(['products']);
    expect(res.body.details[0].errors.join(' ')).toMatch(/products must be an array/);
    expect(await stored(id)).toBe(false);
  });
});
