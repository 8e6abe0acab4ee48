// The images a request carries, billed as the providers bill them, for the stand-in's usage
// (worked out here on their own terms, not with the gateway's code): OpenAI's 512-px tiles on
// gpt-4o, gpt-4o-mini and gpt-4.1; its 32-px patches times the model's multiplier on the
// others, shrunk to the patch budget as its vision guide describes; Claude's 28-px patches after
// its resize. The stand-in reads PNG images (what the tests send); other bytes add nothing, and
// images by URL are priced by server-state.ts.

type Json = Record<string, unknown>;
interface Size {
  width: number;
  height: number;
}

/** The size in a base64 PNG's header. */
function pngSize(base64: unknown): Size | undefined {
  if (typeof base64 !== 'string') return undefined;
  const b = Buffer.from(base64.slice(0, 32), 'base64');
  if (b.length < 24 || b.readUInt32BE(0) !== 0x89504e47 || b.toString('latin1', 12, 16) !== 'IHDR') return undefined;
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

const dataUrlBytes = (url: unknown): string | undefined =>
  typeof url === 'string' && /^data:[^,]*;base64,/.test(url) ? url.slice(url.indexOf(',') + 1) : undefined;

type OpenAIRule =
  | { tiles: [number, number] }
  | {
      multiplier: number;
      high: [patches: number, edge: number];
      original?: [patches: number, edge: number];
      autoIsOriginal?: boolean;
    };

function openAIRule(model: string): OpenAIRule | undefined {
  if (model.startsWith('gpt-4o-mini')) return { tiles: [2833, 5667] };
  if (model.startsWith('gpt-4o') || model.startsWith('gpt-4.1')) return { tiles: [85, 170] };
  if (model.startsWith('gpt-5.6'))
    return { multiplier: 1.2, high: [2500, 2048], original: [30_000, 65_535], autoIsOriginal: true };
  if (model.startsWith('gpt-5.5')) return { multiplier: 1.2, high: [2500, 2048], original: [10_000, 6000] };
  if (model.startsWith('gpt-5.4-mini')) return { multiplier: 1.62, high: [1536, 2048] };
  if (model.startsWith('gpt-5.4-nano')) return { multiplier: 2.46, high: [1536, 2048] };
  if (model.startsWith('gpt-5')) return { multiplier: 1.2, high: [1536, 2048] };
  return undefined; // xAI and DeepSeek: not modelled
}

function fit(s: Size, edge: number): Size {
  const scale = Math.min(1, edge / Math.max(s.width, s.height));
  return { width: Math.round(s.width * scale), height: Math.round(s.height * scale) };
}

/** OpenAI's patch count: the image as it is when it fits the budget, else shrunk to whole patches that do. */
function openAIPatches(size: Size, budget: number, edge: number): number {
  const { width: w, height: h } = fit(size, edge);
  const patches = Math.ceil(w / 32) * Math.ceil(h / 32);
  if (patches <= budget) return patches;
  const shrink = Math.sqrt((32 * 32 * budget) / (w * h));
  const across = (w * shrink) / 32;
  const down = (h * shrink) / 32;
  const adjust = Math.min(Math.floor(across) / across, Math.floor(down) / down);
  return Math.min(
    Math.ceil(Math.floor(w * shrink * adjust) / 32) * Math.ceil(Math.floor(h * shrink * adjust) / 32),
    budget,
  );
}

function openAIImage(model: string, size: Size | undefined, detail: unknown): number {
  const rule = openAIRule(model);
  if (!rule || !size) return 0;
  if ('tiles' in rule) {
    const [base, perTile] = rule.tiles;
    if (detail === 'low') return base;
    let { width: w, height: h } = fit(size, 2048);
    const short = Math.min(w, h);
    if (short > 768) [w, h] = [Math.round((w * 768) / short), Math.round((h * 768) / short)];
    return base + perTile * Math.ceil(w / 512) * Math.ceil(h / 512);
  }
  const original = rule.original && (detail === 'original' || (rule.autoIsOriginal && detail !== 'high'));
  const [budget, edge] = original ? rule.original! : rule.high;
  return Math.ceil(Number((openAIPatches(size, budget, edge) * rule.multiplier).toFixed(6)));
}

/** Claude's visual tokens: 28-px patches of the image resized to fit its model's edge and patch budget. */
function claudeImage(model: string, size: Size | undefined): number {
  if (!size) return 0;
  const [edge, budget] = /^claude-(opus-4-[7-9]|fable)/.test(model) ? [2576, 4784] : [1568, 1568];
  const patches = (s: Size) => Math.ceil(s.width / 28) * Math.ceil(s.height / 28);
  let fitted = fit(size, edge);
  if (patches(fitted) > budget) {
    // The largest size of the same aspect whose patches fit the budget.
    const scale = Math.sqrt((budget * 28 * 28) / (fitted.width * fitted.height));
    const [w, h] = [fitted.width * scale, fitted.height * scale];
    const long = Math.max(w, h);
    for (let side = Math.floor(long); side > 0; side--) {
      fitted = {
        width: Math.max(1, Math.floor((w * side) / long)),
        height: Math.max(1, Math.floor((h * side) / long)),
      };
      if (patches(fitted) <= budget) break;
    }
  }
  return patches(fitted);
}

const arr = (v: unknown): Json[] => (Array.isArray(v) ? (v as Json[]) : []);

/** Chat completions: `image_url` parts with a data URL. */
export function chatImageTokens(body: Json): number {
  const model = String(body.model ?? '');
  let n = 0;
  for (const m of arr(body.messages)) {
    for (const p of arr(m?.content)) {
      if (p?.type !== 'image_url') continue;
      const image = (p.image_url ?? {}) as Json;
      n += openAIImage(model, pngSize(dataUrlBytes(image.url)), image.detail);
    }
  }
  return n;
}

/** Responses: `input_image` parts with a data URL, in messages and in tool call outputs. */
export function responsesImageTokens(body: Json): number {
  const model = String(body.model ?? '');
  let n = 0;
  for (const item of arr(body.input)) {
    for (const p of [...arr(item?.content), ...arr(item?.output)])
      if (p?.type === 'input_image') n += openAIImage(model, pngSize(dataUrlBytes(p.image_url)), p.detail);
  }
  return n;
}

/** Messages: `image` blocks with a base64 source, in messages and in tool results. */
export function anthropicImageTokens(body: Json): number {
  const model = String(body.model ?? '');
  const blocks = (content: unknown): number =>
    arr(content).reduce(
      (n, b) =>
        n +
        (b?.type === 'image' && (b.source as Json | undefined)?.type === 'base64'
          ? claudeImage(model, pngSize((b.source as Json).data))
          : b?.type === 'tool_result'
            ? blocks(b.content)
            : 0),
      0,
    );
  return arr(body.messages).reduce((n, m) => n + blocks(m?.content), 0);
}
