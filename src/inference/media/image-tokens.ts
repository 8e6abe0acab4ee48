// Input images in input tokens, as each provider bills them (the model's rule is the catalogue's
// `vision`, src/catalogue/models.ts): what the hold counts for an image part, and what the
// tokenizer count adds for one. An image whose bytes are in the request is counted at its own
// size, read from its header; any other (by URL, by file id, unreadable) at the largest image
// the model takes. Every figure is an upper bound of what the provider bills: where the provider
// shrinks an image to a budget, the budget; where it rounds a scaled side, the side rounded up.
// Integer arithmetic only; a patch multiplier is applied as an exact fraction, rounded up.
import type { VisionBilling } from '../../catalogue/models.ts';
import { ceilDiv as ceilDivBig, parseDecimal } from '../../money/money.ts';
import { inputImageSize } from './image-size.ts';

/** The rules that put a number on an image (the others are the window, or no images at all). */
export type ImageTokenRule = Extract<VisionBilling, { kind: 'tiles' | 'patches' | 'claude' }>;

export interface PixelSize {
  width: number;
  height: number;
}

// OpenAI's tiles: fit in a 2048-px square, scale the short side down to 768, count 512-px tiles.
const TILE_BOX = 2_048;
const TILE_SHORT_SIDE = 768;
const TILE = 512;
/** At most 2 tiles across the short side (768 px) and 4 along the long one (2,048 px). */
const MOST_TILES = 8;
const OPENAI_PATCH = 32;
const CLAUDE_PATCH = 28;
/** Claude's rule of thumb: a token per 750 px². */
const CLAUDE_PX_PER_TOKEN = 750;
/** Past this side a stated size is no size (and products of sides stay exact in a double). */
const MOST_PX_PER_SIDE = 1_000_000;

/**
 * The most input tokens one image costs under `rule`: at its `size` when the request carries
 * its bytes, else the largest image the model takes; `detail` as the request asks (OpenAI's
 * `low`, `high`, `auto`, `original`; absent is `auto`).
 */
export function imageTokens(rule: ImageTokenRule, size: PixelSize | undefined, detail: unknown): number {
  const known =
    size && size.width > 0 && size.height > 0 && size.width <= MOST_PX_PER_SIDE && size.height <= MOST_PX_PER_SIDE
      ? size
      : undefined;
  switch (rule.kind) {
    case 'tiles':
      if (detail === 'low') return rule.baseTokens;
      return rule.baseTokens + rule.tileTokens * (known ? tiles(known) : MOST_TILES);
    case 'patches': {
      // `high` is the smaller budget; `auto` (and anything else) may mean `original` where the model has it.
      const level = detail === 'high' || !rule.original ? rule.high : rule.original;
      const patches = known
        ? Math.min(patchesOf(fitLongSide(known, level.maxEdge), OPENAI_PATCH), level.patches)
        : level.patches;
      const m = parseDecimal(rule.multiplier);
      return Number(ceilDivBig(BigInt(patches) * m.num, m.den));
    }
    case 'claude': {
      const most = ceilDiv(rule.maxPatches * CLAUDE_PATCH * CLAUDE_PATCH, CLAUDE_PX_PER_TOKEN);
      if (!known) return most;
      const fitted = fitLongSide(known, rule.maxEdge);
      const patches = patchesOf(fitted, CLAUDE_PATCH);
      // Over the patch budget Claude shrinks it: no more than the largest image it keeps.
      if (patches > rule.maxPatches) return most;
      return Math.max(patches, ceilDiv(fitted.width * fitted.height, CLAUDE_PX_PER_TOKEN));
    }
  }
}

/** The size of a base64 image from its header, or undefined when it is no image this can read. */
export function base64ImageSize(data: string): PixelSize | undefined {
  // PNG and WebP state their size in the first bytes; a JPEG or GIF may need all of them (its
  // frame header can follow large metadata). A size read from the first bytes is a complete one.
  return (
    inputImageSize(Buffer.from(data.slice(0, 64), 'base64')) ??
    (data.length > 64 ? inputImageSize(Buffer.from(data, 'base64')) : undefined)
  );
}

/** The base64 payload of a `data:…;base64,` URL, or undefined for any other URL. */
export function dataUrlBase64(url: string): string | undefined {
  if (!url.startsWith('data:')) return undefined;
  const comma = url.indexOf(',');
  return comma > 0 && url.slice(0, comma).endsWith(';base64') ? url.slice(comma + 1) : undefined;
}

function tiles(size: PixelSize): number {
  let { width: w, height: h } = fitLongSide(size, TILE_BOX);
  const short = Math.min(w, h);
  if (short > TILE_SHORT_SIDE) {
    w = ceilDiv(w * TILE_SHORT_SIDE, short);
    h = ceilDiv(h * TILE_SHORT_SIDE, short);
  }
  return Math.min(ceilDiv(w, TILE) * ceilDiv(h, TILE), MOST_TILES);
}

/** The image scaled down (aspect kept, sides rounded up) so that its long side is at most `edge`. */
function fitLongSide({ width, height }: PixelSize, edge: number): PixelSize {
  const long = Math.max(width, height);
  return long <= edge
    ? { width, height }
    : { width: ceilDiv(width * edge, long), height: ceilDiv(height * edge, long) };
}

function patchesOf({ width, height }: PixelSize, patch: number): number {
  return ceilDiv(width, patch) * ceilDiv(height, patch);
}

/** ⌈a / b⌉ for non-negative integers whose products stay below 2^53 (the check makes a rounded quotient exact). */
function ceilDiv(a: number, b: number): number {
  const q = Math.floor(a / b);
  return q * b < a ? q + 1 : q;
}
