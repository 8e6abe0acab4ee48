// A server-streaming call on a Transport, as Connect's promise client makes it, without the
// client's wrapper: that wrapper is a down-compiled async generator (__asyncGenerator,
// __asyncDelegator) costing several promises per message (its share of a stream's CPU is in
// docs/benchmark.md).
// Same transport, headers, signal and errors; the caller reads the messages with next().
import type { DescMethodServerStreaming, DescMessage, MessageInitShape, MessageShape } from '@bufbuild/protobuf';
import type { ContextValues, Transport } from '@connectrpc/connect';

export function serverStream<I extends DescMessage, O extends DescMessage>(
  transport: Transport,
  method: DescMethodServerStreaming<I, O>,
  input: MessageInitShape<I>,
  options: { headers?: Headers | Record<string, string>; signal?: AbortSignal; contextValues?: ContextValues },
): AsyncIterator<MessageShape<O>> {
  const response = transport.stream(
    method,
    options.signal,
    undefined,
    options.headers,
    new OneMessage(input),
    options.contextValues,
  );
  response.catch(() => {}); // surfaced by the first next()
  const it: AsyncIterator<MessageShape<O>> = {
    async next() {
      const messages = (await response).message[Symbol.asyncIterator]();
      it.next = () => messages.next(); // from the second message on: the transport's own iterator
      return messages.next();
    },
  };
  return it;
}

/**
 * A request of one message, as the Transport interface takes it (an async iterable). The
 * in-process transport reads `message` directly: iterating an async generator to get the one
 * message it holds was several promise turns on every stream's first-token path.
 */
export class OneMessage<T> implements AsyncIterable<T> {
  readonly message: T;

  constructor(message: T) {
    this.message = message;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    yield this.message;
  }
}
