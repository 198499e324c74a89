// @fencer-io/client: the TypeScript/Node client of fencer.
export * from "./errors.js";
export { Client } from "./client.js";
export type { ClientOptions, AcquireOptions, ElectionLeader, GrantRecord } from "./options.js";
export { Lease, MultiLock, underLease, type Kind, type Held } from "./lease.js";
export { Session, type SessionGrant, type SessionAcquireOptions } from "./session.js";
export { Watch, type WatchEvent, type WatchOptions } from "./watch.js";
export { ReleasedError, margin, type LostReason } from "./keeper.js";
export { now } from "./transport.js";
export const VERSION = "0.1.0";
