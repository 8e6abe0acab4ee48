// Input images are held at what the model bills for them (docs/billing.md#images): the
// providers' own worked examples, sizes read from the image bytes, and the token bounds of the
// three wire formats.
import { describe, expect, it } from 'vitest';
import { worstInput } from '../../../src/billing/pricing.ts';
import { Catalogue } from '../../../src/catalogue/catalogue.ts';
import { chatPolicy } from '../../../src/metering/bill-policy.ts';
import type { CatalogueEntry } from '../../../src/catalogue/models.ts';
import { MODELS } from '../../../src/catalogue/shipped-book.ts';
import { loadConfig } from '../../../src/config/config.ts';
import {
  base64ImageSize,
  dataUrlBase64,
  imageTokens,
  type ImageTokenRule,
} from '../../../src/inference/media/image-tokens.ts';
import { inputImageSize } from '../../../src/inference/media/image-size.ts';
import {
  anthropicInputUpperBound,
  countAnthropicInput,
  countInputTokens,
  countResponsesInput,
  inputTokensUpperBound,
  responsesInputUpperBound,
} from '../../../src/inference/tokens.ts';
import { png } from '../../support/media-files.ts';

const model = (id: string): CatalogueEntry => MODELS.find((m) => m.id === id)!;
const rule = (id: string) => model(id).vision as ImageTokenRule;
const tokens = (id: string, width: number, height: number, detail?: string) =>
  imageTokens(rule(id), { width, height }, detail);
const largest = (id: string, detail?: string) => imageTokens(rule(id), undefined, detail);
const pngUrl = (width: number, height: number) => `data:image/png;base64,${png(width, height).toString('base64')}`;

function jpeg(frames: [number, number][], scan = true): Buffer {
  const app0 = [0xff, 0xe0, 0, 16, 0x4a, 0x46, 0x49, 0x46, 0, 1, 1, 0, 0, 1, 0, 1, 0, 0];
  const sofs = frames.flatMap(([w, h]) => [
    0xff,
    0xc0,
    0,
    17,
    8,
    h >> 8,
    h & 0xff,
    w >> 8,
    w & 0xff,
    3,
    1,
    0x22,
    0,
    2,
    0x11,
    1,
    3,
    0x11,
    1,
  ]);
  const sos = scan ? [0xff, 0xda, 0, 12, 3, 1, 0, 2, 0x11, 3, 0x11, 0, 63, 0, 0x12, 0x34, 0xff, 0xd9] : [];
  return Buffer.from([0xff, 0xd8, ...app0, ...sofs, ...sos]);
}

describe("OpenAI's tile models: the worked examples of its vision guide", () => {
  it('a 1024x1024 image at high detail costs 765 tokens on gpt-4o; 2048x4096 costs 1,105', () => {
    expect(tokens('gpt-4o', 1024, 1024, 'high')).toBe(765);
    expect(tokens('gpt-4o', 2048, 4096, 'high')).toBe(1105);
  });

  it('detail low costs the base tokens whatever the size; auto counts as high', () => {
    expect(tokens('gpt-4o', 4096, 8192, 'low')).toBe(85);
    expect(tokens('gpt-4o-mini', 4096, 8192, 'low')).toBe(2833);
    expect(tokens('gpt-4o', 1024, 1024)).toBe(765);
  });

  it('gpt-4o-mini bills a 1536x768 image at 36,835 tokens, its largest at 48,169 (eight tiles)', () => {
    expect(tokens('gpt-4o-mini', 1536, 768, 'high')).toBe(2833 + 6 * 5667);
    expect(tokens('gpt-4o-mini', 1536, 768, 'high')).toBe(36_835);
    expect(largest('gpt-4o-mini')).toBe(48_169);
    expect(tokens('gpt-4o-mini', 3000, 1125)).toBe(48_169); // fitted to 2048x768: 4x2 tiles
    expect(largest('gpt-4o')).toBe(85 + 8 * 170);
  });

  it('a small image is not scaled up: 512x512 is one tile', () => {
    expect(tokens('gpt-4o', 512, 512)).toBe(255);
    expect(tokens('gpt-4.1', 128, 64)).toBe(255);
  });
});

describe("OpenAI's patch models: 32-px patches times the model's multiplier, exactly", () => {
  it('a 1024x1024 image is 1,024 patches: 1,659 tokens on gpt-5.4-mini (x1.62), 2,520 on gpt-5.4-nano (x2.46)', () => {
    expect(tokens('gpt-5.4-mini', 1024, 1024)).toBe(1659);
    expect(tokens('gpt-5.4-nano', 1024, 1024)).toBe(2520);
  });

  it('the multiplier is applied as a fraction: 150 patches x 1.62 is 243 tokens, not the 244 a float would round up to', () => {
    expect(150 * 1.62).toBeGreaterThan(243); // the float the gateway does not use
    expect(tokens('gpt-5.4-mini', 480, 320)).toBe(243);
    expect(tokens('gpt-5.4-mini', 96, 32)).toBe(5); // 3 patches x 1.62 = 4.86
  });

  it('an image past the patch budget is held at the budget (OpenAI shrinks 1800x2400 to 1,452 patches; the hold keeps 1,536)', () => {
    expect(tokens('gpt-5.4-mini', 1800, 2400)).toBe(2489); // ceil(1536 x 1.62)
    expect(tokens('gpt-5.4-mini', 1800, 2400)).toBeGreaterThanOrEqual(Math.ceil(1452 * 1.62));
    expect(largest('gpt-5.4-mini')).toBe(2489);
  });

  it('GPT-5.6 reads an image at its own size unless asked for high: 4000x2500 is 11,850 tokens, 3,000 at high', () => {
    expect(tokens('gpt-5.6-sol', 4000, 2500)).toBe(11_850); // 125 x 79 patches x 1.2
    expect(tokens('gpt-5.6-sol', 4000, 2500, 'original')).toBe(11_850);
    expect(tokens('gpt-5.6-sol', 4000, 2500, 'high')).toBe(3000); // fitted to 2048x1280: over 2,500 patches
    expect(largest('gpt-5.6-sol')).toBe(36_000);
    expect(largest('gpt-5.6-sol', 'high')).toBe(3000);
    expect(largest('gpt-5.5')).toBe(12_000);
  });

  it('detail low does not lower a patch model', () => {
    expect(tokens('gpt-5.4-mini', 1024, 1024, 'low')).toBe(1659);
  });
});

describe("Claude: w·h/750 after Claude's resize, or its 28-px patches where that is more", () => {
  it('a 1092x1092 image costs 1,590 tokens, 1000x1000 costs 1,334 (the vision guide’s table)', () => {
    expect(tokens('claude-sonnet-4-6', 1092, 1092)).toBe(1590);
    expect(tokens('claude-sonnet-4-6', 1000, 1000)).toBe(1334);
  });

  it('a small image counts its padded patches: 200x200 is 8x8 patches, 64 tokens', () => {
    expect(tokens('claude-haiku-4-5', 200, 200)).toBe(64);
  });

  it('the largest image: 1,640 tokens up to the 4.6 models, 5,001 on Opus 4.8', () => {
    expect(largest('claude-sonnet-4-6')).toBe(1640); // 1,568 patches of 784 px², per 750 px²
    expect(tokens('claude-sonnet-4-6', 4000, 3000)).toBe(1640);
    expect(largest('claude-opus-4-8')).toBe(5001);
    expect(tokens('claude-opus-4-8', 2000, 2000)).toBe(5001); // 72x72 patches: over 4,784, shrunk
    expect(tokens('claude-opus-4-8', 1500, 1000)).toBe(2000); // 1,500,000 px / 750
  });
});

describe('image sizes read from the bytes', () => {
  it('PNG, JPEG, GIF and WebP', () => {
    expect(inputImageSize(png(1536, 768))).toMatchObject({ width: 1536, height: 768 });
    expect(inputImageSize(jpeg([[1280, 720]]))).toMatchObject({ format: 'jpeg', width: 1280, height: 720 });
    const gif = Buffer.from([
      ...Buffer.from('GIF89a'),
      0x40,
      0x01,
      0xf0,
      0x00,
      0x00,
      0,
      0,
      0x2c,
      0,
      0,
      0,
      0,
      0x40,
      0x01,
      0xf0,
      0x00,
      0,
    ]);
    expect(inputImageSize(gif)).toMatchObject({ format: 'gif', width: 320, height: 240 });
    const webp = Buffer.alloc(30);
    webp.write('RIFF', 0, 'latin1');
    webp.write('WEBPVP8X', 8, 'latin1');
    webp.writeUIntLE(1999, 24, 3);
    webp.writeUIntLE(999, 27, 3);
    expect(inputImageSize(webp)).toMatchObject({ format: 'webp', width: 2000, height: 1000 });
  });

  it('a JPEG stating two frame sizes counts as the larger; one cut off before its scan has no size', () => {
    expect(
      inputImageSize(
        jpeg([
          [16, 16],
          [4000, 3000],
        ]),
      ),
    ).toMatchObject({ width: 4000, height: 3000 });
    expect(inputImageSize(jpeg([[1280, 720]], false))).toBeUndefined();
  });

  it('a GIF frame reaching past its screen widens it', () => {
    const gif = Buffer.from([
      ...Buffer.from('GIF89a'),
      16,
      0,
      16,
      0,
      0,
      0,
      0,
      0x2c,
      0,
      0,
      0,
      0,
      0x00,
      0x08,
      0x00,
      0x04,
      0,
    ]);
    expect(inputImageSize(gif)).toMatchObject({ width: 2048, height: 1024 });
  });

  it('a data URL: its base64 bytes, however far the JPEG frame header sits', () => {
    expect(dataUrlBase64('data:image/png;base64,AAAA')).toBe('AAAA');
    expect(dataUrlBase64('https://img.example/a.png')).toBeUndefined();
    expect(dataUrlBase64('data:image/svg+xml,<svg/>')).toBeUndefined();
    const withMetadata = Buffer.concat([
      jpeg([]).subarray(0, 2),
      Buffer.from([0xff, 0xe1, 0xff, 0xff]),
      Buffer.alloc(65_533),
      jpeg([[3000, 2000]]).subarray(2),
    ]);
    expect(base64ImageSize(withMetadata.toString('base64'))).toMatchObject({ width: 3000, height: 2000 });
    expect(base64ImageSize(Buffer.alloc(5000).toString('base64'))).toBeUndefined();
  });
});

describe('the token bounds count images as the model bills them', () => {
  const tenImages = (detail?: 'low') => ({
    model: 'gpt-4o-mini',
    max_tokens: 16,
    messages: [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Compare these.' },
          ...Array.from({ length: 10 }, () => ({
            type: 'image_url',
            image_url: { url: pngUrl(1536, 768), ...(detail ? { detail } : {}) },
          })),
        ],
      },
    ],
  });

  it('ten 1536x768 PNGs on gpt-4o-mini: the hold bound and the tokenizer count both cover 368,350 image tokens', () => {
    const body = tenImages();
    expect(inputTokensUpperBound(body, model('gpt-4o-mini'))).toBeGreaterThanOrEqual(368_350);
    expect(countInputTokens(body, model('gpt-4o-mini'))).toBeGreaterThanOrEqual(368_350);
    expect(inputTokensUpperBound(body, model('gpt-4o-mini'))).toBeGreaterThanOrEqual(
      countInputTokens(body, model('gpt-4o-mini')),
    );
    expect(inputTokensUpperBound(body, model('gpt-4o-mini'))).toBeLessThan(368_350 + 200); // the parts' JSON framing, not the base64 as text
  });

  it('at detail low, each is its base tokens', () => {
    const bound = inputTokensUpperBound(tenImages('low'), model('gpt-4o-mini'));
    expect(bound).toBeGreaterThanOrEqual(28_330);
    expect(bound).toBeLessThan(28_330 + 200);
  });

  it('an image by URL, or bytes that are no image, is held as the largest image the model takes', () => {
    const body = (url: string) => ({
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url } }] }],
    });
    const text = inputTokensUpperBound({ messages: [{ role: 'user', content: [] }] }, model('gpt-4o-mini'));
    // The image's place in the message's JSON text counts as a null beside it.
    const image = 48_169 + 'null'.length;
    expect(inputTokensUpperBound(body('https://img.example/a.png'), model('gpt-4o-mini')) - text).toBe(image);
    expect(inputTokensUpperBound(body(`data:image/png;base64,${'A'.repeat(8000)}`), model('gpt-4o-mini')) - text).toBe(
      image,
    );
  });

  it('five images by URL on gpt-4o-mini hold their 240,845 tokens, more than its 128,000-token window', () => {
    const gpt4oMini = new Catalogue(loadConfig({ OPENAI_API_KEY: 'k' })).get('gpt-4o-mini')!;
    const body = {
      model: 'gpt-4o-mini',
      messages: [
        {
          role: 'user',
          content: Array.from({ length: 5 }, (_, i) => ({
            type: 'image_url',
            image_url: { url: `https://img.example/${i}.png` },
          })),
        },
      ],
    };
    const policy = chatPolicy(body, gpt4oMini);
    expect(policy.worst.unseen).toBe('an image by URL');
    expect(worstInput(policy.worst, BigInt(inputTokensUpperBound(body, gpt4oMini)))).toBeGreaterThanOrEqual(
      5n * 48_169n,
    );
  });

  it('Claude through chat counts an image_url by Claude’s rule', () => {
    const body = {
      messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: pngUrl(2000, 2000) } }] }],
    };
    expect(inputTokensUpperBound(body, model('claude-opus-4-8'))).toBeGreaterThanOrEqual(5001);
  });

  it('a Claude base64 image block, also inside a tool result', () => {
    const image = {
      type: 'image',
      source: { type: 'base64', media_type: 'image/png', data: png(2000, 2000).toString('base64') },
    };
    const body = {
      messages: [
        {
          role: 'user',
          content: [image, { type: 'tool_result', tool_use_id: 't', content: [image] }, { type: 'text', text: 'and?' }],
        },
      ],
    };
    expect(anthropicInputUpperBound(body, model('claude-opus-4-8'))).toBeGreaterThanOrEqual(2 * 5001);
    expect(countAnthropicInput(body, model('claude-opus-4-8'))).toBeGreaterThanOrEqual(2 * 5001);
    expect(anthropicInputUpperBound(body, model('claude-sonnet-4-6'))).toBeLessThan(2 * 1640 + 200);
  });

  it('a Responses input_image, also in a tool call’s output, and a computer screenshot', () => {
    const url = pngUrl(2400, 1600); // 75 x 50 patches: 4,500 tokens at x1.2
    const body = {
      input: [
        {
          role: 'user',
          content: [
            { type: 'input_image', image_url: url },
            { type: 'input_text', text: 'and this?' },
          ],
        },
        { type: 'function_call_output', call_id: 'c', output: [{ type: 'input_image', image_url: url }] },
        { type: 'computer_call_output', call_id: 'd', output: { type: 'computer_screenshot', image_url: url } },
      ],
    };
    const bound = responsesInputUpperBound(body, model('gpt-5.6-sol'));
    expect(bound).toBeGreaterThanOrEqual(3 * 4500);
    expect(bound).toBeLessThan(3 * 4500 + 400); // the images are not counted as text too
    expect(countResponsesInput(body, model('gpt-5.6-sol'))).toBeGreaterThanOrEqual(3 * 4500);
  });

  it('xAI publishes no rule: a request with an image holds at least the context window', () => {
    const body = { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: pngUrl(64, 64) } }] }] };
    expect(inputTokensUpperBound(body, model('grok-4'))).toBe(256_000);
    expect(countInputTokens(body, model('grok-4'))).toBe(256_000);
  });

  it('DeepSeek reads no images: an image part counts by its bytes, as any other part', () => {
    const part = { type: 'image_url', image_url: { url: pngUrl(64, 64) } };
    const body = { messages: [{ role: 'user', content: [part] }] };
    expect(inputTokensUpperBound(body, model('deepseek-chat'))).toBe(
      16 + 8 + Buffer.byteLength(JSON.stringify(body.messages[0])),
    );
  });

  it('a request without images counts as before, whatever the model', () => {
    const body = {
      messages: [{ role: 'user', content: [{ type: 'text', text: 'hello' }] }],
      tools: [{ type: 'function', function: { name: 'f' } }],
    };
    for (const id of ['gpt-4o-mini', 'claude-opus-4-8', 'grok-4', 'deepseek-chat'])
      expect(inputTokensUpperBound(body, model(id))).toBe(inputTokensUpperBound(body));
  });
});

describe('the catalogue says how every chat model bills an image', () => {
  it('every chat model has a rule, and a chat model without one stops the start', () => {
    for (const m of MODELS.filter((m) => m.kind === 'chat')) expect(m.vision, m.id).toBeDefined();
    const { vision: _, ...bare } = model('gpt-4o');
    expect(() => new Catalogue(loadConfig({}), [bare])).toThrow(/catalogue entry gpt-4o: .*vision/);
    expect(
      () =>
        new Catalogue(loadConfig({}), [
          { ...bare, vision: { kind: 'patches', multiplier: '1,62', high: { patches: 1536, maxEdge: 2048 } } },
        ]),
    ).toThrow();
  });
});
