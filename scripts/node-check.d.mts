// Types of node-check.mjs (plain JavaScript so that an old Node can run it).
export declare const MINIMUM_NODE: string;
export declare function parseVersion(v: string): [number, number, number] | undefined;
export declare function atLeast(version: string, minimum: string): boolean;
export declare function nodeVersionProblem(version: string, minimum?: string): string | undefined;
