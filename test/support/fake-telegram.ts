// A local stand-in for the Telegram Bot API server, for grammY's `apiRoot` client option.
// It records every call the bot makes (sendMessage, sendInvoice, answerPreCheckoutQuery,
// refundStarPayment, ...) and hands out updates through getUpdates long polling, the way
// Telegram does: an update stays pending until a later getUpdates confirms it with a higher
// offset. Tests drive it as users would: send a command, press a button, pay, get refunded.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface TgUser {
  id: number;
  is_bot: false;
  first_name: string;
  username?: string;
}

export interface ApiCall {
  seq: number;
  method: string;
  params: Record<string, any>;
  /** What the fake answered (a Message for sendMessage / sendInvoice / editMessageText). */
  result: unknown;
  /** Set when the fake answered with an error instead. */
  error?: string;
}

type Update = Record<string, any> & { update_id: number };

export const BOT_USER = { id: 777000111, is_bot: true, first_name: 'Gateway', username: 'gateway_test_bot' };

export const tgUser = (id: number, name: string): TgUser => ({
  id,
  is_bot: false,
  first_name: name,
  username: name.toLowerCase(),
});

export class FakeTelegram {
  readonly calls: ApiCall[] = [];
  /** Every update ever queued; those with update_id >= the last confirmed offset are pending. */
  private readonly updates: Update[] = [];
  private confirmedOffset = 0;
  private nextUpdateId = 1;
  private nextMessageId = 1;
  private seq = 0;
  private readonly pollers = new Set<{ offset: number; respond: (u: Update[]) => void }>();
  private readonly confirmWaiters = new Set<() => void>();
  /** charge id -> payer, for refundStarPayment; true once refunded. */
  private readonly charges = new Map<string, { userId: number; amount: number; payload: string; refunded: boolean }>();
  private server!: http.Server;
  url = '';

  static async start(): Promise<FakeTelegram> {
    const f = new FakeTelegram();
    f.server = http.createServer((req, res) => void f.handle(req, res));
    await new Promise<void>((resolve) => f.server.listen(0, '127.0.0.1', () => resolve()));
    f.url = `http://127.0.0.1:${(f.server.address() as AddressInfo).port}`;
    return f;
  }

  async close(): Promise<void> {
    for (const p of this.pollers) p.respond([]);
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  // ---- the Bot API side ----

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const m = /^\/bot([^/]+)\/(\w+)$/.exec(req.url ?? '');
    let body = '';
    for await (const chunk of req) body += chunk;
    const reply = (status: number, payload: unknown) => {
      if (res.destroyed) return;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(payload));
    };
    if (!m) return reply(404, { ok: false, error_code: 404, description: 'Not Found' });
    const method = m[2]!;
    const params = body ? (JSON.parse(body) as Record<string, any>) : {};
    const call: ApiCall = { seq: ++this.seq, method, params, result: true };
    this.calls.push(call);
    if (method === 'getUpdates') return this.getUpdates(params, req, res, reply);
    const out = this.answer(method, params);
    if ('error' in out) {
      call.error = out.error;
      return reply(400, { ok: false, error_code: 400, description: out.error });
    }
    call.result = out.result;
    reply(200, { ok: true, result: out.result });
  }

  private answer(method: string, p: Record<string, any>): { result: unknown } | { error: string } {
    const now = Math.floor(Date.now() / 1000);
    const chat = (id: number) => ({ id, type: 'private', first_name: 'user' });
    switch (method) {
      case 'getMe':
        return {
          result: {
            ...BOT_USER,
            can_join_groups: false,
            can_read_all_group_messages: false,
            supports_inline_queries: false,
          },
        };
      case 'sendMessage':
        return {
          result: {
            message_id: this.nextMessageId++,
            date: now,
            chat: chat(p.chat_id),
            from: BOT_USER,
            text: p.text,
            ...(p.reply_markup ? { reply_markup: p.reply_markup } : {}),
          },
        };
      case 'sendInvoice':
        return {
          result: {
            message_id: this.nextMessageId++,
            date: now,
            chat: chat(p.chat_id),
            from: BOT_USER,
            invoice: {
              title: p.title,
              description: p.description,
              start_parameter: '',
              currency: p.currency,
              total_amount: p.prices.reduce((s: number, x: { amount: number }) => s + x.amount, 0),
            },
          },
        };
      case 'editMessageText':
        return {
          result: {
            message_id: p.message_id,
            date: now,
            edit_date: now,
            chat: chat(p.chat_id),
            from: BOT_USER,
            text: p.text,
            ...(p.reply_markup ? { reply_markup: p.reply_markup } : {}),
          },
        };
      case 'refundStarPayment': {
        const c = this.charges.get(p.telegram_payment_charge_id);
        if (!c || c.userId !== p.user_id) return { error: 'Bad Request: CHARGE_NOT_FOUND' };
        if (c.refunded) return { error: 'Bad Request: CHARGE_ALREADY_REFUNDED' };
        c.refunded = true;
        // Telegram tells the bot with a service message in the payer's chat.
        this.refunded(tgUser(c.userId, 'payer'), { chargeId: p.telegram_payment_charge_id });
        return { result: true };
      }
      default: // setMyCommands, deleteWebhook, setWebhook, answerCallbackQuery, answerPreCheckoutQuery, ...
        return { result: true };
    }
  }

  private getUpdates(
    p: Record<string, any>,
    req: http.IncomingMessage,
    res: http.ServerResponse,
    reply: (s: number, b: unknown) => void,
  ): void {
    const offset = Number(p.offset ?? 0);
    if (offset > this.confirmedOffset) {
      this.confirmedOffset = offset;
      for (const w of [...this.confirmWaiters]) w();
    }
    const pending = () =>
      this.updates.filter((u) => u.update_id >= this.confirmedOffset).slice(0, Number(p.limit ?? 100));
    const now = pending();
    const timeout = Math.min(Number(p.timeout ?? 0), 30);
    if (now.length > 0 || timeout === 0) return reply(200, { ok: true, result: now });
    const poller = {
      offset,
      respond: (u: Update[]) => {
        this.pollers.delete(poller);
        clearTimeout(timer);
        reply(200, { ok: true, result: u });
      },
    };
    const timer = setTimeout(() => poller.respond([]), timeout * 1000);
    this.pollers.add(poller);
    res.on('close', () => {
      this.pollers.delete(poller);
      clearTimeout(timer);
    }); // the bot stopped polling
    void req;
  }

  // ---- the user side ----

  /** Queues an update for the bot and returns its id. */
  push(update: Record<string, any>): number {
    const u = { update_id: this.nextUpdateId++, ...update };
    this.updates.push(u);
    for (const p of [...this.pollers]) p.respond(this.updates.filter((x) => x.update_id >= this.confirmedOffset));
    return u.update_id;
  }

  /**
   * Resolves once the bot has confirmed every update queued so far (it asked for a later
   * offset), including updates queued while it worked (a refund's service message).
   */
  async settled(timeoutMs = 20_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.confirmedOffset < this.nextUpdateId) {
      const target = this.nextUpdateId;
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(
          () => {
            this.confirmWaiters.delete(check);
            reject(
              new Error(`bot did not confirm updates up to ${target - 1} (confirmed below ${this.confirmedOffset})`),
            );
          },
          Math.max(0, deadline - Date.now()),
        );
        const check = () => {
          if (this.confirmedOffset < target) return;
          clearTimeout(timer);
          this.confirmWaiters.delete(check);
          resolve();
        };
        this.confirmWaiters.add(check);
        check();
      });
    }
  }

  /** Queues updates, waits until the bot has handled all of them, and returns the calls it made meanwhile. */
  async deliver(...updates: Record<string, any>[]): Promise<ApiCall[]> {
    const mark = this.seq;
    for (const u of updates) this.push(u);
    await this.settled();
    return this.calls.filter((c) => c.seq > mark && c.method !== 'getUpdates');
  }

  message(from: TgUser, fields: Record<string, any>, chatType = 'private'): Record<string, any> {
    return {
      message: {
        message_id: this.nextMessageId++,
        date: Math.floor(Date.now() / 1000),
        from,
        chat:
          chatType === 'private'
            ? { id: from.id, type: 'private', first_name: from.first_name }
            : { id: -1000 - from.id, type: chatType, title: 'a group' },
        ...fields,
      },
    };
  }

  /** A user types text (commands get their bot_command entity, as Telegram sends them). */
  text(from: TgUser, text: string, chatType = 'private'): Record<string, any> {
    const cmd = /^\/\S+/.exec(text);
    return this.message(
      from,
      { text, ...(cmd ? { entities: [{ type: 'bot_command', offset: 0, length: cmd[0].length }] } : {}) },
      chatType,
    );
  }

  /** A user presses an inline button with this data under a message the bot sent. */
  press(from: TgUser, message: unknown, data: string): Record<string, any> {
    return { callback_query: { id: `cq${this.nextUpdateId}`, from, message, chat_instance: `ci${from.id}`, data } };
  }

  preCheckout(
    from: TgUser,
    q: { currency?: string; total_amount: number; invoice_payload: string },
  ): Record<string, any> {
    return {
      pre_checkout_query: {
        id: `pcq${this.nextUpdateId}`,
        from,
        currency: q.currency ?? 'XTR',
        total_amount: q.total_amount,
        invoice_payload: q.invoice_payload,
      },
    };
  }

  /** Telegram's service message after the Stars were taken; the same object again is a redelivery. */
  successfulPayment(
    from: TgUser,
    p: { total_amount: number; invoice_payload: string; chargeId: string },
  ): Record<string, any> {
    this.charges.set(p.chargeId, {
      userId: from.id,
      amount: p.total_amount,
      payload: p.invoice_payload,
      refunded: false,
    });
    return this.message(from, {
      successful_payment: {
        currency: 'XTR',
        total_amount: p.total_amount,
        invoice_payload: p.invoice_payload,
        telegram_payment_charge_id: p.chargeId,
        provider_payment_charge_id: '',
      },
    });
  }

  /** Telegram's service message after a refund; queued by refundStarPayment, or by a test to redeliver it. */
  refunded(from: TgUser, p: { chargeId: string }): number {
    const c = this.charges.get(p.chargeId)!;
    return this.push(
      this.message(from, {
        refunded_payment: {
          currency: 'XTR',
          total_amount: c.amount,
          invoice_payload: c.payload,
          telegram_payment_charge_id: p.chargeId,
        },
      }),
    );
  }
}

/** The calls of one method in a list of calls. */
export const callsOf = (calls: ApiCall[], method: string): ApiCall[] => calls.filter((c) => c.method === method);

/** The text of every message the bot sent or edited, joined. */
export const textsOf = (calls: ApiCall[]): string =>
  calls
    .filter((c) => c.method === 'sendMessage' || c.method === 'editMessageText')
    .map((c) => c.params.text as string)
    .join('\n---\n');
