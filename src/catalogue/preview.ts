// PreviewBook: what the recorded usage of the last N days would have cost and earned under a
// proposed book, beside what it did. The service checks the document and the days; the engine
// (usage-preview.ts, over usage_records) computes the figures.
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { PreviewBookResponseSchema } from '../gen/gateway/v1/catalogue_pb.js';
import type { BookDocument } from './book-document.ts';

export interface BookPreview {
  /** `doc` has passed bookProblems; `days` is 1 to 366. */
  preview(doc: BookDocument, days: number): Promise<MessageInitShape<typeof PreviewBookResponseSchema>>;
}
