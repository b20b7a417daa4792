// The umbrella header: the only file users need to include. Everything lives in namespace ember.
//
//   #include <ember/ember.h>
//   auto x = ember::randn({64, 784});
//   auto w = ember::randn({128, 784});
//   auto y = ember::relu(ember::linear(x, w));
#pragma once
#include "ember/config.h"
#include "ember/core/allocator.h"
#include "ember/core/device.h"
#include "ember/core/dtype.h"
#include "ember/core/error.h"
#include "ember/core/factory.h"
#include "ember/core/shape.h"
#include "ember/core/tensor.h"
#include "ember/autograd/anomaly.h"
#include "ember/autograd/checkpoint.h"
#include "ember/autograd/engine.h"
#include "ember/autograd/grad_mode.h"
#include "ember/autograd/gradcheck.h"
#include "ember/autograd/node.h"
#include "ember/autograd/ops.h"
#include "ember/cuda/cuda.h"
#include "ember/nn/activations.h"
#include "ember/nn/layers.h"
#include "ember/nn/losses.h"
#include "ember/nn/module.h"
#include "ember/nn/serialize.h"
#include "ember/optim/adam.h"
#include "ember/optim/lr_scheduler.h"
#include "ember/optim/optimizer.h"
#include "ember/optim/sgd.h"
#include "ember/data/dataloader.h"
#include "ember/data/dataset.h"
#include "ember/data/idx.h"
#include "ember/data/mnist.h"
#include "ember/data/sampler.h"
#include "ember/data/tensor_dataset.h"
