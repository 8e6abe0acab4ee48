// Summarises a V8 CPU profile (`node --cpu-prof`): share of samples by function (self time) and
// by where the code lives (our src/, each npm package, Node's own internals, GC, idle).
// `node bench/profile-summary.ts FILE.cpuprofile [--top N]`; the bench calls it with --cpu-prof.
import fs from 'node:fs';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
export interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  samples: number;
  /** Share of samples (0..1) per function, largest first. */
  functions: { name: string; share: number }[];
  /** Share of samples per place: src/<folder>, an npm package, node internals, (garbage collector), (idle), (program). */
  places: { name: string; share: number }[];
  /** Busy samples by the innermost function of ours (src/) on the stack: what our code causes, library and native work included. */
  ownCallers: { name: string; share: number }[];
}

function placeOf(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm !== -1) {
    const rest = url.slice(nm + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) return 'node internals';
  const src = url.indexOf('/src/');
  if (src !== -1) {
    const parts = url.slice(src + 1).split('/');
    return parts.length > 2 ? `${parts[0]}/${parts[1]}` : parts[0]!;
  }
  return path.basename(url);
}

/** A profile's call tree (node by id, each node's parent) and the nodes of its samples taken within [fromMs, toMs] of its start. */
export function samplesIn(profile: Profile, fromMs = 0, toMs = Infinity) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const samples: ProfileNode[] = [];
  let t = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    t += profile.timeDeltas[i]! / 1000;
    if (t < fromMs || t > toMs) continue;
    const node = byId.get(profile.samples[i]!);
    if (node) samples.push(node);
  }
  return { byId, parent, samples };
}

/** Only samples taken within [fromMs, toMs] of the profile's start count (both optional). */
export function summarise(profile: Profile, top = 25, fromMs = 0, toMs = Infinity): ProfileSummary {
  const { byId, parent, samples } = samplesIn(profile, fromMs, toMs);
  const ownCount = new Map<string, number>();
  let busy = 0;
  const fnCount = new Map<string, number>();
  const placeCount = new Map<string, number>();
  let counted = 0;
  for (const node of samples) {
    const { functionName, url, lineNumber } = node.callFrame;
    const file = url ? url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*?\/(src|bench|test)\//, '$1/') : '';
    const name = `${functionName || '(anonymous)'}${file ? ` ${file}:${lineNumber + 1}` : ''}`;
    fnCount.set(name, (fnCount.get(name) ?? 0) + 1);
    const place = placeOf(url, functionName);
    placeCount.set(place, (placeCount.get(place) ?? 0) + 1);
    counted++;
    if (functionName !== '(idle)' && functionName !== '(program)' && functionName !== '(garbage collector)') {
      busy++;
      let own = '(no frame of ours: Node, Fastify, undici… on their own)';
      for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
        const f = byId.get(id)!.callFrame;
        const at = f.url.indexOf('/src/');
        if (at !== -1 && !f.url.includes('node_modules')) {
          own = `${f.functionName || '(anonymous)'} ${f.url.slice(at + 1)}:${f.lineNumber + 1}`;
          break;
        }
      }
      ownCount.set(own, (ownCount.get(own) ?? 0) + 1);
    }
  }
  const rank = (m: Map<string, number>, n: number) =>
    [...m]
      .sort((a, b) => b[1] - a[1])
      .slice(0, n)
      .map(([name, c]) => ({ name, share: c / Math.max(1, counted) }));
  const ownCallers = [...ownCount]
    .sort((a, b) => b[1] - a[1])
    .slice(0, top)
    .map(([name, c]) => ({ name, share: c / Math.max(1, busy) }));
  return { samples: counted, functions: rank(fnCount, top), places: rank(placeCount, 40), ownCallers };
}

export function formatSummary(s: ProfileSummary): string {
  const pct = (x: number) => `${(x * 100).toFixed(1).padStart(5)}%`;
  return [
    `  ${s.samples} samples; by place:`,
    ...s.places.filter((p) => p.share >= 0.005).map((p) => `    ${pct(p.share)}  ${p.name}`),
    '  top functions (self time):',
    ...s.functions.map((f) => `    ${pct(f.share)}  ${f.name}`),
    '  busy samples by the innermost function of ours on the stack (its library and native work included):',
    ...s.ownCallers.filter((f) => f.share >= 0.003).map((f) => `    ${pct(f.share)}  ${f.name}`),
  ].join('\n');
}

if (import.meta.filename === process.argv[1]) {
  const file = process.argv[2];
  if (!file) throw new Error('usage: node bench/profile-summary.ts FILE.cpuprofile [--top N]');
  const top = process.argv.includes('--top') ? Number(process.argv[process.argv.indexOf('--top') + 1]) : 40;
  console.log(formatSummary(summarise(JSON.parse(fs.readFileSync(file, 'utf8')) as Profile, top)));
}
