// The documentation's commands, run as a reader would run them, so the README and docs/ cannot
// go stale unnoticed:
// - the README's quick start as written: its start command (`npm start -- --demo`: no provider
//   key, no simulator, its own PostgreSQL in a fresh DATA_DIR), then its second terminal's block
//   with bash: a key, the demo's completion, a balance that went down by exactly what the call's
//   usage costs at the shipped price;
// - the README's "Point your tools at it": its Claude Code and Codex lines with the real binaries
//   (Codex with the config.toml of docs/clients.md), and its SDK snippets (and those of
//   docs/clients.md) with node;
// - the buf curl example of docs/rpc.md, and its CLI table against the CLI's own --help;
// - every link in the README and docs/ points at a file of this repository (and a heading in it).
// docs/video.md's commands are run by test/e2e/docs-video.test.ts.
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { usdToNano } from '../../src/money/money.ts';
import { formatUsd } from '../../src/money/format.ts';
import { DEMO_ANSWER_PREFIX } from '../../src/demo/answer.ts';
import { MODELS } from '../../src/catalogue/shipped-book.ts';
import { billedNano } from '../support/prices.ts';
import { startGatewayProcess, type GatewayProcess } from '../support/gateway-process.ts';
import { db, gatewayUrl, newKey } from '../support/context.ts';
import {
  CLAUDE_QUIET,
  claudeExecutable,
  codexConfig,
  codexEntry,
  runAgent,
  scratchDirs,
  startRefusingProxy,
} from '../support/coding-agents.ts';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..', '..');
const read = (file: string) => fs.readFileSync(path.join(ROOT, file), 'utf8');
/** The simulator's answer to a prompt without directives. */
const EIGHT_WORDS = 'w1 w2 w3 w4 w5 w6 w7 w8';

/** The fenced blocks of a markdown text, with their language. */
function fences(text: string): { lang: string; body: string; index: number }[] {
  return [...text.matchAll(/^```(\w*)\n([\s\S]*?)^```/gm)].map((m) => ({ lang: m[1]!, body: m[2]!, index: m.index! }));
}

/** The ```sh block right after an HTML comment that says this test runs it. */
function markedBlock(file: string, marker: string): string {
  const text = read(file);
  const at = text.indexOf(`<!-- test/e2e/docs.test.ts runs this block ${marker}`);
  expect(at, `${file} has a block marked "${marker}"`).toBeGreaterThanOrEqual(0);
  const block = fences(text).find((f) => f.index > at)!;
  expect(block.lang).toBe('sh');
  return block.body;
}

// stdin is not a socket: Debian's bash sources /etc/bash.bashrc for a socket stdin when SHLVL is
// unset (as under `docker run … npm test`), which fails under -u.
function bash(script: string, opts: { cwd: string; env: NodeJS.ProcessEnv }) {
  const r = spawnSync('bash', ['-euo', 'pipefail', '-c', script], {
    cwd: opts.cwd,
    env: opts.env,
    encoding: 'utf8',
    timeout: 120_000,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

/** The environment of a second terminal in the checkout: nothing that points the CLI at a gateway. */
function terminalEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  for (const v of ['GATEWAY_RPC_URL', 'GRPC_PORT', 'GRPC_HOST', 'ADMIN_TOKEN', 'KEY']) delete env[v];
  return { ...env, ...extra };
}

describe('README quick start', () => {
  let gw: GatewayProcess | undefined;
  let dataDir = '';

  beforeAll(async () => {
    // A fresh DATA_DIR the embedded server's user can reach (as root it runs as another user).
    const dir = fs.mkdtempSync(path.join(inject('workDir'), 'readme-'));
    fs.chmodSync(dir, 0o755);
    dataDir = path.join(dir, 'data');
    // A newcomer's machine: no database, no provider key or base URL (so no simulator either).
    delete process.env.DATABASE_URL;
    for (const name of Object.keys(process.env)) if (/_API_KEY$|_BASE_URL$/.test(name)) delete process.env[name];
    // The README's first terminal, its command as written (the comment after it dropped).
    const command = markedBlock('README.md', 'as it is').replace(/#.*$/m, '').trim().split(/\s+/);
    expect(command.slice(0, 2)).toEqual(['npm', 'start']);
    gw = await startGatewayProcess({
      env: { DATA_DIR: dataDir, BILLING_MODE: '' },
      logFile: path.join(dir, 'gateway.log'),
      command,
    });
  }, 180_000);
  afterAll(async () => {
    await gw?.stop();
  });

  it('with no provider key: creates a key, gets the demo completion, and shows a balance that went down by what its usage costs', {
    timeout: 120_000,
  }, async () => {
    const block = markedBlock('README.md', 'against `npm start -- --demo`');
    expect(block).toContain('http://localhost:8080');
    // The same folder as `npm start` (DATA_DIR stands for its ./data), so the CLI finds the
    // gateway through the gateway.json it wrote; only the HTTP port differs from the default.
    const script = `${block.replaceAll('http://localhost:8080', gw!.httpUrl)}\nprintf 'KEY=%s\\n' "$KEY"\n`;
    const r = bash(script, { cwd: ROOT, env: terminalEnv({ DATA_DIR: dataDir }) });
    expect(r.code, r.err + r.out).toBe(0);

    const key = /^KEY=(.*)$/m.exec(r.out)![1]!;
    expect(key).toMatch(/^prx-[0-9A-Za-z]{38}$/);
    // curl's output sits between the first balance (three lines) and the second.
    const curlOut = r.out.slice(
      r.out.indexOf('\n', r.out.indexOf('\navailable') + 1) + 1,
      r.out.lastIndexOf('\nbalance'),
    );
    const completion = JSON.parse(curlOut) as {
      object: string;
      model: string;
      choices: { message: { content: string } }[];
      usage: Record<string, unknown>;
    };
    expect(completion).toMatchObject({ object: 'chat.completion', model: 'gpt-5.4-mini' });
    expect(completion.choices[0]!.message.content).toBe(`${DEMO_ANSWER_PREFIX} Hello`);
    expect(read('README.md')).toContain(`"content":"${DEMO_ANSWER_PREFIX} Hello"`);

    const balances = [...r.out.matchAll(/^balance\s+\$([\d.]+)$/gm)].map((m) => usdToNano(m[1]!));
    expect(balances).toHaveLength(2);
    expect(balances[0]).toBe(5_000_000_000n);
    expect(balances[1]).toBeLessThan(balances[0]!);
    expect(r.out).toMatch(/^held\s+\$0\.00$/m);

    // The drop is exactly the call's charge, as its usage row records it (written in the next batch).
    const cli = async (...args: string[]) =>
      (await run('npm', ['run', '-s', 'cli', '--', ...args], { cwd: ROOT, env: terminalEnv({ DATA_DIR: dataDir }) }))
        .stdout;
    await expect
      .poll(async () => (JSON.parse(await cli('keys', 'usage', key, '--json')) as unknown[]).length, {
        timeout: 20_000,
      })
      .toBe(1);
    const [row] = JSON.parse(await cli('keys', 'usage', key, '--json')) as {
      model: string;
      route: string;
      status: string;
      cost_nano: string;
    }[];
    expect(row).toMatchObject({ model: 'gpt-5.4-mini', route: '/v1/chat/completions', status: 'ok' });
    expect(BigInt(row!.cost_nano)).toBeGreaterThan(0n);
    expect(balances[0]! - balances[1]!).toBe(BigInt(row!.cost_nano));
    // What the usage the demo reported costs at the shipped price of gpt-5.4-mini.
    const prices = MODELS.find((m) => m.id === 'gpt-5.4-mini')!.prices as Record<string, string>;
    expect(BigInt(row!.cost_nano)).toBe(billedNano(prices, '/v1/chat/completions', completion.usage));
  });
  it("makes an organisation, invites a member, and the member's call is charged to the organisation, as its spend shows", {
    timeout: 120_000,
  }, async () => {
    const block = markedBlock('README.md', 'for an organisation');
    const script = `${block.replaceAll('http://localhost:8080', gw!.httpUrl)}\nprintf 'ORG=%s\\nBOB=%s\\n' "$ORG" "$BOB"\n`;
    const r = bash(script, { cwd: ROOT, env: terminalEnv({ DATA_DIR: dataDir }) });
    expect(r.code, r.err + r.out).toBe(0);
    const org = /^ORG=(acct_\w+)$/m.exec(r.out)?.[1];
    const bob = /^BOB=(prx-\w+)$/m.exec(r.out)?.[1];
    expect(org).toBeDefined();
    expect(bob).toBeDefined();
    expect(r.err).toMatch(/first key \(shown once\): prx-/);
    const completion = JSON.parse(r.out.split('\n').find((l) => l.startsWith('{'))!) as { object: string };
    expect(completion.object).toBe('chat.completion');
    // The spend table: Bob's one request, at exactly what his usage row was charged.
    const bobRow = r.out.split('\n').find((l) => /\sBob\s/.test(l));
    expect(bobRow, r.out).toBeDefined();
    const { stdout } = await run('npm', ['run', '-s', 'cli', '--', 'orgs', 'usage', org!, '--json'], {
      cwd: ROOT,
      env: terminalEnv({ DATA_DIR: dataDir }),
    });
    const rows = JSON.parse(stdout) as { costNano: string; status: string }[];
    expect(rows.map((u) => u.status)).toEqual(['ok']);
    expect(bobRow).toMatch(/\s1\s/);
    expect(bobRow!.trimEnd().endsWith(formatUsd(BigInt(rows[0]!.costNano)))).toBe(true);
  });
});

describe('README: point your tools at it', () => {
  let proxy: Awaited<ReturnType<typeof startRefusingProxy>>;
  beforeAll(async () => {
    proxy = await startRefusingProxy();
  });
  afterAll(async () => {
    await proxy?.close();
  });

  it('the Claude Code and Codex lines answer through the gateway with the real binaries, Codex set up as docs/clients.md says', {
    timeout: 240_000,
  }, async () => {
    const block = markedBlock('README.md', 'with the real Claude Code and Codex CLI');
    const toml = fences(read('docs/clients.md')).find((f) => f.lang === 'toml')!.body;
    // docs/clients.md shows exactly the config test/e2e/coding-agents.test.ts runs Codex with.
    expect(toml).toBe(codexConfig({ baseUrl: 'http://localhost:8080', model: 'gpt-5.3-codex' }));

    const key = await newKey('5');
    const dirs = scratchDirs();
    try {
      // `claude` and `codex` on PATH, as `npm i -g` would put them; a git folder to work in, as Codex expects.
      const bin = path.join(dirs.home, 'bin');
      fs.mkdirSync(bin);
      fs.symlinkSync(claudeExecutable(), path.join(bin, 'claude'));
      fs.writeFileSync(path.join(bin, 'codex'), `#!/bin/sh\nexec "${process.execPath}" "${codexEntry()}" "$@"\n`, {
        mode: 0o755,
      });
      fs.mkdirSync(path.join(dirs.home, '.codex'));
      fs.writeFileSync(
        path.join(dirs.home, '.codex', 'config.toml'),
        toml.replaceAll('http://localhost:8080', gatewayUrl()),
      );
      expect(spawnSync('git', ['init', '-q'], { cwd: dirs.cwd }).status).toBe(0);

      const r = await runAgent(
        'bash',
        ['-euo', 'pipefail', '-c', block.replaceAll('http://localhost:8080', gatewayUrl())],
        {
          cwd: dirs.cwd,
          proxyUrl: proxy.url,
          timeoutMs: 200_000,
          env: {
            HOME: dirs.home,
            PATH: `${bin}:${path.dirname(process.execPath)}:/usr/local/bin:/usr/bin:/bin`,
            KEY: key.apiKey,
            ...CLAUDE_QUIET,
          },
        },
      );
      expect(r.code, r.stderr + r.stdout).toBe(0);
      const lines = r.stdout.trim().split('\n');
      expect(lines[0]).toBe(EIGHT_WORDS);
      expect(lines.at(-1)).toBe(EIGHT_WORDS);
    } finally {
      dirs.cleanup();
    }
    // Both reached the gateway with the key and were billed: Claude Code's default name through its alias.
    const rows = (
      await db().query('SELECT model, requested_model, status FROM usage_records WHERE key_id = $1', [key.keyId])
    ).rows as { model: string; requested_model: string; status: string }[];
    expect(rows).toContainEqual({ model: 'claude-opus-4-8', requested_model: 'claude-opus-5-5', status: 'ok' });
    expect(rows).toContainEqual({ model: 'gpt-5.3-codex', requested_model: 'gpt-5.3-codex', status: 'ok' });
    expect(proxy.attempts).toEqual([]);
  });

  it('docs/clients.md sets Claude Code and Codex up with the same variables and commands as the README', () => {
    const readme = markedBlock('README.md', 'with the real Claude Code and Codex CLI').trim().split('\n');
    const clients = fences(read('docs/clients.md'))
      .filter((f) => f.lang === 'sh')
      .map((f) => f.body);
    for (const line of readme) {
      const words = line.split(' ');
      const assignments = words.filter((w) => /^[A-Z_]+=/.test(w));
      const command = words.slice(assignments.length).join(' ');
      const block = clients.find((b) => b.split('\n').includes(command));
      expect(block, `docs/clients.md runs ${command}`).toBeDefined();
      for (const a of assignments) expect(block).toContain(`export ${a.replace('$KEY', 'prx-…')}\n`);
    }
  });

  it('the SDK snippets of the README and docs/clients.md answer, run as they are with node', {
    timeout: 60_000,
  }, async () => {
    const key = await newKey('5');
    const snippets = new Set(
      [...fences(read('README.md')), ...fences(read('docs/clients.md'))]
        .filter((f) => f.lang === 'ts')
        .map((f) => f.body),
    );
    expect(snippets.size).toBe(2);
    const answers: unknown[] = [];
    for (const snippet of snippets) {
      const result = [...snippet.matchAll(/const (\w+) = await/g)].at(-1)![1]!;
      const code = `${snippet.replaceAll('http://localhost:8080', gatewayUrl())}\nconsole.log(JSON.stringify(${result}));\n`;
      const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code], {
        cwd: ROOT,
        env: { ...process.env, KEY: key.apiKey },
      });
      answers.push(JSON.parse(stdout));
    }
    expect(answers).toEqual([
      expect.objectContaining({
        object: 'chat.completion',
        model: 'gpt-5.4-mini',
        choices: [expect.objectContaining({ message: expect.objectContaining({ content: EIGHT_WORDS }) })],
      }),
      expect.objectContaining({
        type: 'message',
        model: 'claude-sonnet-4-6',
        content: [expect.objectContaining({ type: 'text', text: EIGHT_WORDS })],
      }),
    ]);
  });
});

describe('docs/rpc.md', () => {
  it('its buf curl example reads a balance from the BillingService', { timeout: 60_000 }, async () => {
    const blocks = fences(read('docs/rpc.md')).filter((f) => f.lang === 'sh');
    expect(blocks).toHaveLength(1);
    const key = await newKey('5');
    const r = bash(blocks[0]!.body.replaceAll('http://localhost:8081', inject('rpcUrl')), {
      cwd: ROOT,
      env: { ...process.env, KEY: key.apiKey },
    });
    expect(r.code, r.err).toBe(0);
    expect(JSON.parse(r.out)).toEqual({
      accountId: key.accountId,
      balanceNano: '5000000000',
      availableNano: '5000000000',
    });
  });

  it('its CLI table lists exactly the commands of npm run cli -- --help', async () => {
    const table = [
      ...read('docs/rpc.md').matchAll(
        /^\| `(keys|orgs|members|invites|teams|budgets|catalogue|accounts|report|providers|deployments) ([\w-]+)/gm,
      ),
    ].map((m) => `${m[1]} ${m[2]}`);
    const { stdout } = await run('npm', ['run', '-s', 'cli', '--', '--help'], { cwd: ROOT });
    const help = [
      ...stdout.matchAll(
        /^ {2}(keys|orgs|members|invites|teams|budgets|catalogue|accounts|report|providers|deployments) ([\w-]+)/gm,
      ),
    ].map((m) => `${m[1]} ${m[2]}`);
    expect(help.length).toBeGreaterThan(5);
    expect(table).toEqual(help);
  });
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
const slug = (heading: string) =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N} _-]/gu, '')
    .replaceAll(' ', '-');

function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of text.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6} (.+)$/gm)) {
    const s = slug(m[1]!.trim());
    const n = seen.get(s) ?? 0;
    seen.set(s, n + 1);
    out.add(n ? `${s}-${n}` : s);
  }
  return out;
}

describe('links', () => {
  const pages = [
    'README.md',
    ...fs
      .readdirSync(path.join(ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => `docs/${f}`),
  ];

  it('every link in the README, docs/ and workflows/README.md points at a file of this repository, and at a heading that exists', () => {
    const broken: string[] = [];
    let count = 0;
    for (const page of [...pages, 'workflows/README.md']) {
      const text = read(page).replace(/^```[\s\S]*?^```/gm, '');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        count++;
        const [target, anchor] = m[1]!.split('#') as [string, string | undefined];
        const file = target ? path.resolve(ROOT, path.dirname(page), target) : path.join(ROOT, page);
        if (/^[a-z]+:/i.test(target) || !file.startsWith(ROOT + path.sep) || !fs.existsSync(file))
          broken.push(`${page}: ${m[1]} (not a file of this repository)`);
        else if (anchor && !anchors(fs.readFileSync(file, 'utf8')).has(anchor))
          broken.push(`${page}: ${m[1]} (no such heading)`);
      }
    }
    expect(count).toBeGreaterThan(50);
    expect(broken).toEqual([]);
  });

  it('the README maps every page of docs/, and nothing refers to the design brief outside the repository', () => {
    const readme = read('README.md');
    for (const page of pages.slice(1)) expect(readme).toContain(`| [${page}](${page}) |`);
    // (spelled in two parts, so this file does not find itself)
    const outside = ['shared' + '/', 'DESIGN' + '.md'];
    const files = ['README.md', 'docs', 'src', 'test', 'scripts', 'bench', 'workflows', 'proto', '.ci'].flatMap((p) =>
      fs.statSync(path.join(ROOT, p)).isDirectory()
        ? (fs.readdirSync(path.join(ROOT, p), { recursive: true }) as string[])
            .map((f) => path.join(p, f))
            .filter((f) => fs.statSync(path.join(ROOT, f)).isFile())
        : [p],
    );
    const hits = files
      .filter((f) => /\.(md|ts|mts|mjs|js|sh|proto)$|^\.ci\//.test(f))
      .filter((f) => outside.some((o) => read(f).includes(o)));
    expect(hits).toEqual([]);
  });
});
