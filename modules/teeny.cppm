// teeny — the umbrella module: `import teeny;` gives the whole public API.
export module teeny;
export import teeny.core;
