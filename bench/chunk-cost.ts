// What a streamed chat chunk costs the gateway's own code: the chunk processor's step
// (src/inference/routes/chat.ts: parse, the delivered text, usage) and the text written for the
// caller, either JSON.stringify of the parsed chunk (as every chunk was written before) or the
// provider's own text with the gateway's changes spliced in (src/inference/upstream/reply-text.ts).
// A chunk as the bench's simulator sends it to a caller who did not ask for usage: its
// `"usage":null` dropped. Prints µs per chunk, median of 5 × 200,000. Run: `node bench/chunk-cost.ts`.
import { ChatChunkProcessor } from '../src/inference/routes/chat.ts';

const CHUNK = JSON.stringify({
  id: 'chatcmpl-sim0123456789abcdef',
  object: 'chat.completion.chunk',
  created: 1_764_000_000,
  model: 'gpt-4o-mini',
  service_tier: 'default',
  system_fingerprint: 'fp_sim',
  choices: [{ index: 0, delta: { content: ' hello' }, logprobs: null, finish_reason: null }],
  usage: null,
});
const N = 200_000;

function microsPerChunk(write: (e: { data: object; text?: string }) => string): number {
  const runs: number[] = [];
  for (let r = 0; r < 5; r++) {
    let p = new ChatChunkProcessor('gpt-4o-mini', false);
    let bytes = 0;
    const t0 = performance.now();
    for (let i = 0; i < N; i++) {
      if (i % 1_000 === 0) p = new ChatChunkProcessor('gpt-4o-mini', false); // a stream's length of delivered text
      bytes += write(p.step({ event: 'message', data: CHUNK }).out![0]!).length;
    }
    runs.push(((performance.now() - t0) * 1_000) / N);
    if (bytes === 0) throw new Error('nothing written');
  }
  return runs.sort((a, b) => a - b)[2]!;
}

for (let round = 1; round <= 2; round++) {
  const stringified = microsPerChunk((e) => JSON.stringify(e.data));
  const spliced = microsPerChunk((e) => e.text ?? JSON.stringify(e.data));
  console.log(
    `round ${round}: step + JSON.stringify ${stringified.toFixed(2)} µs per chunk; step + the provider's text ${spliced.toFixed(2)} µs`,
  );
}
