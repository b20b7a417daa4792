// defines: the models Ember's benchmarks train (bench_train, bench_gpu, bench_dist), built one way everywhere:
// "mlp" (784-128-10), "mlp-big" (784-1024-1024-10), "cnn" (conv 32 5x5, pool, conv 64 5x5, pool, 128, 10) and
// "cnn-bn" (the CNN with BatchNorm2d after each conv). Inputs are [N, 1, 28, 28]. torch_train.cpp builds the same.
#pragma once
#include <ember/ember.h>

#include <string>

namespace bench {

inline ember::nn::Chain model(const std::string& kind) {
  using namespace ember;
  if (kind == "mlp") return nn::Chain{nn::Flatten(), nn::Dense(784, 128, nn::relu), nn::Dense(128, 10)};
  if (kind == "mlp-big")
    return nn::Chain{nn::Flatten(), nn::Dense(784, 1024, nn::relu), nn::Dense(1024, 1024, nn::relu),
                     nn::Dense(1024, 10)};
  EMBER_CHECK_VALUE(kind == "cnn" || kind == "cnn-bn", "bench::model: unknown model ", kind);
  const bool bn = kind == "cnn-bn";
  nn::Chain c{nn::Conv2d(1, 32, 5, {.padding = 2})};
  if (bn) c.push_back(nn::BatchNorm2d(32));
  for (nn::ChainItem m :
       {nn::ChainItem(nn::relu), nn::ChainItem(nn::MaxPool2d(2)), nn::ChainItem(nn::Conv2d(32, 64, 5, {.padding = 2}))})
    c.push_back(m);
  if (bn) c.push_back(nn::BatchNorm2d(64));
  for (nn::ChainItem m : {nn::ChainItem(nn::relu), nn::ChainItem(nn::MaxPool2d(2)), nn::ChainItem(nn::Flatten()),
                          nn::ChainItem(nn::Dense(3136, 128, nn::relu)), nn::ChainItem(nn::Dense(128, 10))})
    c.push_back(m);
  return c;
}

}  // namespace bench
