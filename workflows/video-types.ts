// What the video workflow, its activities and the gateway share: the workflow's input and
// state, the activities' signatures and the search attribute names. Types and constants
// only, so the workflow bundle pulls in nothing that does I/O.

export const VIDEO_WORKFLOW_TYPE = 'videoJob';
export const VIDEO_STATE_QUERY = 'state';
/** Update that returns once the upstream job exists, or once the job ended without one. */
export const VIDEO_CREATION_UPDATE = 'creation';

/** Custom search attributes (Keyword): find jobs in the Temporal UI by model, key prefix and status. */
export const VIDEO_MODEL_ATTRIBUTE = { name: 'VideoModel', type: 'KEYWORD' } as const;
export const VIDEO_KEY_PREFIX_ATTRIBUTE = { name: 'VideoKeyPrefix', type: 'KEYWORD' } as const;
export const VIDEO_STATUS_ATTRIBUTE = { name: 'VideoStatus', type: 'KEYWORD' } as const;
export const VIDEO_SEARCH_ATTRIBUTES = [
  VIDEO_MODEL_ATTRIBUTE,
  VIDEO_KEY_PREFIX_ATTRIBUTE,
  VIDEO_STATUS_ATTRIBUTE,
] as const;

/** As the HTTP routes show it (cancelled appears there as failed with error code "cancelled"). */
export type VideoStatus = 'queued' | 'in_progress' | 'completed' | 'failed' | 'cancelled';
export const TERMINAL_STATUSES: readonly VideoStatus[] = ['completed', 'failed', 'cancelled'];

/** Where the workflow is, finer than the status: what the Temporal UI's query shows. */
export type VideoPhase = 'creating' | 'generating' | 'downloading' | 'measuring' | 'settling' | 'releasing' | 'done';

export interface VideoJobError {
  /** content_policy_violation, upstream_rejected, upstream_failed, upstream_error, invalid_video, timeout, cancelled */
  code: string;
  /** Shown to the caller: the provider's words about the request, or a fixed text; never a server detail. */
  message: string;
}

/** What the creation update answers. */
export interface VideoCreation {
  /** The upstream job exists (the caller gets the job); false when the job ended before that. */
  created: boolean;
  /** Why it ended, when not created (a content-policy refusal, another 4xx, the upstream down). */
  error: VideoJobError | null;
}

/**
 * What became of a cancel (or a delete) of a running job: the provider dropped its job (nothing
 * is charged), or it would not, so the job ran on and is charged for what it produced.
 */
export type VideoCancellation = 'dropped' | 'refused_by_provider';

export interface VideoJobInput {
  jobId: string;
  /** The hold's request id: the settle and the release use it, so each happens once. */
  requestId: string;
  accountId: string;
  keyPrefix: string;
  model: string;
  provider: string;
  upstreamModel: string;
  prompt: string;
  seconds: number;
  size: string;
  /** Nano-USD as decimal strings (payloads are JSON: no bigint). */
  holdNano: string;
  /** USD per second of video, from the catalogue when the job was created. */
  pricePerSecondUsd: string;
  /** The price book version that price comes from (a decimal string); absent in jobs started before the book. */
  priceVersion?: string;
  /** The markup the job's hold was taken at: its version (a decimal string) and rate ("0.2"); absent in jobs started before markups (none). */
  markupVersion?: string;
  markupRate?: string;
  createdAtMs: number;
  pollInitialMs: number;
  pollMaxMs: number;
  jobTimeoutMs: number;
  holdTtlSeconds: number;
  /** False when the cluster has no custom search attributes registered (they could not be added). */
  searchAttributes: boolean;
}

export interface VideoJobState {
  jobId: string;
  requestId: string;
  status: VideoStatus;
  phase: VideoPhase;
  /** 0..100, as the upstream reports it. */
  progress: number;
  upstreamId: string | null;
  /** `<model>/<deployment>` that created the upstream job; null before (and for jobs from before deployments). */
  deployment: string | null;
  polls: number;
  /** Duration measured from the stored MP4, milliseconds rounded up; 0 until measured. */
  producedMs: number;
  holdNano: string;
  /** What was charged; "0" until settled, and for every job that did not complete. */
  costNano: string;
  contentKey: string | null;
  contentBytes: number;
  error: VideoJobError | null;
  /** Set once a cancel (or delete) of the running job was handled; null otherwise. */
  cancellation: VideoCancellation | null;
}

/** Where the upstream job was created; only `upstreamId` for a create from before deployments. */
export interface UpstreamJobCreated {
  upstreamId: string;
  /** `<model>/<deployment>`: every later call goes to its provider, and the usage row names it. */
  deployment?: string;
  provider?: string;
  /** What a second costs the operator at that deployment. */
  providerPricePerSecondUsd?: string;
}

export interface UpstreamJobStatus {
  status: 'queued' | 'in_progress' | 'completed' | 'failed';
  progress: number;
  /** Set when status is failed. */
  error: VideoJobError | null;
}

export interface JobOutcome {
  jobId: string;
  status: VideoStatus;
  progress: number;
  upstreamId: string | null;
  producedMs: number;
  costNano: string;
  contentKey: string | null;
  contentBytes: number;
  error: VideoJobError | null;
}

/**
 * The activities, each idempotent: a retry (after a crash, a timeout or a lost reply) has the
 * same effect as one call. Upstream calls throw retryable failures for 5xx, 429 and
 * timeouts, and non-retryable ones (ContentPolicy, UpstreamRejected) for what no retry fixes.
 */
export interface VideoActivities {
  /**
   * POST {base}/videos with the job id as Idempotency-Key (a retried create finds the same upstream
   * job), on the model's deployments in the router's order, moving on when one fails before the
   * job exists there (src/video/deployments.ts). `provider` and `upstreamModel` are the model's
   * own: what a create scheduled before deployments (no `model`) calls.
   */
  createUpstreamJob(a: {
    jobId: string;
    requestId?: string;
    accountId?: string;
    model?: string;
    provider: string;
    upstreamModel: string;
    prompt: string;
    seconds: number;
    size: string;
  }): Promise<UpstreamJobCreated>;
  /** GET {base}/videos/{id}; also renews the hold and records the progress on the job row. */
  pollUpstreamJob(a: {
    jobId: string;
    requestId: string;
    provider: string;
    upstreamId: string;
    holdTtlSeconds: number;
  }): Promise<UpstreamJobStatus>;
  /** GET {base}/videos/{id}/content into the video store (atomically; a retry rewrites it). */
  downloadVideo(a: {
    jobId: string;
    provider: string;
    upstreamId: string;
  }): Promise<{ contentKey: string; bytes: number }>;
  /** Duration from the MP4's own boxes (video track mdhd, else mvhd), in milliseconds rounded up. */
  measureVideo(a: { contentKey: string }): Promise<{ producedMs: number; units: string; timescale: string }>;
  /**
   * Charges min(produced, asked) seconds × price × (1 + markup), never above the hold; once per
   * request id. The usage row names `deployment` and its provider cost at its price.
   */
  settleCharge(a: {
    requestId: string;
    model: string;
    deployment?: string;
    providerPricePerSecondUsd?: string;
    producedMs: number;
    seconds: number;
    pricePerSecondUsd: string;
    priceVersion?: string;
    markupVersion?: string;
    markupRate?: string;
    createdAtMs: number;
  }): Promise<{ costNano: string; firstSettle: boolean }>;
  /** Settles at zero: the whole hold goes back; the usage row names the deployment the job's row does. A no-op when already settled. */
  releaseHold(a: {
    requestId: string;
    jobId?: string;
    model: string;
    reason: string;
    createdAtMs: number;
  }): Promise<void>;
  /** Writes the job's final state to its row (what the HTTP routes read); says whether its owner deleted it meanwhile. */
  recordOutcome(a: JobOutcome): Promise<{ deleted: boolean } | void>;
  /**
   * Asks the upstream to drop a job (DELETE {base}/videos/{id}). dropped: it did, or the job is
   * gone; false when it refused (a job past the point where it can be stopped is billed anyway)
   * or had already finished (it is billed: checked with a GET before the DELETE).
   * Throws a retryable failure while the upstream cannot be reached.
   */
  cancelUpstreamJob(a: { provider: string; upstreamId: string }): Promise<{ dropped: boolean } | void>;
  /** Removes a deleted job's stored video and the upstream's copy (best effort for the latter). */
  discardVideo(a: { contentKey: string | null; provider: string; upstreamId: string | null }): Promise<void>;
}

/** Failure types the activities throw; the non-retryable ones end the job at once. */
export const FAILURE = {
  contentPolicy: 'ContentPolicy',
  rejected: 'UpstreamRejected',
  unavailable: 'UpstreamUnavailable',
  invalidVideo: 'InvalidVideo',
  upstreamJobFailed: 'UpstreamJobFailed',
  timeout: 'VideoTimeout',
} as const;
