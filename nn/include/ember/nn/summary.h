// defines: nn::summary, a model's table (each layer's path, type, output shape, parameters and the bytes it
// keeps for backward) and totals, worked out by memory::plan: nothing is computed and no memory is touched.
//
//   std::cout << nn::summary(model, {64, 1, 28, 28});
#pragma once
#include <string>
#include <vector>

#include "ember/core/shape.h"
#include "ember/nn/module.h"

namespace ember::nn {

// Runs a shape-only forward pass of `model` on an input of `input_shape` (the dtype and device of the model's
// first floating parameter; float32 on the CPU without one), then a backward of the output's sum, and
// tabulates it. Activation bytes are what a layer's call leaves allocated (its output and what it saves for
// backward), rounded as the device's allocator rounds them. The model, its parameters and their gradients are
// as they were afterwards.
std::string summary(const Module& model, const Shape& input_shape);
// The same for a module of several inputs (or an input that is not the model's float type, as token ids): the
// shapes, dtypes and devices of `example_inputs` (their values are not read; a planned zero tensor of each takes
// its place) are given to model(a, b, ...) (up to four) or model.call({...}). With several outputs, the backward
// is of the sum of every output that requires grad.
//
//   std::cout << nn::summary(bert, {ids, mask});
std::string summary(const Module& model, const std::vector<Tensor>& example_inputs);

}  // namespace ember::nn
