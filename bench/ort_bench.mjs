// ONNX Runtime's latency per forward for one exported benchmark model (bench/run.sh runs it
// alongside bench-models and tools/bench_peers.py).
//
//   node bench/ort_bench.mjs --onnx DIR --model mlp|lenet|resnet18|tiny --batch B --threads N [--seconds S]
//   node bench/ort_bench.mjs --file MODEL.onnx --shape B,C,H,W --threads N [--seconds S] [--name NAME]
//
// Loads DIR/<model>_b<B>.onnx (written by `tools/bench_peers.py export DIR`), or any MODEL.onnx
// with one float input fed at --shape (bench/onnx_vs_ort.sh: the files teeny-run reads), with onnxruntime-node
// from build-bench/node_modules (or NODE_PATH / ORT_NODE_MODULE), session options
// intraOpNumThreads = N, interOpNumThreads = 1, graphOptimizationLevel 'all', executionMode
// 'sequential'; warms up, then times session.run() on one input tensor U(0, 1) for S seconds (at
// least 20 runs) and prints one JSON line:
//   {"runtime": "ort", "model", "batch", "threads", "p50_us", "p90_us", "min_us", "runs", "create_ms", "version"}
// ("model": --name, else the file's name without .onnx)
// create_ms is the session's creation (reading, optimising and planning the model).
// The time includes the Node.js binding's cost per call (input wrapping, output copy-out); the
// `tiny` model (one Linear(16, 16)) measures that floor.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = Object.fromEntries(
  process.argv.slice(2).reduce((pairs, arg, i, all) => (i % 2 === 0 ? [...pairs, [arg.replace(/^--/, ''), all[i + 1]]] : pairs), []),
);
const byFile = args.file !== undefined;
for (const required of byFile ? ['shape', 'threads'] : ['onnx', 'model', 'batch', 'threads']) {
  if (args[required] === undefined) {
    console.error('usage: node ort_bench.mjs --onnx DIR --model NAME --batch B --threads N [--seconds S]\n' +
                  `       node ort_bench.mjs --file MODEL.onnx --shape B,C,H,W --threads N [--seconds S] (missing --${required})`);
    process.exit(2);
  }
}
const threads = Number(args.threads);
const seconds = Number(args.seconds ?? 2);
const shapes = { mlp: [1, 28, 28], lenet: [1, 28, 28], resnet18: [3, 224, 224], tiny: [16] };
if (!byFile && !shapes[args.model]) {
  console.error(`unknown model '${args.model}' (${Object.keys(shapes).join(', ')})`);
  process.exit(2);
}
const dims = byFile ? args.shape.split(',').map(Number) : [Number(args.batch), ...shapes[args.model]];
if (dims.some((d) => !Number.isInteger(d) || d < 1)) {
  console.error(`--shape ${args.shape}: dims must be positive integers, e.g. 1,3,224,224`);
  process.exit(2);
}
const batch = dims[0];
const model = args.name ?? (byFile ? path.basename(args.file, '.onnx') : args.model);
const file = byFile ? args.file : path.join(args.onnx, `${args.model}_b${batch}.onnx`);

const require = createRequire(import.meta.url);
const modulePath = process.env.ORT_NODE_MODULE ?? path.join(here, '..', 'build-bench', 'node_modules', 'onnxruntime-node');
let ort;
try {
  ort = require(modulePath);
} catch (error) {
  console.error(`cannot load onnxruntime-node from ${modulePath}: ${error.message}`);
  process.exit(1);
}

const createStart = process.hrtime.bigint();
const session = await ort.InferenceSession.create(file, {
  intraOpNumThreads: threads,
  interOpNumThreads: 1,
  graphOptimizationLevel: 'all',
  executionMode: 'sequential',
});
const createMs = Number(process.hrtime.bigint() - createStart) / 1e6;
const data = new Float32Array(dims.reduce((a, b) => a * b, 1));
let seed = 42;
for (let i = 0; i < data.length; ++i) {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  data[i] = seed / 2147483648;
}
const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', data, dims) };

const now = () => process.hrtime.bigint();
const warmUntil = now() + BigInt(Math.round(Math.min(0.3, seconds / 4) * 1e9));
for (let i = 0; i < 5 || now() < warmUntil; ++i) await session.run(feeds);

const samples = [];
const stopAt = now() + BigInt(Math.round(seconds * 1e9));
while (samples.length < 20 || now() < stopAt) {
  const start = now();
  await session.run(feeds);
  samples.push(Number(now() - start) / 1e3);
}
samples.sort((a, b) => a - b);
console.log(JSON.stringify({
  runtime: 'ort', model, batch, threads,
  p50_us: samples[Math.floor(samples.length / 2)], p90_us: samples[Math.floor(samples.length * 0.9)],
  min_us: samples[0], runs: samples.length, create_ms: createMs,
  version: ort.env.versions?.common ?? 'unknown',
}));
await session.release();
