export * from './seckill-activity.dto';
export * from './reservation.dto';
