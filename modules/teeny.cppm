// teeny — the umbrella module: `import teeny;` gives the whole public API (of an embedded build:
// the typed models and what they are made of).
export module teeny;
import teeny.std;
export import teeny.core;
export import teeny.graph;
export import teeny.model;
export import teeny.ops;
export import teeny.cpu;
export import teeny.fixed;
#if !TEENY_EMBEDDED
export import teeny.io;
export import teeny.runtime;
export import teeny.cuda;
export import teeny.fixed.io;
#endif
#if TEENY_TRAINING
export import teeny.train;
#endif
