// Operator CLI: `npm run cli -- keys <command>`. Talks to the BillingService over the RPC port
// (GATEWAY_RPC_URL, default http://127.0.0.1:$GRPC_PORT), never to the database directly.
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { BillingService } from '../gen/gateway/v1/billing_pb.js';
import { nanoToUsd, usdToNano } from '../billing/money.ts';
import { toGatewayError } from '../rpc/errors.ts';
import { localRpcUrl } from '../config/exposure.ts';

const USAGE = `usage: npm run cli -- keys <command>
  keys create --credits <usd> [--label <text>]   create an account and key; prints the key once
  keys balance <key|key_id>                       balance, held and available
  keys topup <key|key_id> --amount <usd> [--external-id <id>]
  keys rotate <key|key_id>                        new key on the same balance; the old one dies now
  keys revoke <key|key_id>
  keys usage <key|key_id> [--limit <n>]
  keys limits <key|key_id> [--rpm <n>] [--tpm <n>]    per-key rate limits (0 = unlimited; omitted = default)
options: --json for machine-readable output
env: GATEWAY_RPC_URL (default: GRPC_HOST and GRPC_PORT, else http://127.0.0.1:8081), ADMIN_TOKEN`;

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    credits: { type: 'string' },
    amount: { type: 'string' },
    label: { type: 'string' },
    'external-id': { type: 'string' },
    limit: { type: 'string' },
    rpm: { type: 'string' },
    tpm: { type: 'string' },
    json: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
});

const baseUrl = process.env.GATEWAY_RPC_URL || localRpcUrl(process.env);
const adminToken = process.env.ADMIN_TOKEN;
const client = createClient(
  BillingService,
  createGrpcTransport({
    baseUrl,
    interceptors: adminToken ? [(next) => (req) => { req.header.set('authorization', `Bearer ${adminToken}`); return next(req); }] : [],
  }),
);

const keyRef = (s: string | undefined) => {
  if (!s) fail('a key or key id is required');
  return { ref: s.startsWith('prx-') ? { case: 'apiKey' as const, value: s } : { case: 'keyId' as const, value: s } };
};
const usd = (nano: bigint) => `$${nanoToUsd(nano)}`;
const out = (human: string, json: unknown) =>
  console.log(values.json ? JSON.stringify(json, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)) : human);

function fail(msg: string): never {
  console.error(msg);
  process.exit(2);
}

function dollars(text: string | undefined, flag: string): bigint {
  if (text === undefined) fail(`--${flag} <usd> is required`);
  try {
    return usdToNano(text);
  } catch {
    fail(`--${flag} must be a dollar amount such as 5 or 0.25`);
  }
}

async function run(): Promise<void> {
  const [group, cmd, arg] = positionals;
  if (values.help || group !== 'keys' || !cmd) fail(USAGE);
  switch (cmd) {
    case 'create': {
      const r = await client.createKey({ creditsNano: dollars(values.credits ?? '0', 'credits'), label: values.label ?? '', cause: 'operator-cli' });
      // The key alone on stdout, so `KEY=$(npm run -s cli -- keys create --credits 5)` works.
      if (values.json) out('', { api_key: r.apiKey, key_id: r.keyId, account_id: r.accountId, prefix: r.prefix, balance_nano: r.balanceNano });
      else {
        console.log(r.apiKey);
        console.error(`key id ${r.keyId}, account ${r.accountId}, balance ${usd(r.balanceNano)}. The key is shown once; store it now.`);
      }
      return;
    }
    case 'balance': {
      const b = await client.getBalance({ key: keyRef(arg) });
      out(`balance   ${usd(b.balanceNano)}\nheld      ${usd(b.heldNano)}\navailable ${usd(b.availableNano)}`, {
        account_id: b.accountId, balance_nano: b.balanceNano, held_nano: b.heldNano, available_nano: b.availableNano,
      });
      return;
    }
    case 'topup': {
      const externalId = values['external-id'] ?? `cli:${randomUUID()}`;
      const r = await client.topUp({ key: keyRef(arg), amountNano: dollars(values.amount, 'amount'), externalId, cause: 'operator-cli' });
      out(`${r.applied ? 'applied' : 'already applied'} (${externalId}); balance ${usd(r.balanceNano)}`, { applied: r.applied, external_id: externalId, balance_nano: r.balanceNano });
      return;
    }
    case 'rotate': {
      const r = await client.rotateKey({ key: keyRef(arg) });
      if (values.json) out('', { api_key: r.apiKey, key_id: r.keyId, revoked_key_id: r.revokedKeyId });
      else {
        console.log(r.apiKey);
        console.error(`new key id ${r.keyId}; ${r.revokedKeyId} is revoked.`);
      }
      return;
    }
    case 'revoke': {
      const r = await client.revokeKey({ key: keyRef(arg) });
      out(r.revoked ? 'revoked' : 'was already revoked', { revoked: r.revoked });
      return;
    }
    case 'usage': {
      const r = await client.listUsage({ key: keyRef(arg), limit: Number(values.limit ?? 20) });
      out(
        r.records.map((u) => `${u.createdAt ? new Date(Number(u.createdAt.seconds) * 1000).toISOString() : ''}  ${u.route}  ${u.model}  ${u.status}  in=${u.inputTokens} out=${u.outputTokens}  ${usd(u.costNano)}  ${u.requestId}`).join('\n') || '(no usage)',
        r.records.map((u) => ({ request_id: u.requestId, model: u.model, route: u.route, status: u.status, cost_nano: u.costNano, input_tokens: u.inputTokens, output_tokens: u.outputTokens })),
      );
      return;
    }
    case 'limits': {
      const count = (v: string | undefined, flag: string) => {
        if (v === undefined) return undefined;
        if (!/^\d+$/.test(v)) fail(`--${flag} must be a whole number`);
        return Number(v);
      };
      const rpm = count(values.rpm, 'rpm');
      const tpm = count(values.tpm, 'tpm');
      const r = await client.setRateLimits({ key: keyRef(arg), ...(rpm !== undefined ? { requestsPerMinute: rpm } : {}), ...(tpm !== undefined ? { tokensPerMinute: BigInt(tpm) } : {}) });
      out(r.updated ? `limits set: rpm ${rpm ?? 'default'}, tpm ${tpm ?? 'default'}` : 'no such key', { updated: r.updated });
      return;
    }
    default:
      fail(USAGE);
  }
}

run().catch((err) => {
  const ge = toGatewayError(err);
  console.error(`error: ${ge.httpStatus === 500 ? (err as Error).message : ge.message}`);
  process.exit(1);
});
