export * from './activity.dto';
export * from './reservation.dto';
