// teeny.train — training support, compiled only with -Dtraining=true (TEENY_TRAINING): parameters
// and gradient clipping, PyTorch's losses with their gradients, SGD / Adam / AdamW over parameter
// groups with checkpointable state, learning-rate schedules and a seeded mini-batch sampler. (The
// same optimizers and losses for a model trained on the GPU are teeny.cuda's.)
//
//   auto opt = Sgd<float>::create(params, {.lr = 0.1, .momentum = 0.9});
//   auto sampler = BatchSampler::create(n, 64, /*seed=*/1);
//   for (std::span<const std::int64_t> batch : sampler->batches()) {
//     /* gather_rows, forward */
//     auto loss = cross_entropy<float>(logits, labels, logits_grad);
//     /* backward */
//     opt->step();
//     opt->zero_grad();
//   }
export module teeny.train;
import teeny.std;
export import :parameter;
export import :loss;
export import :optimizer;
export import :schedule;
export import :data;
export import :trainable_model;
