// The workflows a video worker registers (the bundle's entry point).
export { videoJob } from './video-job.ts';
