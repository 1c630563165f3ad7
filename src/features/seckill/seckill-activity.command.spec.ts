import { InvalidArgumentError } from '../../platform/core/domain.error';
import { toActivityCommand } from './seckill-activity.command';
import type { ActivityDto, ProductDto } from './dto';

/** The rules across a product's fields name the product's field in the one notation every 400 uses (`products[1].shards`). */
describe('toActivityCommand', () => {
  const product = (productId: string, extra: Partial<ProductDto> = {}): ProductDto => ({
    productId,
    title: 'Tea',
    price: 100,
    currency: 'CNY',
    stock: 10,
    ...extra,
  });
  const body = (products: ProductDto[]): ActivityDto => ({
    activityId: 'a1',
    merchantId: 'm1',
    title: 'Sale',
    startsAt: new Date(Date.now() + 60_000).toISOString(),
    endsAt: new Date(Date.now() + 3_600_000).toISOString(),
    products,
  });
  const limits = { maxProducts: 100, maxShards: 16 };
  const fieldOf = (dto: ActivityDto): string | undefined => {
    try {
      toActivityCommand(dto, limits);
      return undefined;
    } catch (e) {
      expect(e).toBeInstanceOf(InvalidArgumentError);
      return ((e as InvalidArgumentError).details as Array<{ field: string }>)[0].field;
    }
  };

  it('takes a sound body', () => {
    expect(fieldOf(body([product('p1'), product('p2', { shards: 4 })]))).toBeUndefined();
  });

  it.each([
    ['products[1].productId', [product('p1'), product('p1')]],
    ['products[1].shards', [product('p1'), product('p2', { shards: 17 })]],
    ['products[0].shards', [product('p1', { stock: 2, shards: 3 })]],
    ['products[0].price', [product('p1', { price: 10_000_000_000, perUserLimit: 2 })]],
  ])('names %s', (field, products) => {
    expect(fieldOf(body(products))).toBe(field);
  });
});
