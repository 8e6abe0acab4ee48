// A stand-in for an OpenTelemetry Collector, receiving traces as a real one does: OTLP/HTTP
// (binary protobuf, and OTLP/JSON) on one port, OTLP/gRPC on another, decoded with the official
// OTLP .proto files (test/fixtures/otlp, loaded at run time: no generated code) so that what the
// gateway exports is read as any collector would read it, not as our own exporter thinks it wrote it.
//
// Every span received is kept as a flat ReceivedSpan (ids in lowercase hex, times and int
// attributes as bigint: nano-USD amounts travel in int64 attributes and must not lose a digit),
// and every request body as received (gunzipped), so a test can search all that was exported for
// a secret. Faults for "the collector went away mid-run": stop() makes both ports refuse
// connections until start() listens again on the same ones; slow(ms) holds every answer back.
import http from 'node:http';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';

/** An attribute value as received: int_value as bigint, double_value as number, bytes as Buffer, kvlist as an object; null for an empty AnyValue. */
export type OtlpValue = string | number | boolean | bigint | Buffer | null | OtlpValue[] | { [key: string]: OtlpValue };
export type OtlpAttributes = Record<string, OtlpValue>;

/** One span as received, flat. Enum values are the .proto names: kind 'SPAN_KIND_SERVER', status code 'STATUS_CODE_ERROR'. */
export interface ReceivedSpan {
  /** 32 lowercase hex digits. */
  traceId: string;
  /** 16 lowercase hex digits. */
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** 'SPAN_KIND_UNSPECIFIED' | 'SPAN_KIND_INTERNAL' | 'SPAN_KIND_SERVER' | 'SPAN_KIND_CLIENT' | 'SPAN_KIND_PRODUCER' | 'SPAN_KIND_CONSUMER'. */
  kind: string;
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  attributes: OtlpAttributes;
  events: { name: string; timeUnixNano: bigint; attributes: OtlpAttributes }[];
  links: { traceId: string; spanId: string; attributes: OtlpAttributes }[];
  /** code: 'STATUS_CODE_UNSET' | 'STATUS_CODE_OK' | 'STATUS_CODE_ERROR'. */
  status: { code: string; message: string };
  /** The attributes of the span's Resource (service.name, …). */
  resource: OtlpAttributes;
  scope: { name: string; version: string };
  via: 'http' | 'grpc';
}

/** One export request as it arrived: its headers (gRPC: metadata) and its body, gunzipped (gRPC: the message, without framing). */
export interface RawExport {
  via: 'http' | 'grpc';
  headers: Record<string, string>;
  body: Buffer;
}

export interface OtlpReceiverOptions {
  /** `false` keeps no RawExport (a long run that never searches the bytes). Default true. */
  keepRaw?: boolean;
}

const PROTO_ROOT = fileURLToPath(new URL('../fixtures/otlp/', import.meta.url));
const TRACE_SERVICE = 'opentelemetry.proto.collector.trace.v1.TraceService';
const PROTOBUF = 'application/x-protobuf';
const JSON_TYPE = 'application/json';
/** What the OTLP specification recommends a server accept, after decompression. */
const MAX_BODY = 64 * 1024 * 1024;

// What the decoder gives (protobufjs objects, camelCase) and what OTLP/JSON carries have the same
// field names; they differ in ids (bytes vs hex), enums (names vs numbers) and 64-bit integers
// (decimal strings vs strings, numbers or, past 2^53, bigint), so each field takes either.
type Id = Uint8Array | string;
type Int64 = string | number | bigint;
interface WireAnyValue {
  /** protobufjs's name of the oneof member that is set; OTLP/JSON has none. */
  value?: string;
  stringValue?: string;
  boolValue?: boolean;
  intValue?: Int64;
  doubleValue?: number | string;
  arrayValue?: { values?: WireAnyValue[] };
  kvlistValue?: { values?: WireKeyValue[] };
  bytesValue?: Id;
  stringValueStrindex?: number;
}
interface WireKeyValue {
  key?: string;
  value?: WireAnyValue;
}
interface WireSpan {
  traceId?: Id;
  spanId?: Id;
  parentSpanId?: Id;
  name?: string;
  kind?: string | number;
  startTimeUnixNano?: Int64;
  endTimeUnixNano?: Int64;
  attributes?: WireKeyValue[];
  events?: { name?: string; timeUnixNano?: Int64; attributes?: WireKeyValue[] }[];
  links?: { traceId?: Id; spanId?: Id; attributes?: WireKeyValue[] }[];
  status?: { code?: string | number; message?: string };
}
interface WireRequest {
  resourceSpans?: {
    resource?: { attributes?: WireKeyValue[] };
    scopeSpans?: { scope?: { name?: string; version?: string }; spans?: WireSpan[] }[];
  }[];
}
/** What the gRPC handler gets: the bytes, and what they decode to or why they do not. */
interface GrpcExport {
  bytes: Buffer;
  request?: WireRequest;
  error?: string;
}
interface EnumDescriptor {
  name: string;
  value: { name: string; number: number }[];
}

/** The Export method and the enum names of the official definitions, loaded once. */
interface Otlp {
  exportMethod: protoLoader.MethodDefinition<WireRequest, object>;
  spanKinds: Map<number, string>;
  statusCodes: Map<number, string>;
}
let loaded: Otlp | undefined;

function otlp(): Otlp {
  if (loaded) return loaded;
  const defs = protoLoader.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', {
    includeDirs: [PROTO_ROOT],
    longs: String, // fixed64 times and int64 values as exact decimal strings; made bigint when flattened
    enums: String,
    defaults: true,
    arrays: true,
    oneofs: true, // AnyValue.value names the member that is set, so an empty string is still a string
  });
  const service = defs[TRACE_SERVICE] as protoLoader.ServiceDefinition;
  // Nested enums are in their message's descriptor: read the names from there, not from a copy of them.
  const enumOf = (message: string, name: string) => {
    const type = (defs[message] as protoLoader.MessageTypeDefinition<object, object>).type as {
      enumType: EnumDescriptor[];
    };
    const found = type.enumType.find((e) => e.name === name);
    if (!found) throw new Error(`otlp-receiver: no enum ${message}.${name} in the OTLP protos`);
    return new Map(found.value.map((v) => [v.number, v.name]));
  };
  loaded = {
    exportMethod: service.Export as protoLoader.MethodDefinition<WireRequest, object>,
    spanKinds: enumOf('opentelemetry.proto.trace.v1.Span', 'SpanKind'),
    statusCodes: enumOf('opentelemetry.proto.trace.v1.Status', 'StatusCode'),
  };
  return loaded;
}

export class OtlpReceiver {
  /** Export requests received since the last clear(), by protocol (those answered with an error too). */
  readonly requests = { http: 0, grpc: 0 };
  /** Every export request received since the last clear(), in order (unless keepRaw is false). */
  readonly raw: RawExport[] = [];
  /** Requests the receiver could not decode, with why: a test that expects spans can say why none came. */
  readonly rejected: { via: 'http' | 'grpc'; reason: string }[] = [];
  private readonly received: ReceivedSpan[] = [];
  private readonly keepRaw: boolean;
  private readonly httpServer = http.createServer((req, res) => void this.onHttp(req, res));
  private grpcServer: grpc.Server | undefined;
  private httpPort = 0;
  private grpcPort = 0;
  private delayMs = 0;
  /** Bumped by stop(): an answer held back by slow() from before it is dropped, not sent on a newer listener. */
  private generation = 0;
  private readonly pending = new Set<{ timer: NodeJS.Timeout; resolve: () => void }>();

  constructor(options: OtlpReceiverOptions = {}) {
    this.keepRaw = options.keepRaw ?? true;
  }

  /** The base URL OTEL_EXPORTER_OTLP_ENDPOINT takes (exporters append /v1/traces). */
  get httpEndpoint(): string {
    return `http://127.0.0.1:${this.port(this.httpPort)}`;
  }

  /** The URL an OTLP/gRPC exporter takes (insecure: http). */
  get grpcEndpoint(): string {
    return `http://127.0.0.1:${this.port(this.grpcPort)}`;
  }

  /**
   * Listens on 127.0.0.1: on ephemeral ports the first time, on the same ports after stop().
   * Does nothing if already listening.
   */
  async start(): Promise<void> {
    if (!this.httpServer.listening) await this.listenHttp();
    if (!this.grpcServer) await this.listenGrpc();
  }

  /** Closes both listeners and every open connection: until start(), both ports refuse connections. */
  async stop(): Promise<void> {
    this.generation++;
    for (const p of this.pending) {
      clearTimeout(p.timer);
      p.resolve();
    }
    this.pending.clear();
    this.grpcServer?.forceShutdown();
    this.grpcServer = undefined;
    if (!this.httpServer.listening) return;
    const closed = new Promise<void>((resolve) => this.httpServer.close(() => resolve()));
    this.httpServer.closeAllConnections();
    await closed;
  }

  /** Teardown: stop() for good. */
  close(): Promise<void> {
    return this.stop();
  }

  /** Holds every answer back `ms` (the spans are kept on arrival, as a collector accepts them before it answers); 0 answers at once again. */
  slow(ms: number): void {
    this.delayMs = ms;
  }

  /** Every span received since the last clear(), in the order they arrived. */
  spans(): ReceivedSpan[] {
    return [...this.received];
  }

  /** The spans of one trace (`traceId` in hex, any case), earliest start first; a parent before a child that starts with it. */
  trace(traceId: string): ReceivedSpan[] {
    const id = traceId.toLowerCase();
    const spans = this.received.filter((s) => s.traceId === id);
    // Times are often whole milliseconds, so a parent and its first child can start together.
    const byId = new Map(spans.map((s) => [s.spanId, s]));
    const depth = (s: ReceivedSpan, seen = 0): number => {
      const parent = byId.get(s.parentSpanId);
      return parent && seen < spans.length ? 1 + depth(parent, seen + 1) : 0;
    };
    return spans
      .map((s) => ({ s, depth: depth(s) }))
      .sort((a, b) =>
        a.s.startTimeUnixNano !== b.s.startTimeUnixNano
          ? a.s.startTimeUnixNano < b.s.startTimeUnixNano
            ? -1
            : 1
          : a.depth - b.depth,
      )
      .map(({ s }) => s);
  }

  /**
   * The spans that match, once there is at least one: exporters send on their own schedule, so a
   * test waits for what it expects rather than for a fixed time. Rejects after `timeoutMs` with
   * what did arrive.
   */
  async waitFor(predicate: (span: ReceivedSpan) => boolean, timeoutMs = 5_000): Promise<ReceivedSpan[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const matching = this.received.filter(predicate);
      if (matching.length > 0) return matching;
      if (Date.now() >= deadline) throw new Error(this.describeMiss(predicate, timeoutMs));
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /** The exports whose headers or body contain `needle` (a secret that must never leave the gateway). */
  rawContaining(needle: string | Buffer): RawExport[] {
    const bytes = typeof needle === 'string' ? Buffer.from(needle) : needle;
    return this.raw.filter((r) => {
      const headers = Object.entries(r.headers).map(([k, v]) => `${k}: ${v}`);
      return r.body.includes(bytes) || Buffer.from(headers.join('\n')).includes(bytes);
    });
  }

  /** Forgets the spans, raw requests, rejections and counts (not the fault modes). */
  clear(): void {
    this.received.length = 0;
    this.raw.length = 0;
    this.rejected.length = 0;
    this.requests.http = 0;
    this.requests.grpc = 0;
  }

  private port(port: number): number {
    if (port === 0) throw new Error('OtlpReceiver: start() it first');
    return port;
  }

  private describeMiss(predicate: (span: ReceivedSpan) => boolean, timeoutMs: number): string {
    const names = this.received.map((s) => `${s.name} (${s.via})`);
    const rejected = this.rejected.map((r) => `${r.via}: ${r.reason}`);
    return [
      `OtlpReceiver.waitFor: no span matched ${predicate.toString()} within ${timeoutMs} ms.`,
      `Export requests received: ${this.requests.http} OTLP/HTTP, ${this.requests.grpc} OTLP/gRPC.`,
      `Spans received (${names.length}): ${names.join(', ') || 'none'}.`,
      ...(rejected.length > 0 ? [`Rejected: ${rejected.join('; ')}.`] : []),
    ].join('\n');
  }

  private listenHttp(): Promise<void> {
    return new Promise((resolve, reject) => {
      this.httpServer.once('error', reject);
      this.httpServer.listen(this.httpPort, '127.0.0.1', () => {
        this.httpServer.off('error', reject);
        this.httpPort = (this.httpServer.address() as { port: number }).port;
        resolve();
      });
    });
  }

  private listenGrpc(): Promise<void> {
    // A shut-down grpc.Server cannot listen again: a new one on the same port.
    const server = new grpc.Server();
    const exportMethod = otlp().exportMethod;
    const definition: grpc.ServiceDefinition = {
      Export: {
        ...exportMethod,
        // Keeps the message's bytes beside what they decode to, for the raw log; a message that does
        // not decode reaches the handler too, to be answered and counted as the HTTP side does.
        requestDeserialize: (bytes: Buffer): GrpcExport => {
          try {
            return { bytes, request: exportMethod.requestDeserialize(bytes) };
          } catch (err) {
            return { bytes, error: (err as Error).message };
          }
        },
      },
    };
    server.addService(definition, {
      Export: (call: grpc.ServerUnaryCall<GrpcExport, object>, callback: grpc.sendUnaryData<object>) =>
        void this.onGrpc(call, callback),
    });
    return new Promise((resolve, reject) => {
      server.bindAsync(`127.0.0.1:${this.grpcPort}`, grpc.ServerCredentials.createInsecure(), (err, port) => {
        if (err) return reject(err);
        this.grpcPort = port;
        this.grpcServer = server;
        resolve();
      });
    });
  }

  private async onGrpc(call: grpc.ServerUnaryCall<GrpcExport, object>, callback: grpc.sendUnaryData<object>) {
    const generation = this.generation;
    this.requests.grpc++;
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(call.metadata.getMap()))
      headers[k] = Buffer.isBuffer(v) ? v.toString('hex') : v;
    const { bytes, request, error } = call.request;
    this.keep({ via: 'grpc', headers, body: bytes });
    if (!request) {
      const reason = `not an ExportTraceServiceRequest: ${error}`;
      this.rejected.push({ via: 'grpc', reason });
      return callback({ code: grpc.status.INVALID_ARGUMENT, details: reason });
    }
    this.received.push(...this.flatten(request, 'grpc'));
    await this.pause();
    if (generation === this.generation) callback(null, {});
  }

  private async onHttp(req: http.IncomingMessage, res: http.ServerResponse) {
    const generation = this.generation;
    const path = (req.url ?? '').split('?')[0];
    if (path !== '/v1/traces') return answerError(res, 404, `no OTLP endpoint at ${path}`);
    if (req.method !== 'POST') return answerError(res, 405, 'OTLP exports are POSTs');
    this.requests.http++;
    const type = (req.headers['content-type'] ?? '').split(';')[0]!.trim().toLowerCase();
    if (type !== PROTOBUF && type !== JSON_TYPE)
      return this.reject(res, 415, `content-type ${type || '(none)'}: OTLP/HTTP is ${PROTOBUF} or ${JSON_TYPE}`);
    const encoding = (req.headers['content-encoding'] ?? 'identity').toLowerCase();
    if (encoding !== 'identity' && encoding !== 'gzip') return this.reject(res, 415, `content-encoding ${encoding}`);
    let body: Buffer;
    try {
      body = await readBody(req);
      if (encoding === 'gzip') body = zlib.gunzipSync(body, { maxOutputLength: MAX_BODY });
    } catch (err) {
      return this.reject(res, (err as { status?: number }).status ?? 400, `body: ${(err as Error).message}`, type);
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers[k] = String(v);
    this.keep({ via: 'http', headers, body });
    let request: WireRequest;
    try {
      request = type === PROTOBUF ? otlp().exportMethod.requestDeserialize(body) : parseOtlpJson(body);
    } catch (err) {
      return this.reject(res, 400, `not an ExportTraceServiceRequest: ${(err as Error).message}`, type);
    }
    this.received.push(...this.flatten(request, 'http'));
    await this.pause();
    if (generation !== this.generation || res.destroyed) return;
    // An empty ExportTraceServiceResponse: full success, partial_success unset.
    const answer = type === PROTOBUF ? otlp().exportMethod.responseSerialize({}) : Buffer.from('{}');
    res.writeHead(200, { 'content-type': type, 'content-length': answer.length });
    res.end(answer);
  }

  private reject(res: http.ServerResponse, status: number, reason: string, type = PROTOBUF) {
    this.rejected.push({ via: 'http', reason });
    answerError(res, status, reason, type);
  }

  private keep(raw: RawExport) {
    if (this.keepRaw) this.raw.push(raw);
  }

  private pause(): Promise<void> {
    if (this.delayMs <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      // Unref'd: an answer held back never keeps the test run alive.
      const p = { timer: setTimeout(() => done(), this.delayMs).unref(), resolve: () => resolve() };
      const done = () => {
        this.pending.delete(p);
        resolve();
      };
      this.pending.add(p);
    });
  }

  private flatten(request: WireRequest, via: 'http' | 'grpc'): ReceivedSpan[] {
    const { spanKinds, statusCodes } = otlp();
    const out: ReceivedSpan[] = [];
    for (const rs of request.resourceSpans ?? []) {
      const resource = attributes(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        const scope = { name: ss.scope?.name ?? '', version: ss.scope?.version ?? '' };
        for (const s of ss.spans ?? []) {
          out.push({
            traceId: hex(s.traceId),
            spanId: hex(s.spanId),
            parentSpanId: hex(s.parentSpanId),
            name: s.name ?? '',
            kind: enumName(spanKinds, s.kind),
            startTimeUnixNano: BigInt(s.startTimeUnixNano ?? 0),
            endTimeUnixNano: BigInt(s.endTimeUnixNano ?? 0),
            attributes: attributes(s.attributes),
            events: (s.events ?? []).map((e) => ({
              name: e.name ?? '',
              timeUnixNano: BigInt(e.timeUnixNano ?? 0),
              attributes: attributes(e.attributes),
            })),
            links: (s.links ?? []).map((l) => ({
              traceId: hex(l.traceId),
              spanId: hex(l.spanId),
              attributes: attributes(l.attributes),
            })),
            status: { code: enumName(statusCodes, s.status?.code), message: s.status?.message ?? '' },
            resource: { ...resource },
            scope: { ...scope },
            via,
          });
        }
      }
    }
    return out;
  }
}

/** A started receiver (both ports listening). */
export async function startOtlpReceiver(options: OtlpReceiverOptions = {}): Promise<OtlpReceiver> {
  const receiver = new OtlpReceiver(options);
  await receiver.start();
  return receiver;
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    // Past the limit the rest is read and dropped, so the 413 reaches a client still sending.
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY) chunks.push(chunk);
    });
    req.on('end', () =>
      size > MAX_BODY
        ? reject(Object.assign(new Error(`over ${MAX_BODY} bytes`), { status: 413 }))
        : resolve(Buffer.concat(chunks)),
    );
    req.on('error', reject);
  });
}

/**
 * OTLP/JSON, 64-bit integers kept exact: the proto3 JSON mapping allows them as bare numbers,
 * which JSON.parse would round past 2^53, so an integer literal that large is read from its
 * source text as a bigint.
 */
function parseOtlpJson(body: Buffer): WireRequest {
  return JSON.parse(body.toString('utf8'), (_key, value: unknown, context?: { source?: string }) =>
    typeof value === 'number' && !Number.isSafeInteger(value) && /^-?\d+$/.test(context?.source ?? '')
      ? BigInt(context!.source!)
      : value,
  ) as WireRequest;
}

/** Ids as lowercase hex: bytes from protobuf, hex (any case, per OTLP/JSON) from JSON; '' when absent. */
function hex(id: Id | undefined): string {
  if (id === undefined) return '';
  return typeof id === 'string' ? id.toLowerCase() : Buffer.from(id).toString('hex');
}

/** An enum as its .proto name, whether it came as that name (protobuf) or as its number (OTLP/JSON). */
function enumName(names: Map<number, string>, value: string | number | undefined): string {
  if (typeof value === 'string') return value;
  return names.get(value ?? 0) ?? String(value);
}

function attributes(list: WireKeyValue[] | undefined): OtlpAttributes {
  const out: OtlpAttributes = {};
  for (const kv of list ?? []) out[kv.key ?? ''] = anyValue(kv.value);
  return out;
}

const ANY_VALUE_MEMBERS = [
  'stringValue',
  'boolValue',
  'intValue',
  'doubleValue',
  'arrayValue',
  'kvlistValue',
  'bytesValue',
  'stringValueStrindex',
] as const;

function anyValue(v: WireAnyValue | undefined): OtlpValue {
  if (!v) return null;
  const member = v.value ?? ANY_VALUE_MEMBERS.find((m) => v[m] !== undefined);
  switch (member) {
    case 'stringValue':
      return v.stringValue ?? '';
    case 'boolValue':
      return v.boolValue ?? false;
    case 'intValue':
      return BigInt(v.intValue ?? 0);
    case 'doubleValue':
      return Number(v.doubleValue ?? 0);
    case 'arrayValue':
      return (v.arrayValue?.values ?? []).map(anyValue);
    case 'kvlistValue':
      return attributes(v.kvlistValue?.values);
    case 'bytesValue':
      // Only ids are hex in OTLP/JSON; other bytes keep proto3 JSON's base64.
      return typeof v.bytesValue === 'string' ? Buffer.from(v.bytesValue, 'base64') : Buffer.from(v.bytesValue ?? []);
    case 'stringValueStrindex':
      return Number(v.stringValueStrindex ?? 0);
    default:
      return null;
  }
}

/** An OTLP/HTTP failure: the status and a google.rpc.Status body, as protobuf or, to a JSON request, JSON. */
function answerError(res: http.ServerResponse, status: number, message: string, type = PROTOBUF) {
  const code = GRPC_CODE[status] ?? 2; // UNKNOWN
  // google.rpc.Status is not among the OTLP protos; its two fields written by hand: code = 1 (varint), message = 2.
  const text = Buffer.from(message);
  const body =
    type === JSON_TYPE
      ? Buffer.from(JSON.stringify({ code, message }))
      : Buffer.concat([Buffer.from([0x08, code, 0x12]), varint(text.length), text]);
  res.writeHead(status, { 'content-type': type === JSON_TYPE ? JSON_TYPE : PROTOBUF, 'content-length': body.length });
  res.end(body);
}

/** The google.rpc.Code that says what each HTTP failure says. */
const GRPC_CODE: Record<number, number> = { 400: 3, 404: 5, 405: 12, 413: 8, 415: 3 };

function varint(n: number): Buffer {
  const bytes: number[] = [];
  while (n > 0x7f) {
    bytes.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  bytes.push(n);
  return Buffer.from(bytes);
}
