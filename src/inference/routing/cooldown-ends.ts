// A deployment's cooldown ended by hand, on every instance (docs/providers.md#ending-a-cooldown-by-hand).
// Health is per instance and in memory (deployment-health.ts), so the instance that is asked ends
// its own at once and tells the others on COOLDOWN_CHANNEL (PostgreSQL NOTIFY, as key and budget
// changes travel); each ends its own when it hears. An instance whose listener is down meanwhile
// misses it: its cooldown ends by itself, at most DEPLOYMENT_MAX_COOLDOWN_MS (or a provider's
// retry-after) later, as every cooldown does.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Logger } from 'pino';
import type { Db } from '../../db/db.ts';
import type { DeploymentHealth } from './deployment-health.ts';

export const COOLDOWN_CHANNEL = 'deployment_cooldown_ended';

export class CooldownEnds {
  private readonly db: Db;
  private readonly health: DeploymentHealth;
  private readonly log: Logger;
  /** Names this instance in its notices, so it does not end a cooldown that began since it ended one. */
  private readonly instance = randomBytes(8).toString('hex');
  private listener: pg.Client | undefined;
  private stopped = false;

  constructor(db: Db, health: DeploymentHealth, log: Logger) {
    this.db = db;
    this.health = health;
    this.log = log;
  }

  /** Ends `key`'s cooldown here and tells every other instance; whether it was cooling here. */
  async end(key: string, source: string): Promise<boolean> {
    const was = this.health.endCooldown(key);
    await this.db.raw('SELECT pg_notify(?, ?)', [COOLDOWN_CHANNEL, `${this.instance} ${key}`]);
    this.log.info({ deployment: key, source, wasCooling: was }, 'deployment cooldown ended by hand');
    return was;
  }

  /** Hears the other instances' ends, on a connection of its own (reconnected after a loss). */
  async listen(databaseUrl: string): Promise<void> {
    const client = new pg.Client({
      connectionString: databaseUrl,
      keepAlive: true,
      application_name: 'gateway-cooldowns',
    });
    this.listener = client;
    const lost = (err?: Error) => {
      if (this.listener !== client) return;
      this.listener = undefined;
      client.end().catch(() => {});
      if (this.stopped) return;
      this.log.warn({ err: err?.message }, 'cooldown listener lost; reconnecting');
      setTimeout(() => this.listen(databaseUrl).catch(() => {}), 1000).unref();
    };
    client.on('error', lost);
    client.on('end', () => lost());
    client.on('notification', (msg) => {
      const [from, key] = (msg.payload ?? '').split(' ', 2);
      if (!key || from === this.instance) return;
      const was = this.health.endCooldown(key);
      this.log.info({ deployment: key, wasCooling: was }, 'deployment cooldown ended by hand on another instance');
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${COOLDOWN_CHANNEL}`);
    } catch (err) {
      lost(err as Error);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    const l = this.listener;
    this.listener = undefined;
    await l?.end().catch(() => {});
  }
}
